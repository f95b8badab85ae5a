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
The stream (streams/pump.py) wakes on the round and task notifications the waiter hears
(waiter.py), and reads again every MCP_LISTEN_REFRESH_SECONDS (every second without Redis), which
finds tasks created meanwhile.
It ends when its session ends; its client reconnects after `retry` milliseconds.

Only 2025-11-25 has tasks: in an older revision's session the stream carries only comment lines.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from mcp_gateway.auth import Caller
from mcp_gateway.models import Session
from mcp_gateway.streams import capacity, pump, sse
from mcp_gateway.wires.sessions import older_tasks, sessions

# Event ids of a session's stream: `tasks.<n>`, numbered on from the Last-Event-ID it resumes.
PREFIX = "tasks."


@dataclass(frozen=True)
class Watching:
    """A session's stream to serve, outside the database thread (views.py)."""

    session_id: uuid.UUID
    caller: Caller
    # The number of the last event its client has; None for a new stream (nothing to catch up on).
    after: int | None
    place: capacity.Place


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
    return Watching(session.pk, caller, after, capacity.take(caller.identity))


def serve(watching: Watching) -> AsyncIterator[bytes]:
    """The stream's frames, until its session ends; at once and silently, when its client goes
    away."""
    return pump.pump(_Telling(watching).read, watching.place)


class _Telling:
    """One serving of a session's stream: what it told of each task, and its last event's number."""

    def __init__(self, watching: Watching) -> None:
        self.watching = watching
        self.told: dict[str, tuple[str, str | None]] | None = None  # None before the first read
        self.number = watching.after or 0

    def read(self) -> pump.Read:
        read = statuses(self.watching)
        if read is None:
            return pump.Read(done=True)  # the session ended, or expired
        told_now, rounds, calls = read
        frames = []
        if self.told is None:
            # A new stream tells what changes from now on; one resumed tells every status as it is.
            new = self.watching.after is None
            self.told = {task_id: _said(n) for task_id, n in told_now.items()} if new else {}
            # Read first, then the first event: a task its client creates after that event is told.
            frames.append(pump.opening(f"{PREFIX}{self.number}"))
        for task_id, notification in told_now.items():
            if self.told.get(task_id) != _said(notification):
                self.told[task_id] = _said(notification)
                self.number += 1
                frames.append(sse.frame(notification, event_id=f"{PREFIX}{self.number}"))
        return pump.Read(frames, wait=pump.Changes(rounds, calls))


def _said(notification: dict[str, Any]) -> tuple[str, str | None]:
    """What a status notification tells that matters: its status and message (its lastUpdatedAt
    and ttl move on their own)."""
    task = notification["params"]
    return task["status"], task.get("statusMessage")


def statuses(watching: Watching) -> tuple[dict[str, dict[str, Any]], list[uuid.UUID], list[uuid.UUID]] | None:
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
        latest = call.latest_round()
        notification = older_tasks.status_notification(call, latest)
        statuses[notification["params"]["taskId"]] = notification
        calls.append(call.pk)
        if latest is not None:
            rounds.append(latest.pk)
    return statuses, rounds, calls
