"""Celery tasks: thin shells around the services.

Tasks are acknowledged late, so a worker killed mid-run leaves the round on the queue for the
next worker; run_round ignores a round that is no longer running or that another worker holds
(calls.run_round's lease), and LangGraph resumes from the last checkpoint, so a redelivered round
finishes once.
"""

from celery import shared_task
from django.conf import settings

from hitl_project.celery import RETRY_ON_INFRASTRUCTURE

from . import calls, cleanup


@shared_task(
    bind=True,
    name="mcp_gateway.tasks.run_round",
    acks_late=True,
    **RETRY_ON_INFRASTRUCTURE,
)
def run_round(self, round_id: str) -> None:
    if calls.run_round(round_id) == calls.LEASED:
        # Another worker runs this round (we are a redelivered copy): look again when its lease ends.
        raise self.retry(countdown=settings.ROUND_LEASE_SECONDS, max_retries=None)


@shared_task(name="mcp_gateway.tasks.remove_expired_calls")
def remove_expired_calls() -> dict[str, int]:
    return {**cleanup.remove_expired_calls(), **cleanup.nudge_stalled_rounds()}
