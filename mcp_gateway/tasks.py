"""Celery tasks: thin shells around the services.

Tasks are acknowledged late, so a worker killed mid-run leaves the round on the queue for the
next worker; run_round ignores a round that is no longer running or that another worker holds
(calls.run_round's lease), and LangGraph resumes from the last checkpoint, so a redelivered round
finishes once.
"""

import logging
from concurrent.futures import ThreadPoolExecutor
from functools import cache

from celery import shared_task
from django.conf import settings

from hitl_project.celery import RETRY_ON_INFRASTRUCTURE

from . import calls, cleanup

logger = logging.getLogger(__name__)


def enqueue_round(round_id: str) -> None:
    """Have a worker run the round. In the embedded default there is no broker (tasks are eager),
    and the round runs on a thread of this process instead: run eagerly, it would run inside the
    request's database thread, so the request could not answer "still running" at
    MCP_RUN_WAIT_SECONDS, and a few slow runs would hold the threads every request needs."""
    if settings.CELERY_TASK_ALWAYS_EAGER:
        _in_process().submit(_run_in_process, round_id)
    else:
        run_round.delay(round_id)


def _run_in_process(round_id: str) -> None:
    try:
        run_round.apply(args=(round_id,), throw=True)
    except Exception:  # nobody reads the future: say it here
        logger.exception("round %s failed in this process", round_id)


@cache
def _in_process() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=settings.CELERY_WORKER_CONCURRENCY, thread_name_prefix="round")


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
