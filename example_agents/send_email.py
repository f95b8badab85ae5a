"""An agent that sends email only after a person reviews each send_email call."""

from typing import Annotated, Literal

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AnyMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from example_agents.models import DeferredChatModel


@tool
def send_email(to: str, subject: str, body: str = "") -> str:
    """Send an email."""
    return f"sent to {to}: {subject}"


class Input(TypedDict):
    message: str


class State(TypedDict, total=False):
    message: str
    messages: Annotated[list[AnyMessage], add_messages]


def take_message(state: State) -> State:
    return {"messages": [HumanMessage(state["message"])]}


def build_email_agent(interrupt_mode: Literal["batched", "per_call"]):
    """The send_email agent; `interrupt_mode` is HumanInTheLoopMiddleware's. The tool takes the
    user's message as one string, `message`, as digital_twin does; the agent inside takes
    LangChain's message list."""
    agent = create_agent(
        model=DeferredChatModel(script_name="send_email"),
        tools=[send_email],
        middleware=[
            HumanInTheLoopMiddleware(interrupt_on={"send_email": True}, interrupt_mode=interrupt_mode)
        ],
    )
    return (
        StateGraph(State, input_schema=Input)
        .add_node(take_message)
        .add_node("agent", agent)
        .add_edge(START, "take_message")
        .add_edge("take_message", "agent")
        .compile()
    )


graph = build_email_agent("batched")
