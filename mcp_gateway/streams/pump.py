"""The one loop every event stream of /mcp/ runs: read, send, wait, keep alive, end.

    first frames (the wire's: a resumable stream's first event, an acknowledgement)
    ┌► read, on a database thread: the frames to send, whether that was the last of them, and
    │  what to wait for before the next read
    │  send them (sse.py frames)
    │  wait: for a round's run (waiter.wait_for), for a change of rounds or tasks
    │  (waiter.wait_for_changes), or for a future of the wire's own; never longer than the read
    │  asked (`poll`), than REFRESH_SECONDS, or than the next keep-alive
    └─ `: ping` when nothing was sent for MCP_STREAM_KEEPALIVE_SECONDS

Each wire keeps only what is its own: what a read gives (wires/sessions/call_streams.py,
wires/sessions/session_streams.py, wires/mcp_tasks/mcp_task_listen.py,
wires/rounds/call_notifications.py), how it frames a message and what a Last-Event-ID resumes.
The stream holds its place (capacity.py) until it ends, however it ends: its last read, an
error, or its client gone (Django's ASGI handler then cancels the generator).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from mcp_gateway.calls import waiter
from mcp_gateway.db_threads import in_db_thread
from mcp_gateway.streams import sse
from mcp_gateway.streams.capacity import Place

# How long a client waits before it reconnects a cut stream (the SSE `retry` field).
RETRY_MS = 1000
# Without Redis (the embedded default) nothing announces a task's change, an answer or a new task:
# a stream reads again this often. With Redis, MCP_LISTEN_REFRESH_SECONDS, for a notification lost.
EMBEDDED_REFRESH_SECONDS = 1.0


def refresh_seconds() -> float:
    """At most this long between two reads of a stream that waits for changes."""
    return settings.MCP_LISTEN_REFRESH_SECONDS if settings.REDIS_URL else EMBEDDED_REFRESH_SECONDS


@dataclass(frozen=True)
class Run:
    """Wait for a round's run to stop (waiter.wait_for)."""

    round_id: uuid.UUID


@dataclass(frozen=True)
class Changes:
    """Wait for one of these rounds to end or one of these calls' tasks to change
    (waiter.wait_for_changes), and read again at least every refresh_seconds()."""

    rounds: Sequence[uuid.UUID] = ()
    calls: Sequence[uuid.UUID] = ()


@dataclass
class Read:
    """What one read of a stream gave: the frames to send now, whether the stream ends after them,
    and what to wait for before reading again. `poll`: read again within this many seconds
    whatever happens (a run's progress, which nothing announces; a deadline of the wire's)."""

    frames: list[bytes] = field(default_factory=list)
    done: bool = False
    wait: Run | Changes | asyncio.Future[Any] | None = None
    poll: float | None = None


def opening(event_id: str) -> bytes:
    """A resumable stream's first event: its id and no data, with `retry`, so that a client cut
    before anything else still reconnects with Last-Event-ID (2025-11-25, "Resumability")."""
    return sse.frame(None, event_id=event_id, retry=RETRY_MS)


async def pump(read: Callable[[], Read], place: Place, *, first: Sequence[bytes] = ()) -> AsyncGenerator[bytes, None]:
    """The stream's frames: `first`, then what each `read` (called on a database thread) gives,
    until a read says done. Ends at once, silently, when the client goes away; gives back
    `place` however it ends."""
    try:
        keepalive = settings.MCP_STREAM_KEEPALIVE_SECONDS
        ping_at = time.monotonic() + keepalive
        for frame in first:
            yield frame
        while True:
            read_at = time.monotonic()
            step = await in_db_thread(read)()
            for frame in step.frames:
                yield frame
                ping_at = time.monotonic() + keepalive
            if step.done:
                return
            timeout = max(0.0, ping_at - time.monotonic())
            if step.poll is not None:
                timeout = min(timeout, max(0.0, step.poll))
            await _wait(step.wait, timeout, since=read_at)
            if time.monotonic() >= ping_at:
                yield sse.PING
                ping_at = time.monotonic() + keepalive
    finally:
        place.give_back()


def _wait(wait: Run | Changes | asyncio.Future[Any] | None, timeout: float, *, since: float) -> Awaitable[Any]:
    if isinstance(wait, Run):
        return waiter.wait_for(wait.round_id, timeout, since=since)
    timeout = min(timeout, refresh_seconds())
    if isinstance(wait, Changes):
        return waiter.wait_for_changes(list(wait.rounds), list(wait.calls), timeout, since=since)
    if isinstance(wait, asyncio.Future):
        return asyncio.wait({wait}, timeout=timeout)
    return asyncio.sleep(timeout)
