"""Waiting for a round's run without a connection or a poll per waiting call.

The worker publishes on Redis when a round's run stops, with what it recorded (Round.recorded), so the
request waiting for it can answer without reading the row. Each event loop (one per web process under
uvicorn) keeps ONE pattern subscription to every round's channel, wakes the calls waiting for that
round, and remembers the rounds recorded in the last RECENT_SECONDS, so a round recorded before
its call starts waiting is found among the recent ones without reading the row first (a database
query and a thread hop per request); the record its notification carried, kept RECORD_SECONDS,
answers it as it answers a call that waited in time. Only a call whose round may have been
recorded before the subscription was up (the process's first calls, or after losing Redis) reads
its row once before it waits;
when the subscription comes back, every waiting call looks at its row again, and each re-reads it
every SAFETY_POLL seconds in any case, enqueueing its round again if the round's worker died. Without Redis
(the embedded default runs tasks in-process) the run's thread wakes the calls of its own process
(`_wake_here`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import threading
import time
import uuid
import weakref
from collections import deque
from functools import cache

from django.conf import settings

from mcp_gateway.calls.round_queue import nudge
from mcp_gateway.db_threads import in_db_thread
from mcp_gateway.models import Recorded, Round

logger = logging.getLogger(__name__)

CHANNEL_PREFIX = "hitl:round:"
# A task's call changed in a way no round's end tells (an answer or a cancel by its client, a staff
# decision): the subscriptions/listen streams watching it read it again (mcp_task_listen.py).
TASK_CHANNEL_PREFIX = "hitl:task:"
# A notification without the round's record: the waiting request reads the row.
PLAIN = b"1"
SAFETY_POLL = 10.0
CLIENT_NAME = "hitl-round-notifications"
# Longer than any gap between a round's end and a request starting to wait for it (a client coming
# back with its requestState after a cut connection).
RECENT_SECONDS = 60.0
# How long a recorded round's notification is kept as it came, for a call that starts waiting
# after it was heard: it answers from the record instead of reading the row on a database thread.
# Under load a run often ends before its request is back on the event loop to wait
# (docs/performance.md, "Throughput as clients grow"). Every web process hears every round, so a
# few seconds' worth is kept, not RECENT_SECONDS'.
RECORD_SECONDS = 5.0


@cache
def _publisher():
    import redis

    return redis.Redis.from_url(settings.REDIS_URL)


def notify(round_id: uuid.UUID | str, recorded: Recorded) -> None:
    if not settings.REDIS_URL:
        _wake_here(str(round_id), recorded)
        return
    try:
        message = json.dumps(recorded, separators=(",", ":"), ensure_ascii=False).encode()
    except (TypeError, ValueError):  # the row holds it all the same: waiters read it instead
        logger.warning("round %s: its record is not JSON; notified without it", round_id, exc_info=True)
        message = PLAIN
    try:
        _publisher().publish(f"{CHANNEL_PREFIX}{round_id}", message)
    except Exception:  # waiters re-read their row every SAFETY_POLL seconds anyway
        logger.warning("could not publish the end of round %s", round_id, exc_info=True)


def notify_task(call_id: uuid.UUID | str) -> None:
    """Tell the listen streams watching this call's task that it changed (they read it again)."""
    if not settings.REDIS_URL:
        return
    try:
        _publisher().publish(f"{TASK_CHANNEL_PREFIX}{call_id}", PLAIN)
    except Exception:  # the streams read their tasks again every MCP_LISTEN_REFRESH_SECONDS anyway
        logger.warning("could not publish a change of task %s", call_id, exc_info=True)


@in_db_thread
def _running(round_id: uuid.UUID) -> bool:
    return Round.objects.filter(pk=round_id, state=Round.State.RUNNING).exists()


@in_db_thread
def _running_else_nudged(round_id: uuid.UUID) -> bool:
    """Whether the round still runs; if its worker died (its lease ran out), it is enqueued again
    now, rather than at the next stalled-round sweep."""
    round_ = Round.objects.filter(pk=round_id, state=Round.State.RUNNING).first()
    if round_ is None:
        return False
    nudge(round_)
    return True


# Without Redis (the embedded default) the rounds run on threads of this very process: a run's end
# wakes the calls waiting for it directly, with its record, and is remembered for RECENT_SECONDS, so
# a call that starts waiting after the fact finds it without reading the row. A waiting call still
# reads its row every LOCAL_SAFETY_POLL seconds, for an end no run notified (a cancel before the
# run started). It used to poll the row every 2 to 100 ms instead: 32 waiting calls so kept the
# database threads that every request needs busy with reads
# (docs/performance.md, "The embedded default under load").
LOCAL_SAFETY_POLL = 1.0
_here_lock = threading.Lock()
_here: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Future[Moved]]]] = {}
_recorded_here: dict[str, tuple[float, Recorded]] = {}
_recorded_order: deque[tuple[float, str]] = deque()


