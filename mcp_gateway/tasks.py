"""Celery tasks: thin shells around the services.

Tasks are acknowledged late, so a worker killed mid-run leaves the round on the queue for the
next worker; run_round ignores a round that is no longer running or that another worker holds
(Round.take_lease), and LangGraph resumes from the last checkpoint, so a redelivered round
finishes once.
"""

from celery import shared_task
from django.conf import settings

from hitl_project.graphs.work import RETRY_ON_INFRASTRUCTURE

from . import runs, sweep
from .models import Lease


@shared_task(bind=True, name=runs.RUN_ROUND, acks_late=True, **RETRY_ON_INFRASTRUCTURE)
def run_round(self, round_id: str) -> None:
    if runs.run_round(round_id) == Lease.HELD:
        if self.request.is_eager:
            # The embedded default: the holder is a thread of this process (the leases of a previous
            # process end as it starts), which records the round. An eager retry would only be
            # raised back as an error; this copy (a nudge's) has nothing to do.
            return
        # Another worker runs this round (we are a redelivered copy): look again when its lease ends.
        raise self.retry(countdown=settings.RUN_LEASE_SECONDS, max_retries=None)


@shared_task(name="mcp_gateway.tasks.sweep_calls")
def sweep_calls() -> dict[str, int]:
    """Celery beat's "sweep-calls": remove expired calls, enqueue stalled rounds again."""
    return sweep.sweep_calls()
