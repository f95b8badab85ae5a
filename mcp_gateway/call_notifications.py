"""A 2026-07-28 tools/call that asks for its run's progress (`_meta.progressToken`): answered as
text/event-stream once there is something to tell, else as one JSON response.

    the run ends before it reports anything, within MCP_STREAM_KEEPALIVE_SECONDS
      ──► application/json: the result, exactly as without a token
    the run reports progress first (the graph's custom stream writer, or the step it is at, as a
    task's statusMessage tells it), or runs on past MCP_STREAM_KEEPALIVE_SECONDS
      ──► text/event-stream: notifications/progress, one per change, `progress` counting them;
          `: ping` while nothing changes; last the result (an input_required one too), and the
          stream ends

The SDK's server answers the same way (JSON unless the handler emits a notification or runs past
its keepalive), and the stream carries nothing but the request's own notifications and its
response: never a server request. Nothing here is a second state machine: the result is
dispatch.reply_after_run's, which waits for the round as a JSON answer would (waiter.py), and the
progress is what the worker writes to the call's row for a task's statusMessage (runs.py), read
every PROGRESS_SECONDS, so any web process streams what any worker runs, and the embedded default
alike. A client that goes away ends the stream only: the run goes on, and the call stays as
answerable as after any dropped request.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from . import dispatch, sse, tool_calls, waiter
from .db_threads import in_db_thread
from .models import ToolCall
from .protocol import INTERNAL_ERROR, Message, RpcError, result_body

logger = logging.getLogger(__name__)

# How often the run's progress is read from its call's row (nothing announces it).
PROGRESS_SECONDS = 1.0


@dataclass
class Notifying:
    """A call whose answer goes on an event stream (views.py serves it): the wait for its run, and
    the frames found before the stream started."""

    message: Message
    waiting: tool_calls.Waiting
    progress: _Progress
    frames: list[bytes] = field(default_factory=list)


@dataclass
class _Progress:
    call_id: uuid.UUID
    token: str | int
    last: tuple[str, Any] = ("", None)
    sent: float = 0  # the last `progress` sent

    def read(self) -> list[bytes]:
        """What changed since the last read, as frames (in a database thread). `progress` is the
        graph's own number where it gives one that grows, else one more than the last: it must
        grow (the protocol's rule)."""
        row = ToolCall.objects.filter(pk=self.call_id).values_list("progress", "progress_numbers").first()
        if row is None or not row[0] or row == self.last:
            return []
        self.last = row
        message, numbers = row
        given = (numbers or {}).get("progress")
        self.sent = given if given is not None and given > self.sent else self.sent + 1
        total = (numbers or {}).get("total") if given == self.sent else None
        return [sse.frame(sse.progress_notification(self.token, self.sent, message, total))]


async def reply_after_run(
    waiting: tool_calls.Waiting, message: Message, *, can_stream: bool
) -> dict[str, Any] | Notifying | Any:
    """dispatch.reply_after_run's answer, or, for a 2026-07-28 request that asked for progress
    and accepts an event stream, the stream to serve once the run has reported some."""
    token = dispatch.progress_token(message)
    if not (message.modern and can_stream and token is not None):
        return await dispatch.reply_after_run(waiting, message)
    # The call's progress as this request read it: an earlier round's, not this run's.
    call = waiting.round.call
    progress = _Progress(waiting.round.call_id, token, last=(call.progress, call.progress_numbers))
    req = waiting.req
    quiet_until = time.monotonic() + settings.MCP_STREAM_KEEPALIVE_SECONDS
    while True:
        # Only waits: nothing is decided until the run has moved on, or the stream starts.
        timeout = min(PROGRESS_SECONDS, quiet_until - time.monotonic(), req.deadline - time.monotonic())
        moved = await waiter.wait_for(waiting.round.id, max(0.0, timeout), since=req.received_at)
        if moved is not False or time.monotonic() >= req.deadline:
            return await dispatch.reply_after_run(waiting, message, moved=moved)
        frames = await in_db_thread(progress.read)()
        if frames or time.monotonic() >= quiet_until:
            return Notifying(message, waiting, progress, frames or [sse.PING])


async def serve(notifying: Notifying) -> AsyncIterator[bytes]:
    """The stream's frames: the progress found so far, each change of it, `: ping` while nothing
    changes, and last the response. Ends at once, silently, when the client goes away (the ASGI
    server's disconnect cancels it); only this request's wait ends with it."""
    message = notifying.message
    # Started here, in the loop that serves the stream (a WSGI server's is not the view's).
    reply = asyncio.ensure_future(dispatch.reply_after_run(notifying.waiting, message))
    try:
        for frame in notifying.frames:
            yield frame
        keepalive = settings.MCP_STREAM_KEEPALIVE_SECONDS
        keepalive_at = time.monotonic() + keepalive
        while not reply.done():
            await asyncio.wait({reply}, timeout=min(PROGRESS_SECONDS, max(0.0, keepalive_at - time.monotonic())))
            for frame in await in_db_thread(notifying.progress.read)():
                yield frame
                keepalive_at = time.monotonic() + keepalive
            if not reply.done() and time.monotonic() >= keepalive_at:
                yield sse.PING
                keepalive_at = time.monotonic() + keepalive
        yield sse.frame(_response(reply, message))
    finally:
        reply.cancel()


def _response(reply: asyncio.Future[Any], message: Message) -> dict[str, Any]:
    try:
        return result_body(message, reply.result())
    except RpcError as error:
        return error.body(message.id)
    except Exception:
        logger.exception("MCP request failed")
        return RpcError(INTERNAL_ERROR, "Internal error").body(message.id)
