"""Quotes a stay: its result is the declared output, the price, not the state it worked with."""

from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict  # not typing's, on Python 3.11


class Input(TypedDict):
    nights: int


class Output(TypedDict):
    price: str  # the tool's result, and its outputSchema


class State(TypedDict, total=False):
    nights: int
    rate: int  # working state: kept in the thread, never in the result
    price: str


def look_up_rate(state: State) -> State:
    return {"rate": 120}


def quote(state: State) -> State:
    return {"price": f"{state['nights'] * state['rate']} EUR for {state['nights']} nights"}


graph = (
    StateGraph(State, input_schema=Input, output_schema=Output)
    .add_node(look_up_rate)
    .add_node(quote)
    .add_edge(START, "look_up_rate")
    .add_edge("look_up_rate", "quote")
    .compile()
)
