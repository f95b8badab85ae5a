"""An agent that sends email only after a person reviews each send_email call."""

from typing import Annotated, Literal

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from example_agents.models import DeferredChatModel


@tool(response_format="content_and_artifact")
def send_email(to: str, subject: str, body: str = "") -> tuple[str, dict[str, str]]:
    """Send an email."""
    # The artifact, which the model never sees, is what was sent: the arguments the tool ran with,
    # after any edit by the reviewer.
    return f"sent to {to}: {subject}", {"to": to, "subject": subject} | ({"body": body} if body else {})


class Input(TypedDict):
    message: str


class Output(TypedDict, total=False):
    answer: str  # the agent's last words
    sent: list[dict[str, str]]  # the e-mails that went out, with the arguments the reviewer let through


class State(TypedDict, total=False):
    message: str
    messages: Annotated[list[AnyMessage], add_messages]
    answer: str
    sent: list[dict[str, str]]


def take_message(state: State) -> State:
    return {"messages": [HumanMessage(state["message"])]}


def report(state: State) -> State:
    """The tool's result: what the agent said last and the e-mails that went out. A call the
    reviewer rejected, or answered in its place, never ran and has no artifact."""
    messages = state.get("messages") or []
    sent = [m.artifact for m in messages if isinstance(m, ToolMessage) and m.name == "send_email" and m.artifact]
    answer = next((m.text for m in reversed(messages) if isinstance(m, AIMessage)), "")
    return {"answer": answer, "sent": sent}


def build_email_agent(interrupt_mode: Literal["batched", "per_call"]):
    """The send_email agent; `interrupt_mode` is HumanInTheLoopMiddleware's. The tool takes the
    user's message as one string, `message`, as digital_twin does; the agent inside takes
    LangChain's message list. Its result is the declared Output, not the conversation."""
    agent = create_agent(
        model=DeferredChatModel(script_name="send_email"),
        tools=[send_email],
        middleware=[HumanInTheLoopMiddleware(interrupt_on={"send_email": True}, interrupt_mode=interrupt_mode)],
    )
    return (
        StateGraph(State, input_schema=Input, output_schema=Output)
        .add_node(take_message)
        .add_node("agent", agent)
        .add_node(report)
        .add_edge(START, "take_message")
        .add_edge("take_message", "agent")
        .add_edge("agent", "report")
        .add_edge("report", END)
        .compile()
    )


graph = build_email_agent("batched")
