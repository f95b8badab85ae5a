"""A tool call's wait for its run, without holding a thread: the outcome the round it stopped at
gives, rendered by the request's wire.

The run's notification (waiter.py) carries the round's record, so the common outcomes (a result,
a round of questions for a client asked in rounds) are made from it on the event loop, and
rendered there; the rest are made and rendered in one hop to a database thread, since a wire's
rendering may write (an MCP task recorded, an older client's call stream opened).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from mcp_gateway.calls import tool_calls, waiter
from mcp_gateway.calls.outcomes import Outcome
from mcp_gateway.db_threads import in_db_thread

R = TypeVar("R")


async def outcome_after_run(
    waiting: tool_calls.Waiting, render: Callable[[Outcome], R], *, moved: waiter.Moved | None = None
) -> R:
    """Wait for the run, then `render` what it comes to. `moved`: what a wait for the round that
    the caller made already ended with."""
    while True:
        req = waiting.req
        if moved is None:
            remaining = max(0.0, req.deadline - time.monotonic())
            moved = await waiter.wait_for(waiting.round.id, remaining, since=req.received_at)
        recorded = moved if isinstance(moved, dict) else None
        if recorded is not None and (outcome := tool_calls.outcome_from_record(waiting, recorded)) is not None:
            return render(outcome)
        answered = await in_db_thread(_after_wait)(waiting, render, timed_out=moved is False, recorded=recorded)
        if not isinstance(answered, tool_calls.Waiting):
            return answered
        waiting, moved = answered, None


def _after_wait(waiting: tool_calls.Waiting, render: Callable[[Outcome], R], **wait: Any) -> R | tool_calls.Waiting:
    step = tool_calls.after_wait(waiting, **wait)
    return step if isinstance(step, tool_calls.Waiting) else render(step)
