"""The embedded default (`make run`: SQLite, no broker) is one web process that runs every round on
threads of its own (graph_runtime/work.py). This module does, in that process, what the worker and
beat processes of a deployment do for it, and is started by hitl_project/asgi.py."""

from __future__ import annotations

import fcntl
import logging
import os
import sys
import threading
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, connections

from hitl_project import telemetry

logger = logging.getLogger(__name__)

LOCK_FILE = "embedded.pid"
# The open file that holds this process's lock on its data directory, for as long as it runs.
_held: int | None = None


class DataDirectoryInUse(Exception):
    pass


def lock_data_directory(var_dir: Path) -> int:
    """Hold the data directory for this process alone, and return the open file that holds it.

    Two embedded processes on one directory would both take over the rounds a previous one left
    running, and run an agent's side effects twice. The lock is the OS's (flock), so it goes with
    its process however that ends: a process that died leaves no stale lock behind. The file
    holds the holder's PID, for the message of the process refused."""
    fd = os.open(var_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise DataDirectoryInUse(
            f"Another process (PID {holder}) is serving the data directory {var_dir}. "
            "Stop it first, or give this one a data directory of its own with HITL_VAR_DIR."
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd


def data_directory_or_exit() -> None:
    """Take this process's lock on its data directory, or refuse to start, before taking anything over."""
    global _held
    if _held is not None:
        return
    try:
        _held = lock_data_directory(settings.VAR_DIR)
    except DataDirectoryInUse as in_use:
        sys.stderr.write(f"Cannot start: {in_use}\n")
        sys.stderr.flush()
        raise SystemExit(1) from None


def start() -> None:
    data_directory_or_exit()
    # On a thread: uvicorn imports the application inside its event loop, where Django refuses
    # database queries. Joined, so the work is back on its way before the first request.
    recovery = threading.Thread(target=_take_over, name="take-over")
    recovery.start()
    recovery.join()
    _start_beat()


def _take_over() -> None:
    """Enqueue again the rounds, and the staff decisions' resumes, a previous process left running."""
    from approvals.resumes import approval_resumes_take_over
    from mcp_gateway.calls.sweep import take_over_running_rounds

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
    from graph_runtime.work import in_process_backlog

    left = in_process_backlog()
    if left:
        logger.warning("stopping with %d run(s) in flight or queued; the next start takes them over", left)
        logging.shutdown()
        telemetry.flush()  # os._exit skips the exit hook that would send the last spans
        os._exit(0)
