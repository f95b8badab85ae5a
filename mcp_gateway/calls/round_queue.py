"""Rounds nobody runs: have a worker run a round, and enqueue it again when it looks stalled (its
worker died and its lease ran out, or its task never reached a worker).

Three things look for stalled rounds: the stalled-round sweep (Celery beat, every
STALLED_CHECK_SECONDS), every request waiting for a round (each time it looks at the round's row),
and the broker, which redelivers a dead worker's task after its visibility timeout. A request that
repeats the one that made a round does not wait for it to look stalled: it enqueues the round at
once unless a worker holds it (`enqueue_unless_held`).
"""

from __future__ import annotations

import logging
import uuid

from django.utils import timezone

from graph_runtime import work
from mcp_gateway.models import Round

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


def enqueue_unless_held(round_: Round) -> bool:
    """Enqueue a RUNNING round again at once unless a worker holds it, for a request that repeats
    the one that made it (the same first call by its idempotency key, the same answers to a round
    already answered). The request it repeats may have died between committing the round and
    enqueueing its run (its web host was killed, and its client sent it to another): without this,
    nothing would enqueue it until it looks stalled, RUN_STALLED_AFTER_SECONDS later. A second copy
    of a round still queued is harmless: the lease lets one run."""
    now = timezone.now()
    held = round_.leased_until is not None and round_.leased_until > now
    if round_.state != Round.State.RUNNING or held or work.in_flight_here(RUN_ROUND, str(round_.id)):
        return False
    try:
        enqueue_round(round_.id)
    except Exception:  # the broker refused it: the stalled path still finds the round
        logger.warning("round %s: could not enqueue it again", round_.id, exc_info=True)
        return False
    logger.info(
        "tool %s, call %s: round %s asked for again while no worker holds it; enqueued again",
        round_.call.graph,
        round_.call_id,
        round_.number,
    )
    return True


def nudge_stalled_rounds(*, limit: int = 1000) -> dict[str, int]:
    """Enqueue again the rounds whose worker died or whose task was never enqueued."""
    stalled = Round.objects.filter(Round.stalled(timezone.now()))[:limit]
    return {"rounds_nudged": sum(nudge(round_) for round_ in stalled)}
