"""Relays an MCP elicitation request of its own: asks for a name and a pronoun in one form."""

from langgraph.graph import START, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict


class Input(TypedDict):
    """No arguments: the tool asks for what it needs."""


class State(TypedDict, total=False):
    greeting: str


def greet(state: State) -> State:
    reply = interrupt(
        {
            "type": "mcp_elicitation",
            "requests": [
                {
                    "key": "who",
                    "message": "Who are you?",
                    "mode": "form",
                    "requested_schema": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "pronoun": {"type": "string", "enum": ["she", "he", "they"]},
                        },
                        "required": ["name"],
                    },
                }
            ],
        }
    )
    answer = reply["responses"]["who"]  # {"action": "accept", "content": {...}}, or a decline or cancel
    if answer["action"] != "accept":
        return {"greeting": "Hello, stranger!"}
    return {"greeting": f"Hello, {answer['content']['name']}!"}


graph = StateGraph(State, input_schema=Input).add_node(greet).add_edge(START, "greet").compile()
