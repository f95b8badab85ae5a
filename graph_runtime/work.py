"""Where a run happens: on a Celery worker, or on threads of this process in the embedded default.

The gateway's rounds and the staff decisions' resumes are both enqueued here, with one retry
policy for failures of our own infrastructure.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any

import psycopg
from celery import Task, current_app
from django.conf import settings
from django.db import DatabaseError
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

# Task options for work that must not be lost when our own infrastructure (the database, the
# broker) fails for a moment: retried with backoff. An agent's own errors are not retried; they
# become the tool's result.
RETRY_ON_INFRASTRUCTURE: dict[str, Any] = {
    # psycopg's own: LangGraph's checkpointer does not go through Django.
    "autoretry_for": (DatabaseError, RedisError, psycopg.OperationalError),
    "retry_backoff": 1,
    "retry_backoff_max": 30,
    "max_retries": 20,
}


def enqueue(task_name: str, *args: str, countdown: float | None = None) -> None:
    """Have a worker run the task (a round, a staff decision's resume), named as registered: the
    services that enqueue a task and the task that calls them do not import each other (each app
    imports its tasks module in AppConfig.ready, so every process knows them). In the embedded default
    there is no broker (tasks are eager), and it runs on a thread of this process instead: run
    eagerly, it would run in the thread that enqueued it, a request's, so the request could not
    answer "still running" at MCP_RUN_WAIT_SECONDS (nor the staff API 202 at
    APPROVAL_WAIT_SECONDS, nor the admin return at once), and a few slow runs would hold the
    threads every request needs. `countdown`: seconds before a worker may start it (on Celery)."""
    task = current_app.tasks[task_name]
    if settings.CELERY_TASK_ALWAYS_EAGER:
        _backlog(task_name, args, +1)
        try:
            # In a copy of this context, as a Celery task gets the enqueuing request's trace
            # context through its headers: the run's spans and log lines name its request's.
            _in_process().submit(contextvars.copy_context().run, _run_in_process, task, args)
        except BaseException:
            _backlog(task_name, args, -1)
            raise
    else:
        task.apply_async(args, countdown=countdown)


def _run_in_process(task: Task, args: tuple[str, ...]) -> None:
    try:
        task.apply(args=args, throw=True)
    except Exception:  # nobody reads the future: say it here
        logger.exception("task %s%s failed in this process", task.name, args)
    finally:
        _backlog(task.name, args, -1)


_backlog_lock = threading.Lock()
# The tasks enqueued on this process's threads that have not ended (queued or running), by name
# and arguments.
_in_flight: Counter[tuple[str, tuple[str, ...]]] = Counter()


def _backlog(task_name: str, args: tuple[str, ...], change: int) -> None:
    with _backlog_lock:
        _in_flight[task_name, args] += change
        if _in_flight[task_name, args] <= 0:
            del _in_flight[task_name, args]


def in_process_backlog() -> int:
    """Tasks enqueued on this process's threads that have not ended: queued or running."""
    with _backlog_lock:
        return sum(_in_flight.values())


def run_queue_full() -> bool:
    """Whether this process's run threads (the embedded default) have EMBEDDED_RUN_QUEUE_MAX tasks
    waiting for one of them, on top of those running. New work should then be refused before it is
    written (mcp_gateway/calls/overload.py): a queue without a bound makes every call wait longer and
    longer instead of some being told at once to come back. `enqueue` itself never refuses, since
    what it is given is committed already. On Celery the broker holds any backlog: never full."""
    if not settings.CELERY_TASK_ALWAYS_EAGER:
        return False
    return in_process_backlog() >= settings.CELERY_WORKER_CONCURRENCY + settings.EMBEDDED_RUN_QUEUE_MAX


def in_flight_here(task_name: str, *args: str) -> bool:
    """Whether this process has the task on its threads, queued or running (the embedded default).
    Such a run is alive whatever its row says: its lease may have run out while it waited for its
    turn on a thread, or for the database, but it will be run, and a second copy would only wait
    behind it."""
    with _backlog_lock:
        return (task_name, args) in _in_flight


@cache
def _in_process() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=settings.CELERY_WORKER_CONCURRENCY, thread_name_prefix="round")
