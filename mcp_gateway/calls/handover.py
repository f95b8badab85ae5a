"""How another app takes a paused call over: the state machine's side of the hand-over point, which
the gateway publishes to other apps as `mcp_gateway.handover` (the only module of the gateway they use).

An app registers a handler for an interrupt `type` (the staff approvals app registers
"staff_approval" in its AppConfig.ready). When a run pauses on such an interrupt, the gateway does
not ask the MCP client: the handler takes the paused thread, inside the transaction that records
the round, and its HandoverResult ends the tool call (or, for a client that declared the MCP Tasks
extension, its task waits). While the app holds the call, it keeps it waiting (`keep_waiting`),
says when it resumes the run (`resuming` once it has decided, `resume_running` in the worker that
runs the resume) and finally finishes it (`run_ended`, with the run's final state: a task's result);
the gateway's sweep then removes it with its thread, as any finished call. When a task's client cancels it, the gateway
asks the app to `withdraw` it. The gateway never imports the apps that register here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from langgraph.types import Interrupt

from graph_runtime.registry import get_graph
from mcp_gateway import observe
from mcp_gateway.auth import user_id_of
from mcp_gateway.calls import results, store, waiter
from mcp_gateway.models import ToolCall


@dataclass(frozen=True)
class PausedCall:
    """What the gateway knows when it hands a paused call over."""

    call_id: Any
    thread_id: str
    graph: str
    interrupts: tuple[Interrupt, ...]
    state: dict[str, Any]
    # Who made the MCP call (its Caller's identity): the app may bind what it decides to it.
    caller: str = ""

    @property
    def caller_user_id(self) -> int | None:
        """The user whose MCP token made the call (the default auth handler's "user:<id>"), else
        None: an app that decides the call on people's behalf must not let them decide their own."""
        return user_id_of(self.caller)


@dataclass(frozen=True)
class HandoverResult:
    """How the tool call ends for the MCP client, and how long the thread stays paused."""

    text: str
    structured: dict[str, Any]
    keep_for: timedelta


Handler = Callable[[PausedCall], HandoverResult]
# (call id) -> whether the app let the call go: False when it can no longer stop it (staff decided).
Withdraw = Callable[[Any], bool]
_handlers: dict[str, Handler] = {}
_withdrawers: dict[str, Withdraw] = {}


def register(interrupt_type: str, handler: Handler, *, withdraw: Withdraw | None = None) -> None:
    _handlers[interrupt_type] = handler
    if withdraw is not None:
        _withdrawers[interrupt_type] = withdraw


def handler_for(interrupts: Iterable[Interrupt]) -> Handler | None:
    """The handler of the first interrupt whose `type` an app registered."""
    for interrupt in interrupts:
        value = interrupt.value
        if isinstance(value, dict) and isinstance(value.get("type"), str) and value["type"] in _handlers:
            return _handlers[value["type"]]
    return None


def resuming(call_id: Any, *, status_message: str) -> None:
    """The app decided, and the handed-over call's run resumes: a task's statusMessage says so
    (`status_message`) until the run ends, instead of that it waits for the app."""
    if call_id is not None:
        store.report_progress(call_id, status_message)
        _changed(call_id)


def resume_running(call_id: Any) -> None:
    """The app's resume of the handed-over call runs now, in the current span (a worker task's,
    traced as a child of whatever enqueued it): the span links to the call's first round, so an
    operator finds the call's start from the staff decision's trace."""
    if call_id is not None:
        observe.resume_running(call_id)


def keep_waiting(call_id: Any, *, until: datetime) -> None:
    """The handed-over call is still waiting for the app (its run paused for it again)."""
    if call_id is not None:
        ToolCall.keep_awaiting_staff(call_id, until=until)
        _changed(call_id)


def run_ended(call_id: Any, *, values: dict[str, Any], error: str = "") -> None:
    """The handed-over call has run to its end, with these final values (or this error): kept 10
    minutes (docs/rules.md, "Lifetime"), a task for its ttlMs, then removed with its thread by the
    gateway's sweep. A task's client gets the CallToolResult the call would have returned had it
    never paused."""
    if call_id is not None:
        result = results.error(error) if error else results.success(_output(call_id, values))
        ToolCall.finish_awaiting_staff(call_id, {"kind": "result", "result": result})
        _changed(call_id)


def _output(call_id: Any, values: dict[str, Any]) -> dict[str, Any]:
    # The result a call that never paused would have had: its graph's declared output.
    graph = ToolCall.objects.filter(pk=call_id).values_list("graph", flat=True).first()
    registered = get_graph(graph) if graph is not None else None
    return registered.output(values) if registered is not None else values


def _changed(call_id: Any) -> None:
    # The task's listen streams read it again once the change is visible to them.
    transaction.on_commit(lambda: waiter.notify_task(call_id))


def withdraw(call_id: Any) -> bool:
    """Ask the apps to let a handed-over call go (its task's client cancelled it). False when one
    of them can no longer stop it, or none registered a way to."""
    if not _withdrawers:
        return False
    return all(withdraw_call(call_id) for withdraw_call in _withdrawers.values())
