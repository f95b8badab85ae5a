"""Celery tasks: thin shells around the services.

Tasks are acknowledged late, so a worker killed mid-run leaves the round on the queue for the
next worker; run_round ignores a round that is no longer running or that another worker holds
(calls.run_round's lease), and LangGraph resumes from the last checkpoint, so a redelivered round
finishes once.
"""

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import cache

from celery import Task, shared_task
from django.conf import settings

from hitl_project.celery import RETRY_ON_INFRASTRUCTURE

from . import calls, cleanup

logger = logging.getLogger(__name__)


def enqueue_round(round_id: str) -> None:
    """Have a worker run the round."""
    enqueue(run_round, round_id)


def enqueue(task: Task, *args: str) -> None:
    """Have a worker run the task (a round, a staff decision's resume). In the embedded default
    there is no broker (tasks are eager), and it runs on a thread of this process instead: run
    eagerly, it would run in the thread that enqueued it, a request's, so the request could not
    answer "still running" at MCP_RUN_WAIT_SECONDS (nor the staff API 202 at
    APPROVAL_WAIT_SECONDS, nor the admin return at once), and a few slow runs would hold the
    threads every request needs."""
    if settings.CELERY_TASK_ALWAYS_EAGER:
        _backlog(+1)
        try:
            _in_process().submit(_run_in_process, task, args)
        except BaseException:
            _backlog(-1)
            raise
    else:
        task.delay(*args)


def _run_in_process(task: Task, args: tuple[str, ...]) -> None:
    try:
        task.apply(args=args, throw=True)
    except Exception:  # nobody reads the future: say it here
        logger.exception("task %s%s failed in this process", task.name, args)
    finally:
        _backlog(-1)


_counter_lock = threading.Lock()
_counter = 0


def _backlog(change: int) -> None:
    global _counter
    with _counter_lock:
        _counter += change


def in_process_backlog() -> int:
    """Tasks enqueued on this process's threads that have not ended: queued or running."""
    return _counter


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
        if self.request.is_eager:
            # The embedded default: the holder is a thread of this process (the leases of a previous
            # process end as it starts), which records the round. An eager retry would only be
            # raised back as an error; this copy (a nudge's) has nothing to do.
            return
        # Another worker runs this round (we are a redelivered copy): look again when its lease ends.
        raise self.retry(countdown=settings.ROUND_LEASE_SECONDS, max_retries=None)


@shared_task(name="mcp_gateway.tasks.remove_expired_calls")
def remove_expired_calls() -> dict[str, int]:
    return {**cleanup.remove_expired_calls(), **cleanup.nudge_stalled_rounds()}
