"""Two questions asked at once from parallel nodes: a name and a favourite colour."""

from langgraph.graph import START, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict


class Input(TypedDict):
    """No arguments: everything this tool needs, it asks for."""


class State(TypedDict, total=False):
    name: str
    colour: str


def ask_name(state: State) -> State:
    return {"name": interrupt("What is your name?")}


def ask_colour(state: State) -> State:
    return {"colour": interrupt("What is your favourite colour?")}


graph = (
    StateGraph(State, input_schema=Input)
    .add_node(ask_name)
    .add_node(ask_colour)
    .add_edge(START, "ask_name")
    .add_edge(START, "ask_colour")
    .compile()
)
