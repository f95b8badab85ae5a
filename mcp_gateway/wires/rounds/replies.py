"""The 2026-07-28 revision's rendering of a tool call's outcomes (calls/outcomes.py): a round of
questions is `input_required` with its `inputRequests` and the round's `requestState`, a run still
going is `input_required` with only a `requestState` (the client retries with it after a pause),
and a call that becomes an MCP task is the extension's CreateTaskResult."""

from __future__ import annotations

from typing import Any

from mcp_gateway.calls import links, request_state, waiter, waiting
from mcp_gateway.calls.outcomes import Asking, BecameTask, Finished, Outcome, StillRunning
from mcp_gateway.calls.tool_calls import Client, Waiting
from mcp_gateway.protocol import Message
from mcp_gateway.wires.mcp_tasks import mcp_task_handles


def client(message: Message) -> Client:
    """What a 2026-07-28 client can do: answer rounds, and, where it declared the Tasks extension on
    this request, hold a task."""
    declared = mcp_task_handles.declared(message.client_capabilities)
    return Client(
        capabilities=message.client_capabilities,
        rounds=True,
        tasks=declared,
        links=links.available(),
        starts_as_task=mcp_task_handles.starts_as_task(declared=declared),
        info=message.client_info,
    )


def reply(outcome: Outcome) -> dict[str, Any]:
    if isinstance(outcome, Finished):
        return outcome.result
    if isinstance(outcome, Asking):
        return {
            "resultType": "input_required",
            "inputRequests": outcome.requests,
            "requestState": request_state.of_round(outcome.round),
        }
    if isinstance(outcome, StillRunning):
        return {"resultType": "input_required", "requestState": request_state.of_round(outcome.round)}
    assert isinstance(outcome, BecameTask)
    # Staff decide later, or the run goes on: the client gets a task, and with it the final answer.
    return mcp_task_handles.create(outcome.call)


async def reply_after_run(step: Waiting, *, moved: waiter.Moved | None = None) -> dict[str, Any]:
    return await waiting.outcome_after_run(step, reply, moved=moved)
