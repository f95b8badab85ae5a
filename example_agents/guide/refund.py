"""Refunds an order only once staff approve it in the admin; the MCP call ends at once."""

from langgraph.graph import START, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict


class Input(TypedDict):
    order: str


class State(TypedDict, total=False):
    order: str
    answer: str


def ask_staff(state: State) -> State:
    decision = interrupt(
        {
            "type": "staff_approval",
            "tool_calls": [{"name": "refund", "input": {"order": state["order"]}}],  # what staff see
            "visitor_message": f"Please refund order {state['order']}.",
        }
    )
    # Fail closed: anything but an explicit True is a no.
    if isinstance(decision, dict) and decision.get("approved") is True:
        return {"answer": f"Refunded order {state['order']}."}
    note = decision.get("note") if isinstance(decision, dict) else None
    return {"answer": f"Not refunded: {note or 'declined'}."}


graph = StateGraph(State, input_schema=Input).add_node(ask_staff).add_edge(START, "ask_staff").compile()
