"""The heartbeat of a process that runs graphs: it keeps the lease of every run the process holds,
and hands the runs back when the process is asked to stop.

A run (a round's, a staff decision's resume) holds a lease of RUN_LEASE_SECONDS. One thread per
process renews every lease its runs hold each RUN_HEARTBEAT_SECONDS, whatever the runs are doing
(a model call of ten minutes keeps its lease), so a lease runs out only when its process is gone:
killed, out of memory, on a machine that was lost. Then the run is stalled and another worker
takes it over from its last checkpoint (the stalled-run sweeps, and the requests waiting for it).
Renewing at a third of the lease leaves two missed beats before a takeover: a live holder is never
taken over unless its database is out of reach for the whole lease, when its run cannot save a
checkpoint either.

On SIGTERM a Celery worker stops taking tasks and waits for the ones running (Celery's warm
shutdown). Runs still going after WORKER_STOP_GRACE_SECONDS are handed back: the heartbeat stops
renewing them, each lease ends, its task is enqueued again, and the process exits at once, so
another worker carries them on from their last checkpoints instead of waiting for the lease or the
broker's visibility timeout.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from celery.signals import worker_shutting_down
from django.conf import settings
from django.db import close_old_connections, connection

logger = logging.getLogger(__name__)

# A handed-back run's task is enqueued to start this many seconds later: by then the process that
# handed it back has exited, so its thread, still in the run, never overlaps the next worker's.
HAND_BACK_COUNTDOWN = 1.0


@dataclass(frozen=True, eq=False)
class Held:
    """A lease a run of this process holds: `renew` extends it (False once the run's row has moved
    on, or another worker took it over), `hand_back` ends it and enqueues the run again, for
    another worker. `lost` is set once a renewal fails (the run's own lease knows it too, and
    sooner when it ran out by the clock: leases.Held.lost, which the runs ask)."""

    name: str
    renew: Callable[[], bool]
    hand_back: Callable[[], None]
    lost: threading.Event = field(default_factory=threading.Event)


_lock = threading.Lock()
_held: set[Held] = set()
# Set on SIGTERM: runs not started yet are left to other workers.
_stopping = threading.Event()
# Set at the end of the grace period: the leases still held are being handed back.
_handing_back = threading.Event()
_thread: threading.Thread | None = None


@contextlib.contextmanager
def holding(name: str, *, renew: Callable[[], bool], hand_back: Callable[[], None]) -> Iterator[Held]:
    """Keep a lease this run has just taken for as long as the block runs."""
    held = Held(name, renew, hand_back)
    with _lock:
        _held.add(held)
        _start_thread()
    try:
        yield held
    finally:
        with _lock:
            _held.discard(held)


def stopping() -> bool:
    """The process was asked to stop: a run that has not started leaves its task to another worker."""
    return _stopping.is_set()


def held_now() -> list[str]:
    """The names of the leases this process holds now."""
    with _lock:
        return sorted(h.name for h in _held)


def beat() -> int:
    """Renew every lease this process holds, now; how many were renewed."""
    with _lock:
        held = list(_held)
    renewed = 0
    for lease in held:
        if _handing_back.is_set():
            break  # renewing now would keep them from the next worker
        try:
            if lease.renew():
                renewed += 1
            else:
                lease.lost.set()
        except Exception:
            # The next beat tries again, a third of the lease later; the run itself saves its
            # checkpoints through the same database and fails the same way meanwhile.
            logger.warning("could not renew the lease of %s", lease.name, exc_info=True)
            connection.close()
    return renewed


def _start_thread() -> None:
    global _thread
    if _thread is None or not _thread.is_alive():
        _thread = threading.Thread(target=_beat_forever, name="lease-heartbeat", daemon=True)
        _thread.start()


def _beat_forever() -> None:
    while True:
        time.sleep(settings.RUN_HEARTBEAT_SECONDS)
        with _lock:
            if not _held:
                continue  # nothing to renew: an idle process's heartbeat touches no database
        try:
            # A persistent connection of this thread that the database dropped is replaced, as at
            # the start of a request or a task.
            close_old_connections()
        except Exception:
            # The database is out of reach: beat() fails and says so per lease, and the thread
            # lives on for the next beat (if it ended, no lease of this process would be renewed).
            connection.close()
        beat()


# --- a graceful stop ------------------------------------------------------------------------


@worker_shutting_down.connect(weak=False)
def _on_worker_stop(sig: str = "", how: str = "", exitcode: int = 0, **kwargs) -> None:
    """Celery's signal on SIGTERM (a warm shutdown) and SIGQUIT (a cold one), in the worker's main
    process. Runs from a signal handler: the waiting happens on a thread."""
    if _stopping.is_set():
        return  # a second signal: the first one's grace period runs on
    _stopping.set()
    # A cold shutdown (SIGQUIT) waits for nothing: Celery ends the process without its runs.
    grace = 0.0 if how == "Cold" else settings.WORKER_STOP_GRACE_SECONDS
    threading.Thread(
        target=hand_back_after_grace, args=(exitcode or 0, grace), name="graceful-stop", daemon=True
    ).start()


def hand_back_after_grace(exitcode: int, grace: float, *, exit: Callable[[int], None] = os._exit) -> None:
    """Let the runs this process holds finish within `grace` seconds; hand back the rest, then end
    the process, whose threads would otherwise go on running them (a thread cannot be stopped)."""
    _stopping.set()
    deadline = time.monotonic() + grace
    while held_now() and time.monotonic() < deadline:
        time.sleep(0.1)
    _handing_back.set()
    with _lock:
        left = list(_held)
    if not left:
        return  # Celery's own shutdown ends the process
    logger.warning("stopping: handing back %d run(s) still going: %s", len(left), ", ".join(h.name for h in left))
    for held in left:
        try:
            held.hand_back()
        except Exception:
            # Its lease runs out by itself within RUN_LEASE_SECONDS, and the stalled-run sweep
            # enqueues it then.
            logger.exception("could not hand back %s", held.name)
    sys.stdout.flush()
    sys.stderr.flush()
    exit(exitcode)
