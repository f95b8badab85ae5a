"""Asks for typed input: a region and a replica count, validated by a Pydantic model."""

from typing import Literal

from langgraph.graph import START, StateGraph
from langgraph.types import interrupt
from pydantic import BaseModel, Field
from typing_extensions import TypedDict


class Deployment(BaseModel):
    region: Literal["us-east-1", "eu-west-1"]
    replicas: int = Field(ge=1, le=10)


class Input(TypedDict):
    """No arguments: everything this tool needs, it asks for."""


class State(TypedDict, total=False):
    region: str
    replicas: int


def plan_deployment(state: State) -> State:
    deployment = interrupt(
        "Where should the service deploy?", response_schema=Deployment
    )
    return {"region": deployment.region, "replicas": deployment.replicas}


graph = (
    StateGraph(State, input_schema=Input)
    .add_node(plan_deployment)
    .add_edge(START, "plan_deployment")
    .compile()
)
