"""A 2026-07-28 tools/call that asks for its run's progress (`_meta.progressToken`) or its log
lines (`_meta["io.modelcontextprotocol/logLevel"]`): answered as text/event-stream once there is
something to tell, else as one JSON response.

    the run ends before it reports or logs anything, within MCP_STREAM_KEEPALIVE_SECONDS
      ──► application/json: the result, exactly as without them
    the run reports progress (the graph's custom stream writer, or the step it is at, as a task's
    statusMessage tells it) or logs a line at the level asked or above, or runs on past
    MCP_STREAM_KEEPALIVE_SECONDS
      ──► text/event-stream: notifications/progress, one per change, and notifications/message,
          one per line; `: ping` while nothing changes; last the result (an input_required one
          too), and the stream ends

The SDK's server answers the same way (JSON unless the handler emits a notification or runs past
its keepalive), and the stream carries nothing but the request's own notifications and its
response: never a server request. Nothing here is a second state machine: the result is
replies.reply_after_run's, which waits for the round as a JSON answer would (waiter.py), and the
progress and the lines are what the worker writes to the call's row (runs.py), read every
PROGRESS_SECONDS by the stream pump (streams/pump.py), so any web process streams what any worker
runs, and the embedded default alike. A caller already holding its quota of streams
(streams/capacity.py) gets the JSON response, without notifications. A client that goes away ends
the stream only: the run goes on, and the call stays as answerable as after any dropped request.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from mcp_gateway.calls import tool_calls, waiter
from mcp_gateway.db_threads import in_db_thread
from mcp_gateway.models import ToolCall
from mcp_gateway.protocol import INTERNAL_ERROR, Message, RpcError, result_body
from mcp_gateway.streams import capacity, pump, sse
from mcp_gateway.wires.rounds import replies

logger = logging.getLogger(__name__)

# How often the run's progress is read from its call's row (nothing announces it).
PROGRESS_SECONDS = 1.0


@dataclass
class Notifying:
    """A call whose answer goes on an event stream (views.py serves it): the wait for its run, and
    the frames found before the stream started."""

    message: Message
    waiting: tool_calls.Waiting
    notices: _Notices
    place: capacity.Place
    frames: list[bytes] = field(default_factory=list)
    # How the wait for the run that the request made ended, when it did (the run is over).
    moved: waiter.Moved | None = None


@dataclass
class _Notices:
    """What the stream has told of the call's row: its progress (with the request's token) and
    its log lines (with the level asked, which the worker applied)."""

    call_id: uuid.UUID
    token: str | int | None
    logs: bool
    last: tuple[str, Any] = ("", None)
    sent: float = 0  # the last `progress` sent
    lines: int = 0  # the log lines the call had, or this stream sent

    def read(self) -> list[bytes]:
        """What changed since the last read, as frames (in a database thread)."""
        row = ToolCall.objects.filter(pk=self.call_id).values_list("progress", "progress_numbers", "log_lines").first()
        if row is None:
            return []
        frames = []
        if self.logs:
            lines = row[2] or []
            new = lines[self.lines :]
            frames += [sse.frame({"jsonrpc": "2.0", "method": "notifications/message", "params": line}) for line in new]
            self.lines = max(self.lines, len(lines))
        if self.token is not None and row[0] and row[:2] != self.last:
            frames.append(sse.frame(self._progress(*row[:2])))
        return frames

    def _progress(self, message: str, numbers: dict[str, float] | None) -> dict[str, Any]:
        """`progress` is the graph's own number where it gives one that grows (with its `total`).
        Else, as for the step a run is at, it goes half-way to the next whole number: it grows, as
        the protocol requires, and leaves the graph's next whole number room to grow too, whenever
        the stream happened to read a step before the graph's first report."""
        assert self.token is not None
        self.last = (message, numbers)
        given = (numbers or {}).get("progress")
        if given is not None and given > self.sent:
            self.sent, total = given, (numbers or {}).get("total")
        else:
            self.sent, total = self.sent + (math.floor(self.sent) + 1 - self.sent) / 2, None
        return sse.progress_notification(self.token, self.sent, message, total)


