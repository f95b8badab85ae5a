"""Rolls a release out region by region, telling the client how far it has got."""

import logging
import time

from langgraph.config import get_stream_writer
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

# Its lines reach a 2026-07-28 client that asks for them (_meta logLevel) as notifications/message.
logger = logging.getLogger(__name__)

REGIONS = ("us-east-1", "eu-west-1", "ap-southeast-2")
# Stands for each region's own deployment, which takes a while.
SECONDS_PER_REGION = 0.7


class Input(TypedDict):
    version: str


class State(TypedDict, total=False):
    version: str
    regions: list[str]


def roll_out(state: State) -> State:
    report = get_stream_writer()
    done = []
    for number, region in enumerate(REGIONS, 1):
        logger.info("deploying %s to %s", state["version"], region)
        time.sleep(SECONDS_PER_REGION)
        done.append(region)
        # A task's statusMessage, and a 2026-07-28 client's notifications/progress (with the numbers).
        report({"message": f"{state['version']} is live in {region}", "progress": number, "total": len(REGIONS)})
    return {"regions": done}


graph = StateGraph(State, input_schema=Input).add_node(roll_out).add_edge(START, "roll_out").compile()
