"""Asks for typed input: a region and a replica count, validated by a Pydantic model."""

from typing import Annotated, Literal, NotRequired

from langgraph.graph import START, StateGraph
from langgraph.types import interrupt
from pydantic import BaseModel, Field
from typing_extensions import TypedDict


class Deployment(BaseModel):
    region: Literal["us-east-1", "eu-west-1"]
    replicas: int = Field(ge=1, le=10)


class Input(TypedDict):
    """Optionally the service to plan for; everything else this tool needs, it asks for."""

    # Mirrored by 2026-07-28 clients in the Mcp-Param-Service header, so a gateway in front of
    # the server can route by service without reading the body.
    service: NotRequired[Annotated[str, Field(json_schema_extra={"x-mcp-header": "Service"})]]


class State(TypedDict, total=False):
    service: str
    region: str
    replicas: int


def plan_deployment(state: State) -> State:
    service = state.get("service") or "the service"
    deployment = interrupt(f"Where should {service} deploy?", response_schema=Deployment)
    return {"region": deployment.region, "replicas": deployment.replicas}


graph = StateGraph(State, input_schema=Input).add_node(plan_deployment).add_edge(START, "plan_deployment").compile()
