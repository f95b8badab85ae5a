"""Books a table: asks, in words, whose name the booking is under."""

from langgraph.graph import START, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict  # not typing's, on Python 3.11


class Input(TypedDict):
    party_size: int


class State(TypedDict, total=False):
    party_size: int
    booking: str


def book(state: State) -> State:
    name = interrupt("Whose name is the booking under?")  # returns the answer, a string
    return {"booking": f"A table for {state['party_size']}, under {name}"}


graph = StateGraph(State, input_schema=Input).add_node(book).add_edge(START, "book").compile()
