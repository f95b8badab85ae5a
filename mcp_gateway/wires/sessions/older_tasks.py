"""The 2025-11-25 tasks utility, for older clients with MCP_OLDER_CLIENTS=answer: a task-augmented
tools/call answered at once with CreateTaskResult, then tasks/get, tasks/result, tasks/list and
tasks/cancel.

A task here is the same durable call a 2026-07-28 client's task is (mcp_task_handles.py,
mcp_task_methods.py), read in the 2025-11-25 shapes: the same ids (bound to the caller, stored
as keyed hashes), lifetimes, statuses and cancel, and a staff decision completes it alike.
tasks/result blocks until the task ends: it is answered with the call's stream (call_streams.py,
which any web process serves and resumes), which tells each change of the task's status
(notifications/tasks/status), asks an input_required task's questions with
`io.modelcontextprotocol/related-task` and ends with the call's result.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone
from mcp_types import methods
from mcp_types._v2025_11_25 import CancelTaskResult, CreateTaskResult, GetTaskResult, ListTasksResult

from graph_runtime.registry import RegisteredGraph
from mcp_gateway.auth import Caller
from mcp_gateway.models import Round, Session, ToolCall
from mcp_gateway.protocol import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, Message, RpcError
from mcp_gateway.wires.mcp_tasks import mcp_task_handles, mcp_task_methods
from mcp_gateway.wires.sessions import sessions

REVISION = "2025-11-25"
# 2025-11-25: what belongs to a task names it in its _meta.
RELATED_TASK = "io.modelcontextprotocol/related-task"
PAGE_SIZE = 50
TASK_SUPPORT = {"always": "required", "never": "forbidden"}


def served(version: str) -> bool:
    return sessions.enabled() and version == REVISION


def capability() -> dict[str, Any]:
    """The server's `tasks` capability in initialize."""
    return {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}


def task_support(registered: RegisteredGraph) -> str:
    """A tool's execution.taskSupport, from its graph's task option."""
    return TASK_SUPPORT.get(registered.task, "optional")


def starts_as_task(asked: bool) -> Callable[[RegisteredGraph], bool]:
    """2025-11-25's tool-level negotiation: a call starts as a task when it asked to, and against
    the tool's execution.taskSupport either way is -32601."""

    def rule(registered: RegisteredGraph) -> bool:
        if asked and registered.task == "never":
            raise RpcError(METHOD_NOT_FOUND, f"The tool {registered.name} does not run as a task.")
        if not asked and registered.task == "always":
            raise RpcError(METHOD_NOT_FOUND, f"The tool {registered.name} runs only as a task.")
        return asked

    return rule


def created(reply: dict[str, Any]) -> dict[str, Any]:
    """A call made a task (mcp_task_handles.create) as 2025-11-25's CreateTaskResult."""
    return {**_dump(CreateTaskResult, {"task": _task_shape(reply)}), "resultType": "task"}


def keep_progress_token(task_id: str, token: str | int) -> None:
    """The progressToken a task-augmented tools/call carried, kept with its task: the task's
    tasks/result stream sends the run's progress with it (the token is valid for the task's life)."""
    ToolCall.keep_progress_token(mcp_task_handles.stored_hash(task_id), token)


# --- the methods -----------------------------------------------------------------------------------


def get(message: Message, caller: Caller, session: Session | None) -> dict[str, Any]:
    call, task_id = _task(message, caller)
    return _dump(GetTaskResult, task(call, task_id))


@dataclass(frozen=True)
class ResultStream:
    """A tasks/result to answer with its call's stream in the session (dispatch.py opens it)."""

    call_id: uuid.UUID
    # The task-augmented tools/call's progressToken, if it carried one.
    progress_token: str | int | None = None


def result(message: Message, caller: Caller, session: Session | None) -> dict[str, Any] | ResultStream:
    """The task's result once it has ended; until then, the call's stream in the caller's session,
    which asks its questions and ends with the result."""
    call, task_id = _task(message, caller)
    latest = call.latest_round()
    if _status(call, latest) in mcp_task_methods.TERMINAL:
        capabilities = session.capabilities if session is not None else {}
        return task_reply(call, latest, message.version, capabilities)
    if session is None:
        raise RpcError(INVALID_REQUEST, "tasks/result waits on a stream of a session: initialize one first")
    return ResultStream(call.pk, call.progress_token)


