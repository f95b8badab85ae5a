"""A session's own stream (MCP_OLDER_CLIENTS=answer): the `GET /mcp/` an older client opens after
initialize, for what the server says outside any request. Here that is the status of the caller's
tasks (2025-11-25, notifications/tasks/status): a task that waits for staff for hours moves on
while no request of its client is open.

    GET in a session, no Last-Event-ID ──► text/event-stream: a first event (its id, no data,
        `retry`), then notifications/tasks/status for each of the caller's tasks whose status
        changed since the stream opened (a task created meanwhile counts as changed)
    GET with the Last-Event-ID of such a stream ──► the same, after first telling each task's
        status as it is now: what changed while the client was away is in it

The statuses are read from the calls, as tasks/get reads them, so any web process serves any
session's stream; nothing of it is stored. A task's status is the whole Task and says all there
is, so telling the current one is the replay: the client needs no event it missed, only the last.
The stream wakes on the round and task notifications the waiter hears (waiter.py), and reads again
every MCP_LISTEN_REFRESH_SECONDS (every second without Redis), which finds tasks created meanwhile.
It ends when its session ends; its client reconnects after `retry` milliseconds.

Only 2025-11-25 has tasks: in an older revision's session the stream carries only comment lines.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from mcp_gateway.auth import Caller
from mcp_gateway.calls import waiter
from mcp_gateway.db_threads import in_db_thread
from mcp_gateway.models import Round, Session
from mcp_gateway.streams import sse
from mcp_gateway.wires.sessions import call_streams, older_tasks, sessions

# Event ids of a session's stream: `tasks.<n>`, numbered on from the Last-Event-ID it resumes.
PREFIX = "tasks."
# Without Redis (the embedded default) nothing wakes the stream: it reads its tasks this often.
EMBEDDED_REFRESH_SECONDS = 1.0


@dataclass(frozen=True)
class Watching:
    """A session's stream to serve, outside the database thread (views.py)."""

    session_id: uuid.UUID
    caller: Caller
    # The number of the last event its client has; None for a new stream (nothing to catch up on).
    after: int | None


def names_one(last_event_id: str | None) -> bool:
    """Whether a Last-Event-ID is one of a session's own stream (else: of a call's stream)."""
    return last_event_id is not None and last_event_id.strip().startswith(PREFIX)


def open_stream(session: Session, caller: Caller, last_event_id: str | None) -> Watching:
    """The session's stream, new or resumed (in a database thread)."""
    after = None
    if last_event_id is not None:
        number = last_event_id.strip()[len(PREFIX) :]
        # Not a number: a stream of this kind all the same, and what it missed is told anyway.
        after = int(number) if number.isdigit() and len(number) < 19 else 0
    call_streams.check_capacity()
    return Watching(session.pk, caller, after)


async def serve(watching: Watching) -> AsyncIterator[bytes]:
    """The stream's frames, until its session ends; at once and silently, when its client goes
    away (the ASGI server's disconnect cancels it)."""
    with call_streams.holding_a_stream():
        read_at = time.monotonic()
        read = await in_db_thread(_read)(watching)
        if read is None:
            return  # the session ended, or expired
        # A new stream tells what changes from now on; one resumed tells every status as it is.
        told = {} if watching.after is not None else {task_id: _said(n) for task_id, n in read[0].items()}
        number = watching.after or 0
        # Read first, then the first event: a task its client creates after that event is told.
        yield sse.frame(None, event_id=f"{PREFIX}{number}", retry=call_streams.RETRY_MS)
        keepalive = settings.MCP_STREAM_KEEPALIVE_SECONDS
        keepalive_at = time.monotonic() + keepalive
        while read is not None:
            statuses, rounds, calls = read
            for task_id, notification in statuses.items():
                if told.get(task_id) != _said(notification):
                    told[task_id] = _said(notification)
                    number += 1
                    yield sse.frame(notification, event_id=f"{PREFIX}{number}")
                    keepalive_at = time.monotonic() + keepalive
            refresh = settings.MCP_LISTEN_REFRESH_SECONDS if settings.REDIS_URL else EMBEDDED_REFRESH_SECONDS
            timeout = max(0.0, min(refresh, keepalive_at - time.monotonic()))
            await waiter.wait_for_changes(rounds, calls, timeout, since=read_at)
            if time.monotonic() >= keepalive_at:
                yield sse.PING
                keepalive_at = time.monotonic() + keepalive
            read_at = time.monotonic()
            read = await in_db_thread(_read)(watching)


def _said(notification: dict[str, Any]) -> tuple[str, str | None]:
    """What a status notification tells that matters: its status and message (its lastUpdatedAt
    and ttl move on their own)."""
    task = notification["params"]
    return task["status"], task.get("statusMessage")


def _read(watching: Watching) -> tuple[dict[str, dict[str, Any]], list[uuid.UUID], list[uuid.UUID]] | None:
    """Each watched task's status notification as it is now, by task id, and the rounds and calls
    whose change would change one; None once the session is gone."""
    session = Session.objects.filter(pk=watching.session_id).first()
    if session is None or not sessions.alive(session):
        return None
    sessions.keep_alive(session)  # an open stream keeps its session
    if session.protocol_version != older_tasks.REVISION or not watching.caller.can_read_threads:
        return {}, [], []
    statuses: dict[str, dict[str, Any]] = {}
    rounds: list[uuid.UUID] = []
    calls: list[uuid.UUID] = []
    for call in older_tasks.live_tasks(watching.caller)[: settings.MCP_LISTEN_MAX_TASKS]:
        latest = Round.objects.filter(call=call).order_by("-number").first()
        notification = older_tasks.status_notification(call, latest)
        statuses[notification["params"]["taskId"]] = notification
        calls.append(call.pk)
        if latest is not None:
            rounds.append(latest.pk)
    return statuses, rounds, calls
