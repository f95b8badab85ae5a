"""Sends the person to a page (a sign-in, a payment) instead of asking for anything sensitive."""

from langgraph.graph import START, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict


class Input(TypedDict):
    """No arguments: the tool asks for what it needs."""


class State(TypedDict, total=False):
    calendar: str


def connect(state: State) -> State:
    reply = interrupt(
        {
            "type": "mcp_elicitation",
            "requests": [
                {
                    "key": "sign_in",
                    "message": "Sign in to your calendar to continue.",
                    "mode": "url",
                    "url": "https://calendar.example.com/oauth/start",
                }
            ],
        }
    )
    # An accepted URL request has no content: the person says they finished on that page.
    done = reply["responses"]["sign_in"]["action"] == "accept"
    return {"calendar": "connected" if done else "not connected"}


graph = StateGraph(State, input_schema=Input).add_node(connect).add_edge(START, "connect").compile()
