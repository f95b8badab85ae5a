"""Rounds nobody runs: have a worker run a round, and enqueue it again when it looks stalled (its
worker died and its lease ran out, or its task never reached a worker).

Three things look for stalled rounds: the stalled-round sweep (Celery beat, every
STALLED_CHECK_SECONDS), every request waiting for a round (each time it looks at the round's row),
and the broker, which redelivers a dead worker's task after its visibility timeout.
"""

from __future__ import annotations

import logging
import uuid

from django.utils import timezone

from graph_runtime import work

from .models import Round

logger = logging.getLogger(__name__)

# The Celery task that runs a round (tasks.py); enqueued by name, so that the services that
# enqueue it and the task that calls them do not import each other.
RUN_ROUND = "mcp_gateway.tasks.run_round"


def enqueue_round(round_id: uuid.UUID | str, *, countdown: float | None = None) -> None:
    """Have a worker run the round."""
    work.enqueue(RUN_ROUND, str(round_id), countdown=countdown)


def nudge(round_: Round) -> bool:
    """Enqueue a RUNNING round again when nobody seems to run it: its lease ran out (the worker
    died), or it was never picked up (the process that enqueued it died before it could). A
    second copy of a queued round is harmless: the lease lets one run. A round this process has
    on its own threads (the embedded default) is never stalled: it is queued for a thread, or its
    run is waiting for the database, and its lease ran out meanwhile."""
    if not round_.is_stalled(timezone.now()) or work.in_flight_here(RUN_ROUND, str(round_.id)):
        return False
    logger.warning(
        "tool %s, call %s: round %s looks stalled; enqueueing it again",
        round_.call.graph,
        round_.call_id,
        round_.number,
    )
    enqueue_round(round_.id)
    return True


def nudge_stalled_rounds(*, limit: int = 1000) -> dict[str, int]:
    """Enqueue again the rounds whose worker died or whose task was never enqueued."""
    stalled = Round.objects.filter(Round.stalled(timezone.now()))[:limit]
    return {"rounds_nudged": sum(nudge(round_) for round_ in stalled)}
