"""Asks for contact details with a TypedDict as the response_schema."""

from typing import NotRequired

from langgraph.graph import START, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict  # not typing's, on Python 3.11


class Contact(TypedDict):
    email: str
    newsletter: NotRequired[bool]


class Input(TypedDict):
    """No arguments: the tool asks for what it needs."""


class State(TypedDict, total=False):
    contact: str


def ask_contact(state: State) -> State:
    contact = interrupt("How can we reach you?", response_schema=Contact)  # a dict
    wants = "with" if contact.get("newsletter") else "without"
    return {"contact": f"{contact['email']}, {wants} the newsletter"}


graph = StateGraph(State, input_schema=Input).add_node(ask_contact).add_edge(START, "ask_contact").compile()
