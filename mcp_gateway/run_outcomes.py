"""Where a round's run stopped, as its row keeps it (Outcome) and as its notification tells it
(Recorded), and what a worker's attempt to lease a round got (Lease)."""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from django.db import models


class Rejected(TypedDict):
    """LangGraph's own validation refused the answers a round was resumed with."""

    message: str
    data: dict[str, Any]


class QuestionsOutcome(TypedDict, total=False):
    """The run paused with questions: the round's inputRequests, how answers become resume values
    (questions.py), and the interrupts as LangGraph raised them."""

    kind: Literal["questions"]
    requests: dict[str, dict[str, Any]]
    plans: list[dict[str, Any]]
    interrupts: list[dict[str, Any]]
    rejected: Rejected


class ResultOutcome(TypedDict, total=False):
    """The call ended with this CallToolResult: `handed_over` to another app (handover.py), whose
    notice it is, or `cancelled` by its task's client."""

    kind: Literal["result"]
    result: dict[str, Any]
    rejected: Rejected
    handed_over: bool
    cancelled: bool


class BreakpointOutcome(TypedDict):
    """The run stopped at a static breakpoint (interrupt_before/interrupt_after)."""

    kind: Literal["breakpoint"]
    values: dict[str, Any]


Outcome = QuestionsOutcome | ResultOutcome | BreakpointOutcome


class Recorded(TypedDict):
    """A round's notification (waiter.py): its rows as the run's transaction committed them, so
    the request waiting for it answers without reading them."""

    state: str
    outcome: Outcome
    finished_at: str
    with_request_state: bool
    expires_at: str


class Lease(models.TextChoices):
    """What a worker's attempt to lease a round got."""

    FIRST = "first", "leased, never run before"
    AGAIN = "again", "leased, after an attempt whose worker died or failed"
    HELD = "held", "another worker holds it"
    GONE = "gone", "no longer running"
    HANDED_BACK = "handed_back", "left to another worker: this one is stopping"
