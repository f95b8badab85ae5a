"""Sends the user to a URL (an OAuth consent page) to connect their calendar."""

from langgraph.graph import START, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict


class Input(TypedDict):
    """No arguments: everything this tool needs, it asks for."""


class State(TypedDict, total=False):
    status: str


def connect_calendar(state: State) -> State:
    reply = interrupt(
        {
            "type": "mcp_elicitation",
            "requests": [
                {
                    "key": "calendar_auth",
                    "message": "Connect your calendar to continue.",
                    "mode": "url",
                    "url": "https://example.com/oauth/calendar/start",
                }
            ],
        }
    )
    if reply["responses"]["calendar_auth"]["action"] != "accept":
        return {"status": "not connected"}
    return {"status": "connected"}


graph = StateGraph(State, input_schema=Input).add_node(connect_calendar).add_edge(START, "connect_calendar").compile()
