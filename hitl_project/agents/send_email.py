"""An agent that sends email only after a person reviews each send_email call."""

from typing import Literal

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.tools import tool

from hitl_project.agents.models import DeferredChatModel


@tool
def send_email(to: str, subject: str, body: str = "") -> str:
    """Send an email."""
    return f"sent to {to}: {subject}"


def build_email_agent(interrupt_mode: Literal["batched", "per_call"]):
    """The send_email agent; `interrupt_mode` is HumanInTheLoopMiddleware's."""
    return create_agent(
        model=DeferredChatModel(script_name="send_email"),
        tools=[send_email],
        middleware=[
            HumanInTheLoopMiddleware(interrupt_on={"send_email": True}, interrupt_mode=interrupt_mode)
        ],
    )


graph = build_email_agent("batched")