def _wake_here(round_id: str, recorded: Recorded) -> None:
    now = time.monotonic()
    with _here_lock:
        waiting = _here.pop(round_id, ())
        _recorded_here[round_id] = (now, recorded)
        _recorded_order.append((now, round_id))
        while _recorded_order and _recorded_order[0][0] < now - RECENT_SECONDS:
            at, gone = _recorded_order.popleft()
            if _recorded_here.get(gone, (None,))[0] == at:
                del _recorded_here[gone]
    for loop, future in waiting:
        loop.call_soon_threadsafe(_settle, future, recorded)


def _settle(future: asyncio.Future[Moved], moved: Moved) -> None:
    if not future.done():
        future.set_result(moved)


async def _wait_here(round_id: str, deadline: float) -> Moved:
    loop = asyncio.get_running_loop()
    while True:
        waiting = (loop, loop.create_future())
        with _here_lock:
            if (recent := _recorded_here.get(round_id)) is not None:
                return recent[1]
            _here.setdefault(round_id, set()).add(waiting)
        try:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            try:
                return await asyncio.wait_for(waiting[1], min(LOCAL_SAFETY_POLL, remaining))
            except TimeoutError:
                if not await _running(uuid.UUID(round_id)):
                    return True
        finally:
            with _here_lock:
                if (same := _here.get(round_id)) is not None:
                    same.discard(waiting)
                    if not same:
                        del _here[round_id]


class _Listener:
    """One PSUBSCRIBE for all rounds, for the calls waiting in one event loop."""

    def __init__(self) -> None:
        self.waiting: dict[str, set[asyncio.Future[Moved]]] = {}
        # Rounds recorded lately, oldest first: found by a call that starts waiting after the fact.
        self.recent: set[str] = set()
        self._recent_order: deque[tuple[float, str]] = deque()
        # When each of those was last heard of (time.monotonic()), for waits that start after a read.
        self.heard: dict[str, float] = {}
        # The notifications of the rounds recorded in the last RECORD_SECONDS that nobody waited
        # for yet, as they came (parsed only for a call that turns up to wait), oldest first.
        self.records: dict[str, bytes] = {}
        self._records_order: deque[tuple[float, str]] = deque()
        # Set while the subscription is up; `since`: when it last came up (time.monotonic()).
        self.subscribed = asyncio.Event()
        self.since = math.inf
        self.task = asyncio.create_task(self._listen())

    async def _listen(self) -> None:
        import redis.asyncio as aioredis

        reconnecting = False
        while True:
            # Named, so CLIENT LIST tells the web's round subscriptions from Celery's connections.
            client = aioredis.Redis.from_url(settings.REDIS_URL, client_name=CLIENT_NAME)
            try:
                async with client.pubsub() as pubsub:
                    await pubsub.psubscribe(f"{CHANNEL_PREFIX}*", f"{TASK_CHANNEL_PREFIX}*")
                    self.since = time.monotonic()
                    self.subscribed.set()
                    if reconnecting:
                        # Notifications sent while the connection was down are lost: every waiting
                        # call looks at its row again.
                        for round_id in list(self.waiting):
                            self._wake(round_id, None, recorded=False)
                    async for message in pubsub.listen():
                        if message.get("type") == "pmessage":
                            self._wake(_key(message["channel"].decode()), message["data"])
            except asyncio.CancelledError:
                raise
            except Exception:  # Redis went away: reconnect, then wake every waiting call
                self.subscribed.clear()
                reconnecting = True
                logger.warning("round notifications lost their Redis connection; reconnecting", exc_info=True)
                await asyncio.sleep(0.5)
            finally:
                await client.aclose()

    def _wake(self, round_id: str, data: bytes | None, *, recorded: bool = True) -> None:
        futures = self.waiting.pop(round_id, ())
        moved: Moved = True
        if futures and data is not None and data != PLAIN:
            # Only in the process that waits for it: every web process hears every round.
            try:
                moved = json.loads(data)
            except ValueError:
                logger.warning("round %s: unreadable notification", round_id)
        if recorded:
            now = time.monotonic()
            if not futures and data is not None and data != PLAIN:
                self.records[round_id] = data
                self._records_order.append((now, round_id))
            while self._records_order and self._records_order[0][0] < now - RECORD_SECONDS:
                self.records.pop(self._records_order.popleft()[1], None)
            self.recent.add(round_id)
            self.heard[round_id] = now
            self._recent_order.append((now, round_id))
            while self._recent_order and self._recent_order[0][0] < now - RECENT_SECONDS:
                at, gone = self._recent_order.popleft()
                if self.heard.get(gone) == at:
                    self.recent.discard(gone)
                    del self.heard[gone]
        for future in futures:
            if not future.done():
                future.set_result(moved)

    def recorded(self, round_id: str) -> Moved:
        """A round among the recent ones: its record when its notification carried one and is
        still kept, True otherwise (the caller reads the row)."""
        data = self.records.pop(round_id, None)
        if data is None:
            return True
        try:
            return json.loads(data)
        except ValueError:
            logger.warning("round %s: unreadable notification", round_id)
            return True

    def register(self, round_id: str) -> asyncio.Future[Moved]:
        future = asyncio.get_running_loop().create_future()
        self.waiting.setdefault(round_id, set()).add(future)
        return future

    def forget(self, round_id: str, future: asyncio.Future[Moved]) -> None:
        futures = self.waiting.get(round_id)
        if futures is not None:
            futures.discard(future)
            if not futures:
                del self.waiting[round_id]


