"""The MCP methods this server answers, one small function each."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from hitl_project.graphs.registry import registry

from . import calls, limits, waiter
from .auth import Caller
from .db_threads import in_db_thread
from .protocol import INVALID_PARAMS, MODERN, Message, RpcError, negotiated_legacy_version, server_info

INSTRUCTIONS = (
    "Each tool runs a LangGraph agent. When an agent needs a person, the call returns "
    "input_required with elicitation requests; answer them and call the tool again."
)


def tool_descriptors() -> list[dict[str, Any]]:
    return [{"name": g.name, "description": g.description, "inputSchema": g.input_schema} for g in registry().values()]


def discover(message: Message) -> dict[str, Any]:
    return {
        "supportedVersions": [MODERN],
        "capabilities": {"tools": {"listChanged": False}},
        "instructions": INSTRUCTIONS,
        "ttlMs": 0,
        "cacheScope": "private",
    }


def initialize(message: Message) -> dict[str, Any]:
    return {
        "protocolVersion": negotiated_legacy_version(message.params.get("protocolVersion")),
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS,
    }


def list_tools(message: Message) -> dict[str, Any]:
    # Tools are per deployment, not per caller, but lists are never shared between callers.
    return {"tools": tool_descriptors(), "ttlMs": 0, "cacheScope": "private"}


def _tool_request(message: Message, caller: Caller) -> calls.ToolRequest:
    params = message.params
    context = params.get("context")
    if context is not None and not isinstance(context, dict):
        raise RpcError(INVALID_PARAMS, "context must be an object")
    responses = params.get("inputResponses") if message.modern else None
    state = params.get("requestState") if message.modern else None
    # Before anything is stored or resumed: answers within their limits, and no text PostgreSQL
    # cannot store in the JSON columns that keep arguments, context and answers.
    limits.check_input_responses(responses)
    limits.check_stored_values(arguments=params.get("arguments"), context=context, inputResponses=responses)
    return calls.ToolRequest(
        caller=caller,
        name=params["name"],
        arguments=params.get("arguments") or {},
        context=context,
        responses=responses if isinstance(responses, dict) else None,
        # JSON null counts as absent.
        request_state=state,
        modern=message.modern,
        capabilities=message.client_capabilities,
    )


@dataclass(frozen=True)
class Pending:
    """A tools/call whose answer waits for its graph's run (`finish`)."""

    req: calls.ToolRequest
    wait: calls.Wait
    # time.monotonic(): when the request began (before any run of its was enqueued), and when
    # it stops waiting for the run and answers "still running".
    began: float
    deadline: float


def start(message: Message, caller: Caller) -> dict[str, Any] | Pending:
    """Answer the request, or start its tool call: runs in a database thread, with the caller's
    authentication in the same hop (views.py)."""
    if message.method == "tools/call":
        req = _tool_request(message, caller)
        began = time.monotonic()
        step = calls.begin(req)
        if isinstance(step, calls.Wait):
            return Pending(req, step, began, began + settings.MCP_RUN_WAIT_SECONDS)
        return step
    handler = {"server/discover": discover, "initialize": initialize, "tools/list": list_tools}.get(message.method)
    return handler(message) if handler else {}


async def finish(pending: Pending) -> dict[str, Any]:
    """Wait for the run without holding a thread, then answer as the round it stopped at says."""
    req, step = pending.req, pending.wait
    while isinstance(step, calls.Wait):
        remaining = max(0.0, pending.deadline - time.monotonic())
        moved = await waiter.wait_for(step.round_id, remaining, since=pending.began)
        recorded = moved if isinstance(moved, dict) else None
        step = await in_db_thread(calls.settle)(req, step, timed_out=moved is False, recorded=recorded)
    return step
