"""Asks for a shipping choice with a dataclass as the response_schema."""

from dataclasses import dataclass

from langgraph.graph import START, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict


@dataclass
class Shipping:
    address: str
    express: bool = False


class Input(TypedDict):
    """No arguments: the tool asks for what it needs."""


class State(TypedDict, total=False):
    shipping: str


def ask_shipping(state: State) -> State:
    shipping = interrupt("Where should we ship it?", response_schema=Shipping)  # a Shipping
    return {"shipping": f"{'Express' if shipping.express else 'Standard'} to {shipping.address}"}


graph = StateGraph(State, input_schema=Input).add_node(ask_shipping).add_edge(START, "ask_shipping").compile()
