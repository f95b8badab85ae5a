"""A call's MCP task handle (the Tasks extension, io.modelcontextprotocol/tasks): its id, minted
and checked like a requestState, and the Task fields every task answer carries.

A task id is `<call id>.<HMAC(secret, call id | caller)>`: unguessable, bound to the caller who
created it, and deterministic, so requests racing to make one call a task hand out the same id.
The table holds only a second keyed hash of it (ToolCall.task_hash), so reading the database does
not reveal a usable id. Another caller's id, a tampered one and an unknown one fail alike.

A call becomes a task when the server chooses (the state machine's BecameTask outcome, which the
wire renders with `create`): its run outlasts MCP_TASK_WAIT_SECONDS, it is handed over to staff,
or its graph says "task": "always". Its status is read from the call and its rounds by
mcp_task_methods.py.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils.crypto import salted_hmac

from graph_runtime.registry import RegisteredGraph
from mcp_gateway.calls import request_state
from mcp_gateway.models import ToolCall
from mcp_gateway.protocol import INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY, RpcError

EXTENSION = "io.modelcontextprotocol/tasks"
WAITING_FOR_STAFF = "Waiting for staff approval"
WORKING = "Working"


def declared(capabilities: dict[str, Any]) -> bool:
    """Whether this request's client capabilities declare the extension (an object, even empty)."""
    extensions = capabilities.get("extensions")
    return isinstance(extensions, dict) and isinstance(extensions.get(EXTENSION), dict)


def missing_capability(message: str) -> RpcError:
    return RpcError(
        MISSING_REQUIRED_CLIENT_CAPABILITY, message, {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
    )


def starts_as_task(*, declared: bool) -> Callable[[RegisteredGraph], bool]:
    """The extension's rule for a new call: it starts as a task when its graph's langgraph.json
    entry says "task": "always", which a client that did not declare the extension cannot be
    served (-32021 naming it)."""

    def rule(registered: RegisteredGraph) -> bool:
        if registered.task != "always":
            return False
        if not declared:
            raise missing_capability(f"The tool {registered.name} runs only as a task.")
        return True

    return rule


def mint(call_id: Any, caller: str) -> str:
    mac = salted_hmac("mcp_gateway.task", f"{call_id}|{caller}", algorithm="sha256").digest()
    return f"{call_id}.{request_state.b64(mac)}"


def stored_hash(task_id: str) -> str:
    return salted_hmac("mcp_gateway.task.stored", task_id, algorithm="sha256").hexdigest()


def not_found() -> RpcError:
    # One answer for an unknown, tampered, removed or another caller's task id.
    return RpcError(INVALID_PARAMS, "Failed to retrieve task: Task not found")


def verified_call(task_id: Any, *, caller: str) -> ToolCall:
    """The call behind `task_id`, if `caller` created it and it has not been removed."""
    call_id = request_state.id_of(task_id)
    call = ToolCall.objects.filter(pk=call_id, task_hash__isnull=False).first() if call_id else None
    if call is None or not request_state.matches(
        str(task_id), mint(call.pk, caller), call.task_hash or "", stored_hash=stored_hash
    ):
        raise not_found()
    if call.is_expired and call.status != ToolCall.Status.AWAITING_STAFF:
        # Past its ttlMs, waiting for the sweep: gone, as the sweep will make it.
        raise RpcError(INVALID_PARAMS, "Failed to retrieve task: Task has expired")
    return call


def create(call: ToolCall, **detail: Any) -> dict[str, Any]:
    """Make the call a task, durably (the row is written before this returns, so a tasks/get for
    the id resolves), and the CreateTaskResult for it: the task as it is now."""
    task_id = mint(call.pk, call.caller)
    call.become_task(stored_hash(task_id))
    return {**fields(call, task_id, **detail), "resultType": "task"}


def fields(call: ToolCall, task_id: str, *, status: str = "working", message: str | None = None) -> dict[str, Any]:
    """The Task fields: ttlMs counts from the task's creation to when the call expires, and so
    changes as the call moves on (the specification lets it)."""
    created = call.task_created_at or call.created_at
    # A call handed over to staff waits for them until their decision says it resumes
    # (handover.resuming writes that as its progress).
    waiting_for_staff = call.status == ToolCall.Status.AWAITING_STAFF and not call.progress
    task: dict[str, Any] = {
        "taskId": task_id,
        "status": status,
        "createdAt": _iso(created),
        "lastUpdatedAt": _iso(max(call.updated_at, created)),
        "ttlMs": max(0, int((call.expires_at - created).total_seconds() * 1000)),
        "pollIntervalMs": settings.MCP_TASK_STAFF_POLL_INTERVAL_MS
        if waiting_for_staff
        else settings.MCP_TASK_POLL_INTERVAL_MS,
    }
    if message is None and status == "working":
        message = WAITING_FOR_STAFF if waiting_for_staff else (call.progress or WORKING)
    if message:
        task["statusMessage"] = message
    return task


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")
