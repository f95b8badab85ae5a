"""Celery tasks: thin shells around the services.

A worker's heartbeat renews the lease of every round it runs; a worker killed mid-run stops
renewing, and the stalled-round sweep (nudge_stalled_rounds, every STALLED_CHECK_SECONDS) enqueues
the round again once its lease has run out. Tasks are also acknowledged late, so the broker hands a
dead worker's task to another worker after its visibility timeout. run_round ignores a round that
is no longer running or that another worker holds (store.take_lease), and LangGraph resumes from
the last checkpoint, so a round taken over finishes once.
"""

import logging
import time

from celery import shared_task
from django.conf import settings

from graph_runtime.work import RETRY_ON_INFRASTRUCTURE
from mcp_gateway import metrics
from mcp_gateway.calls import round_queue, runs, sweep
from mcp_gateway.models import Lease

logger = logging.getLogger(__name__)


@shared_task(bind=True, name=round_queue.RUN_ROUND, acks_late=True, **RETRY_ON_INFRASTRUCTURE)
def run_round(self, round_id: str) -> None:
    if runs.run_round(round_id) == Lease.HELD:
        if self.request.is_eager:
            # The embedded default: the holder is a thread of this process (the leases of a previous
            # process end as it starts), which records the round. An eager retry would only be
            # raised back as an error; this copy (a nudge's) has nothing to do.
            return
        # Another worker runs this round (we are a redelivered or nudged copy): look again when its
        # lease would end, should its worker die meanwhile. The stalled-round sweep would find the
        # round then too; this copy is for a deployment whose beat is not running.
        raise self.retry(countdown=settings.RUN_LEASE_SECONDS, max_retries=None)


@shared_task(name="mcp_gateway.tasks.sweep_calls")
def sweep_calls() -> dict[str, int]:
    """Celery beat's "sweep-calls": remove expired calls with their threads, and older clients'
    expired sessions."""
    from mcp_gateway.wires.sessions import sessions

    started = time.monotonic()
    done = sweep.remove_expired_calls()
    if sessions_removed := sessions.remove_expired():
        # Only named when there were some: most deployments have no sessions (MCP_OLDER_CLIENTS).
        done["sessions_removed"] = sessions_removed
        logger.info("removed %d expired sessions", sessions_removed)
    metrics.CLEANUP_SECONDS.observe(time.monotonic() - started)
    return done


@shared_task(name="mcp_gateway.tasks.nudge_stalled_rounds", ignore_result=True)
def nudge_stalled_rounds() -> dict[str, int]:
    """Celery beat's "nudge-stalled-rounds": enqueue again the rounds whose worker died."""
    return round_queue.nudge_stalled_rounds()
