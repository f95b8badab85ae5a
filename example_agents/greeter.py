"""Relays an MCP elicitation request that asks for the user's name, then greets them."""

from langgraph.graph import START, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict


class Input(TypedDict):
    """No arguments: everything this tool needs, it asks for."""


class State(TypedDict, total=False):
    greeting: str


def ask_name(state: State) -> State:
    reply = interrupt(
        {
            "type": "mcp_elicitation",
            "requests": [
                {
                    "key": "user_name",
                    "message": "What is your name?",
                    "mode": "form",
                    "requested_schema": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}},
                        "required": ["name"],
                    },
                }
            ],
        }
    )
    answer = reply["responses"]["user_name"]  # {"action": "accept", "content": {...}}, or a decline or cancel
    if answer["action"] != "accept":
        return {"greeting": "Hello, stranger!"}
    return {"greeting": f"Hello, {answer['content']['name']}!"}


graph = StateGraph(State, input_schema=Input).add_node(ask_name).add_edge(START, "ask_name").compile()
