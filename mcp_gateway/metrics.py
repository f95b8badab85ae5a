"""The gateway's Prometheus metrics, counted where what they count happens. The project's /metrics
(hitl_project/metrics.py) serves them, added up over every process of the host, with the gauges it
reads from the tables. Names and labels are what docs/operating.md and its dashboard rely on.

Counts tied to a database change are made once that change has committed, so a transaction that
rolls back (and is retried) counts nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction
from prometheus_client import Counter, Histogram

TOOL_CALLS = Counter(
    "hitl_tool_calls",
    "Tool calls that ended, by tool and how: success, error, breakpoint, handed_over (to staff), "
    "declined (the client declined or cancelled a question), rejected (LangGraph refused a first "
    "call's answers), discarded (could go no further), expired (removed by the sweep unfinished).",
    ["tool", "outcome"],
)
ROUNDS = Counter(
    "hitl_rounds",
    "Rounds whose run ended in a worker, by tool and where it stopped: questions, success, error, "
    "breakpoint, handed_over, rejected (LangGraph refused the answers); infrastructure_error counts an "
    "attempt that failed on the service's side and is retried.",
    ["tool", "outcome"],
)
# From a few milliseconds (the web's part of a round) to the length of a slow model run.
_ROUND_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, float("inf"))
ROUND_SECONDS = Histogram(
    "hitl_round_seconds",
    "Where a round's time goes, by tool and phase: web (the request's arrival to its round's commit), "
    "queue (commit to a worker taking it), run (the graph's run and its recording), back (the recorded "
    "end to the response).",
    ["tool", "phase"],
    buckets=_ROUND_BUCKETS,
)
REQUESTS = Counter(
    "hitl_requests", "Requests to the MCP endpoint, by JSON-RPC method and HTTP status code.", ["method", "code"]
)
EXPIRED_CALLS_REMOVED = Counter(
    "hitl_expired_calls_removed", "Expired tool calls the sweep removed with their threads."
)
CLEANUP_SECONDS = Histogram(
    "hitl_cleanup_seconds",
    "How long one sweep of the calls took (removing expired calls with their threads).",
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, float("inf")),
)


# The outcomes each counter is counted with (observe.py, the sweep, the request side).
TOOL_CALL_OUTCOMES = ("success", "error", "breakpoint", "handed_over", "declined", "rejected", "discarded", "expired")
ROUND_OUTCOMES = ("questions", "success", "error", "breakpoint", "handed_over", "rejected", "infrastructure_error")


def served(tools: Iterable[str]) -> None:
    """A process that serves these tools starts their counters at 0: a series that first appears
    with its first count has no earlier sample, so rate() and increase() miss that count, and an
    alert on the first failed round after a deploy would not fire."""
    for tool in tools:
        for outcome in TOOL_CALL_OUTCOMES:
            TOOL_CALLS.labels(tool, outcome)
        for outcome in ROUND_OUTCOMES:
            ROUNDS.labels(tool, outcome)


def call_ended(tool: str, outcome: str) -> None:
    transaction.on_commit(lambda: TOOL_CALLS.labels(tool, outcome).inc())


def calls_removed(calls: list[tuple[str, bool]]) -> None:
    """The sweep removes expired calls, (tool, unfinished) each: an unfinished one ended there."""
    for tool, unfinished in calls:
        if unfinished:
            call_ended(tool, "expired")
    transaction.on_commit(lambda: EXPIRED_CALLS_REMOVED.inc(len(calls)))
