"""Asks for a rating with a JSON schema as the response_schema."""

from langgraph.graph import START, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict

RATING = {
    "type": "object",
    "properties": {
        "rating": {"type": "integer", "minimum": 1, "maximum": 5, "title": "Rating, 1 to 5"},
        "comment": {"type": "string"},
    },
    "required": ["rating"],
}


class Input(TypedDict):
    """No arguments: the tool asks for what it needs."""


class State(TypedDict, total=False):
    feedback: str


def ask_rating(state: State) -> State:
    answer = interrupt("How was your stay?", response_schema=RATING)  # a dict
    return {"feedback": f"{answer['rating']}/5 {answer.get('comment', '')}".strip()}


graph = StateGraph(State, input_schema=Input).add_node(ask_rating).add_edge(START, "ask_rating").compile()