async def reply_after_run(
    waiting: tool_calls.Waiting, message: Message, *, can_stream: bool
) -> dict[str, Any] | Notifying:
    """replies.reply_after_run's answer, or, for a 2026-07-28 request that asked for progress or
    log lines and accepts an event stream, the stream to serve once the run has told some."""
    token, level = message.progress_token, message.log_level
    if not (message.modern and can_stream and (token is not None or level is not None)):
        return await replies.reply_after_run(waiting)
    # The call's row as this request read it: what earlier rounds left there is not this run's.
    call = waiting.round.call
    notices = _Notices(
        call.pk, token, level is not None, last=(call.progress, call.progress_numbers), lines=len(call.log_lines or [])
    )
    req = waiting.req
    quiet_until = time.monotonic() + settings.MCP_STREAM_KEEPALIVE_SECONDS
    while True:
        # Only waits: nothing is decided until the run has moved on, or the stream starts.
        timeout = min(PROGRESS_SECONDS, quiet_until - time.monotonic(), req.deadline - time.monotonic())
        moved = await waiter.wait_for(waiting.round.id, max(0.0, timeout), since=req.received_at)
        if moved is not False:
            # A run over this soon has nothing left to report, but its log lines are all there:
            # they go before its result.
            if notices.logs and (frames := await in_db_thread(notices.read)()) and (place := _place(req)):
                return Notifying(message, waiting, notices, place, frames, moved=moved)
            return await replies.reply_after_run(waiting, moved=moved)
        frames = await in_db_thread(notices.read)()
        if frames or time.monotonic() >= quiet_until:
            if (place := _place(req)) is None:
                # No room for one more stream: the answer is the JSON one, without notifications
                # (the request accepts it, and its call is already running).
                return await replies.reply_after_run(waiting)
            # The stream ends with what the wait gives, as a JSON answer would: past
            # MCP_RUN_WAIT_SECONDS, a requestState (or a task) to come back with.
            return Notifying(message, waiting, notices, place, frames or [sse.PING])
        if time.monotonic() >= req.deadline:
            return await replies.reply_after_run(waiting, moved=False)


def _place(req: tool_calls.ToolRequest) -> capacity.Place | None:
    try:
        return capacity.take(req.caller.identity)
    except RpcError:
        return None


async def serve(notifying: Notifying) -> AsyncIterator[bytes]:
    """The stream's frames: the notifications found so far, each new one, `: ping` while nothing
    changes, and last the response. Ends at once, silently, when the client goes away; only this
    request's wait ends with it."""
    # Started here, in the loop that serves the stream (a WSGI server's is not the view's).
    reply = asyncio.ensure_future(replies.reply_after_run(notifying.waiting, moved=notifying.moved))
    telling = _Telling(notifying, reply)
    try:
        async with aclosing(pump.pump(telling.read, notifying.place, first=notifying.frames)) as frames:
            async for frame in frames:
                yield frame
    finally:
        reply.cancel()


@dataclass
class _Telling:
    notifying: Notifying
    reply: asyncio.Future[Any]

    def read(self) -> pump.Read:
        """The call's new notifications; once the reply is there, the last of them and the
        response (in a database thread)."""
        finished = self.reply.done()
        frames = self.notifying.notices.read()
        if not finished:
            # The run's progress and lines are read from its call's row: nothing announces them.
            return pump.Read(frames, wait=self.reply, poll=PROGRESS_SECONDS)
        frames.append(sse.frame(_response(self.reply, self.notifying.message)))
        return pump.Read(frames, done=True)


def _response(reply: asyncio.Future[Any], message: Message) -> dict[str, Any]:
    try:
        return result_body(message, reply.result())
    except RpcError as error:
        return error.body(message.id)
    except Exception:
        logger.exception("MCP request failed")
        return RpcError(INTERNAL_ERROR, "Internal error").body(message.id)