def _key(channel: str) -> str:
    """What a channel's waiters are registered under: a round's id, or "task:<call id>"."""
    if channel.startswith(TASK_CHANNEL_PREFIX):
        return f"task:{channel[len(TASK_CHANNEL_PREFIX) :]}"
    return channel[len(CHANNEL_PREFIX) :]


_listeners: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Listener] = weakref.WeakKeyDictionary()


async def _listener() -> _Listener:
    loop = asyncio.get_running_loop()
    listener = _listeners.get(loop)
    if listener is None or listener.task.done():
        listener = _listeners[loop] = _Listener()
    await asyncio.wait_for(listener.subscribed.wait(), 5)
    return listener


# What a wait ends with: the round's record as its run notified it (a dict), True when it may have
# moved on (the caller reads the row to know), False when the timeout came first.
Moved = Recorded | bool


async def wait_for(round_id: uuid.UUID, timeout: float, *, since: float) -> Moved:
    """Wait until the round may have moved on. `since`: a time.monotonic() before the round was
    enqueued."""
    deadline = time.monotonic() + timeout
    if not settings.REDIS_URL:
        return await _wait_here(str(round_id), deadline)

    listener = await _listener()
    if listener.since > since and not await _running(round_id):
        return True  # it may have been recorded before the subscription could hear it
    key = str(round_id)
    while True:
        # Registering and looking among the recent rounds happen in this event loop, where the
        # listener records notifications: one or the other sees the round recorded.
        future = listener.register(key)
        try:
            if key in listener.recent:
                return listener.recorded(key)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            try:
                return await asyncio.wait_for(future, min(SAFETY_POLL, remaining))
            except TimeoutError:
                # A notification may have been lost: the row says, and says whether the round's
                # worker is gone.
                if not await _running_else_nudged(round_id):
                    return True
        finally:
            listener.forget(key, future)


async def wait_for_changes(
    round_ids: list[uuid.UUID], call_ids: list[uuid.UUID], timeout: float, *, since: float
) -> bool:
    """Wait until one of these rounds ends or one of these calls' tasks changes, at most `timeout`
    seconds; True when one may have (a listen stream then reads its tasks again). `since`: a
    time.monotonic() before the caller last read them, so a change heard meanwhile counts.
    Without Redis (the embedded default) it only waits: the stream reads its tasks every time."""
    if not settings.REDIS_URL:
        await asyncio.sleep(timeout)
        return True
    if not round_ids and not call_ids:
        await asyncio.sleep(timeout)  # nothing to hear of (asyncio.wait takes no empty set)
        return False
    listener = await _listener()
    if listener.since > since:
        return True  # the subscription came up after that read: what happened before is unheard
    keys = [str(r) for r in round_ids] + [f"task:{c}" for c in call_ids]
    futures = [(key, listener.register(key)) for key in keys]
    try:
        # Registering and looking at what was heard happen in this event loop, where the listener
        # records notifications: one or the other sees a change.
        if any(listener.heard.get(key, -math.inf) >= since for key in keys):
            return True
        done, _ = await asyncio.wait([f for _, f in futures], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        return bool(done)
    finally:
        for key, future in futures:
            listener.forget(key, future)
