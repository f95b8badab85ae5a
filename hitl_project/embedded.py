"""The embedded default (`make run`: SQLite, no broker) is one web process that runs every round on
threads of its own (hitl_project/graphs/work.py). This module does, in that process, what the worker and
beat processes of a deployment do for it, and is started by hitl_project/asgi.py."""

from __future__ import annotations

import logging
import os
import threading

from django.db import DatabaseError, connections

from hitl_project import telemetry

logger = logging.getLogger(__name__)


def start() -> None:
    # On a thread: uvicorn imports the application inside its event loop, where Django refuses
    # database queries. Joined, so the work is back on its way before the first request.
    recovery = threading.Thread(target=_take_over, name="take-over")
    recovery.start()
    recovery.join()
    _start_beat()


def _take_over() -> None:
    """Enqueue again the rounds, and the staff decisions' resumes, a previous process left running."""
    from approvals.services import approval_resumes_take_over
    from mcp_gateway.sweep import take_over_running_rounds

    try:
        rounds, resumes = take_over_running_rounds(), approval_resumes_take_over()
    except DatabaseError:  # not migrated yet (`make run` migrates before it serves)
        logger.warning("could not look for the work a previous process left running", exc_info=True)
    else:
        if rounds or resumes:
            logger.info("took over %d round(s) and %d resume(s) a previous process left running", rounds, resumes)
    finally:
        connections.close_all()


def _start_beat() -> None:
    """Run CELERY_BEAT_SCHEDULE on a thread, with Celery's own embedded beat: without it expired
    calls with their checkpoints, and approvals nobody decided, would stay in the SQLite files for
    ever. Without a broker tasks are eager, so each due task runs on that thread."""
    from celery.beat import EmbeddedService, Scheduler

    from hitl_project.celery import app

    # The in-memory Scheduler, not beat's shelve file: the schedule is only intervals, which may
    # start again from the server's start.
    EmbeddedService(app, thread=True, scheduler_cls=Scheduler).start()


async def lifespan(scope, receive, send) -> None:
    """uvicorn's lifespan messages (Django has no lifespan support), for the stop (Ctrl-C, SIGTERM).

    A stop must not wait for the runs on this process's threads: Python's exit joins them, for as
    long as an agent takes, and meanwhile refuses them the threads LangGraph saves checkpoints on,
    so a run that ended during the stop was recorded as the tool's failure ("cannot schedule new
    futures after shutdown") and its answer was lost. Once uvicorn has served its last request, a
    process with runs in flight or queued ends at once, as a crash would: their rows say RUNNING,
    and the next start takes them over (`_take_over`) from their last checkpoints."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            _stop()
            return


def _stop() -> None:
    from hitl_project.graphs.work import in_process_backlog

    left = in_process_backlog()
    if left:
        logger.warning("stopping with %d run(s) in flight or queued; the next start takes them over", left)
        logging.shutdown()
        telemetry.flush()  # os._exit skips the exit hook that would send the last spans
        os._exit(0)
