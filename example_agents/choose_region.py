"""Asks a plain text question: which region the service should deploy to."""

from langgraph.graph import START, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict


class Input(TypedDict):
    """No arguments: everything this tool needs, it asks for."""


class State(TypedDict, total=False):
    region: str


def choose_region(state: State) -> State:
    region = interrupt("Which region should the service deploy to?")
    return {"region": region}


graph = StateGraph(State, input_schema=Input).add_node(choose_region).add_edge(START, "choose_region").compile()
