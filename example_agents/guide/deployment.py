"""Plans a deployment from a typed form: a Pydantic model as the response_schema."""

from typing import Literal

from langgraph.graph import START, StateGraph
from langgraph.types import interrupt
from pydantic import BaseModel, Field
from typing_extensions import TypedDict


class Deployment(BaseModel):
    region: Literal["us-east-1", "eu-west-1"]
    replicas: int = Field(ge=1, le=10, description="How many copies to run")


class Input(TypedDict):
    """No arguments: the tool asks for what it needs."""


class State(TypedDict, total=False):
    plan: str


def plan(state: State) -> State:
    deployment = interrupt("Where should the service deploy?", response_schema=Deployment)  # a Deployment
    return {"plan": f"{deployment.replicas} replica(s) in {deployment.region}"}


graph = StateGraph(State, input_schema=Input).add_node(plan).add_edge(START, "plan").compile()