def list_tasks(message: Message, caller: Caller, session: Session | None) -> dict[str, Any]:
    """The caller's own tasks, oldest first, a page at a time."""
    calls = live_tasks(caller).order_by("created_at", "id")
    if (cursor := message.params.get("cursor")) is not None:
        created_at, after = _cursor(cursor)
        calls = calls.filter(Q(created_at__gt=created_at) | Q(created_at=created_at, id__gt=after))
    page = list(calls[: PAGE_SIZE + 1]) if caller.can_read_threads else []
    listed: dict[str, Any] = {"tasks": [task(c, mcp_task_handles.mint(c.pk, c.caller)) for c in page[:PAGE_SIZE]]}
    if len(page) > PAGE_SIZE:
        last = page[PAGE_SIZE - 1]
        listed["nextCursor"] = base64.urlsafe_b64encode(f"{last.created_at.isoformat()}|{last.pk}".encode()).decode()
    return _dump(ListTasksResult, listed)


def live_tasks(caller: Caller) -> QuerySet[ToolCall]:
    """The caller's tasks that tasks/get still answers for, newest first."""
    now = timezone.now()
    return (
        ToolCall.objects.filter(caller=caller.identity, task_hash__isnull=False)
        .filter(Q(expires_at__gt=now) | Q(status=ToolCall.Status.AWAITING_STAFF))
        .order_by("-created_at", "-id")
    )


def cancel(message: Message, caller: Caller, session: Session | None) -> dict[str, Any]:
    """As the 2026 extension's tasks/cancel (a pending approval is withdrawn); the task is
    cancelled from now on whatever its run still does."""
    call, task_id = _task(message, caller)
    if (status := mcp_task_methods.ended(call)) is not None:
        # 2025-11-25's rule (the 2026-07-28 extension acknowledges instead): a task in a terminal
        # status cannot be cancelled, and saying so is -32602.
        raise RpcError(INVALID_PARAMS, f"Cannot cancel task: it is already {status}")
    mcp_task_methods.cancel_call(call)
    call.refresh_from_db()
    return _dump(CancelTaskResult, task(call, task_id))


METHODS = {"tasks/get": get, "tasks/result": result, "tasks/list": list_tasks, "tasks/cancel": cancel}


# --- reading a task --------------------------------------------------------------------------------


def task(call: ToolCall, task_id: str, latest: Round | None = None) -> dict[str, Any]:
    """The 2025-11-25 Task the call is now (`latest`: its latest round, if read already)."""
    status = _status(call, latest or call.latest_round())
    message = {"cancelled": mcp_task_methods.CANCELLED, "input_required": mcp_task_methods.ASKING}.get(status)
    return _task_shape(mcp_task_handles.fields(call, task_id, status=status, message=message))


def task_reply(call: ToolCall, latest: Round | None, version: str, capabilities: dict[str, Any]) -> dict[str, Any]:
    """tasks/result once the task has ended: what its tools/call would have answered, naming the
    task. RpcError for a task that failed."""
    result = mcp_task_methods.final_result(call, latest, capabilities)
    reply = methods.serialize_server_result("tools/call", version, result)
    task_id = mcp_task_handles.mint(call.pk, call.caller)
    return {**reply, "_meta": {**reply.get("_meta", {}), RELATED_TASK: {"taskId": task_id}}}


def status_notification(call: ToolCall, latest: Round | None) -> dict[str, Any]:
    """notifications/tasks/status: the whole Task as it is now (without related-task: the Task
    names itself)."""
    task_id = mcp_task_handles.mint(call.pk, call.caller)
    return {"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": task(call, task_id, latest)}


def _status(call: ToolCall, latest: Round | None) -> str:
    # The transport's rule: once cancelled, a task stays cancelled, whatever its run still does.
    return "cancelled" if call.cancel_requested_at is not None else mcp_task_methods.status_of(call, latest)


def _task_shape(fields: dict[str, Any]) -> dict[str, Any]:
    """The 2026 extension's Task fields (mcp_task_handles.fields) as 2025-11-25 names them."""
    names = ("taskId", "status", "statusMessage", "createdAt", "lastUpdatedAt")
    shaped: dict[str, Any] = {k: fields[k] for k in names if k in fields}
    return {**shaped, "ttl": fields["ttlMs"], "pollInterval": fields["pollIntervalMs"]}


def _task(message: Message, caller: Caller) -> tuple[ToolCall, str]:
    task_id = message.params["taskId"]
    if not caller.can_read_threads:
        raise mcp_task_handles.not_found()
    return mcp_task_handles.verified_call(task_id, caller=caller.identity), task_id


def _cursor(cursor: Any) -> tuple[datetime, uuid.UUID]:
    try:
        created_at, _, after = base64.urlsafe_b64decode(str(cursor).encode()).decode().partition("|")
        return datetime.fromisoformat(created_at), uuid.UUID(after)
    except (ValueError, binascii.Error, UnicodeError):
        raise RpcError(INVALID_PARAMS, "Invalid cursor") from None


def _dump(model: Any, data: dict[str, Any]) -> dict[str, Any]:
    """Shaped by the SDK's 2025-11-25 types: what the revision does not know is left out."""
    return model.model_validate(data, by_name=False).model_dump(by_alias=True, mode="json", exclude_none=True)
