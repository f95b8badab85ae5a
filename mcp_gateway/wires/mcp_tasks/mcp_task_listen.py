"""subscriptions/listen with task status notifications (docs/rules.md, "Task notifications", on
2026-07-28's subscriptions/listen): the response to the request is a
text/event-stream that carries, in order,

    notifications/subscriptions/acknowledged   the task ids the server agreed to watch
    notifications/tasks                        the whole DetailedTask, as tasks/get reads it then:
                                               once at the start, then at every change
    the listen request's result                the stream ended gracefully (its tasks all ended,
                                               or MCP_LISTEN_MAX_SECONDS passed): listen again

each frame stamped with the request's id under _meta["io.modelcontextprotocol/subscriptionId"],
as the SDK's ListenHandler stamps its frames. Nothing else rides the stream (the extension: no
notifications/progress or notifications/message on it).

Only task ids are honoured. An id that is not the caller's task (unknown, another caller's,
removed) is left out of the acknowledgement, exactly as an unknown one is: the stream does not
tell a caller which ids exist. A client that asks for task notifications without declaring the
extension on the request gets -32021, before any stream starts.

Any web process serves any task: a stream (streams/pump.py) wakes on the round notifications the waiter already
hears (waiter.py) and on a task channel the request side and staff decisions publish on; it then
reads its tasks from the database. It also reads them every MCP_LISTEN_REFRESH_SECONDS, which
delivers a graph's progress (statusMessage) and makes up for a notification lost with Redis.
Without Redis (the embedded default) that reading is all it does, every second.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY

from mcp_gateway import observe
from mcp_gateway.auth import Caller
from mcp_gateway.models import Round, ToolCall
from mcp_gateway.protocol import INVALID_PARAMS, Message, RpcError, result_body
from mcp_gateway.streams import capacity, pump, sse
from mcp_gateway.wires.mcp_tasks import mcp_task_handles, mcp_task_methods

METHOD = "subscriptions/listen"


@dataclass(frozen=True)
class Watched:
    task_id: str
    call_id: uuid.UUID


@dataclass(frozen=True)
class Listening:
    """A listen request accepted: the stream to serve, outside the database thread (views.py), in
    the place it holds (streams/capacity.py)."""

    message: Message
    caller: Caller
    tasks: tuple[Watched, ...]
    place: capacity.Place


def listen(message: Message, caller: Caller) -> Listening:
    """Check a subscriptions/listen request and choose the tasks it watches (in a database thread)."""
    notifications = message.params.get("notifications")
    task_ids = notifications.get("taskIds") if isinstance(notifications, dict) else None
    if task_ids is not None:
        if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
            raise RpcError(INVALID_PARAMS, "Invalid params: notifications.taskIds must be a list of strings")
        if len(task_ids) > settings.MCP_LISTEN_MAX_TASKS:
            raise RpcError(
                INVALID_PARAMS,
                f"Invalid params: at most {settings.MCP_LISTEN_MAX_TASKS} taskIds per subscriptions/listen",
                {"limit": settings.MCP_LISTEN_MAX_TASKS, "received": len(task_ids)},
            )
        if not mcp_task_handles.declared(message.client_capabilities):
            # The extension: task notifications for a client that did not declare it are -32021.
            raise mcp_task_handles.missing_capability(
                "Task status notifications belong to the MCP Tasks extension, which this request does not declare."
            )
    place = capacity.take(caller.identity)
    watched: dict[str, Watched] = {}
    calls: dict[uuid.UUID, ToolCall] = {}
    for task_id in task_ids or ():
        call = _own_task(task_id, caller)
        if call is not None:
            watched[task_id] = Watched(task_id, call.pk)
            calls[call.pk] = call
    observe.tasks_known(list(calls.values()))
    return Listening(message, caller, tuple(watched.values()), place)


def _own_task(task_id: str, caller: Caller) -> ToolCall | None:
    """The caller's task, or None for every id that is not one (not told apart)."""
    if not caller.can_read_threads:
        return None
    try:
        return mcp_task_handles.verified_call(task_id, caller=caller.identity)
    except RpcError:
        return None


def stream(listening: Listening) -> AsyncIterator[bytes]:
    """The listen stream's frames. Ends gracefully when every watched task has ended (or gone) or
    after MCP_LISTEN_MAX_SECONDS; at once, silently, when the client goes away."""
    agreed = {"taskIds": [w.task_id for w in listening.tasks]} if listening.tasks else {}
    meta = {SUBSCRIPTION_ID_META_KEY: listening.message.id}
    acknowledged = {
        "method": "notifications/subscriptions/acknowledged",
        "params": {"notifications": agreed, "_meta": meta},
    }
    return pump.pump(_Listened(listening).read, listening.place, first=[_frame(acknowledged)])


class _Listened:
    """One listen stream: the tasks it still watches, what it sent of each, and when it ends."""

    def __init__(self, listening: Listening) -> None:
        self.listening = listening
        self.meta = {SUBSCRIPTION_ID_META_KEY: listening.message.id}
        self.watching = list(listening.tasks)
        self.sent: dict[str, dict[str, Any]] = {}
        self.end_at = time.monotonic() + settings.MCP_LISTEN_MAX_SECONDS

    def read(self) -> pump.Read:
        frames = []
        latest_rounds: list[uuid.UUID] = []
        if self.watching:
            tasks, latest_rounds = _read(self.listening, self.watching)
            for watched in list(self.watching):
                if watched.task_id not in tasks:
                    self.watching.remove(watched)  # removed meanwhile: nothing more will come of it
                    continue
                task = tasks[watched.task_id]
                if task is None:
                    continue
                if task != self.sent.get(watched.task_id):
                    self.sent[watched.task_id] = task
                    frames.append(_frame({"method": "notifications/tasks", "params": {**task, "_meta": self.meta}}))
                if task["status"] in mcp_task_methods.TERMINAL:
                    self.watching.remove(watched)
        remaining = self.end_at - time.monotonic()
        if not self.watching or remaining <= 0:
            frames.append(_frame(result_body(self.listening.message, {"_meta": self.meta})))
            return pump.Read(frames, done=True)
        calls = [w.call_id for w in self.watching]
        return pump.Read(frames, wait=pump.Changes(latest_rounds, calls), poll=remaining)


def _read(listening: Listening, watching: list[Watched]) -> tuple[dict[str, dict[str, Any] | None], list[uuid.UUID]]:
    """Each watched task as tasks/get would answer it now (None: it cannot be sent; absent: it is
    gone), and the rounds whose end would change one of them."""
    tasks: dict[str, dict[str, Any] | None] = {}
    rounds: list[uuid.UUID] = []
    for watched in watching:
        call = _own_task(watched.task_id, listening.caller)
        if call is None:
            continue
        try:
            tasks[watched.task_id] = mcp_task_methods.detailed(
                call, watched.task_id, listening.message.client_capabilities
            )
        except RpcError:
            # Questions in an elicitation mode this client did not declare: tasks/get answers
            # -32021; the stream sends nothing of them, and goes on watching the task.
            tasks[watched.task_id] = None
        latest = Round.objects.filter(call_id=call.pk).order_by("-number").values_list("pk", flat=True).first()
        if latest is not None:
            rounds.append(latest)
    return tasks, rounds


def _frame(message: dict[str, Any]) -> bytes:
    return sse.frame({"jsonrpc": "2.0", **message})
