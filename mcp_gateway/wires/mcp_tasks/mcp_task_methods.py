"""The methods of the MCP Tasks extension (io.modelcontextprotocol/tasks): tasks/get, tasks/update
and tasks/cancel, on calls that became tasks (mcp_task_handles.py).

A task is a call read another way; its status comes from the call and its latest round:

    call running                      ──► working (statusMessage: the step, or the graph's progress)
    call awaiting staff               ──► working ("Waiting for staff approval")
    call paused (round asking)        ──► input_required (the round's questions, keys unique per task;
                                          by link to its answer page for a client that opens URLs but
                                          fills no forms), or working once every question has the
                                          client's response and the page has yet to answer the round
    call finished                     ──► completed (the CallToolResult, isError ones too),
                                          cancelled (the client cancelled it), or failed (only
                                          for a JSON-RPC error the call would have answered)

Questions keep the round rules (docs/rules.md, "Task input"): a task's inputRequests are its asking
round's questions, each key prefixed with the round's number ("<n>:<key>"), so a key names one
question over the whole life of the task even when a later round asks the same question again.
tasks/update answers them: answers to keys not outstanding are ignored, missing ones leave the
task input_required (the answers sent so far are kept), an invalid one is -32602 and its question
stays open, and the claim of the round lets the same answers resume the agent once.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from mcp_gateway import limits, observe
from mcp_gateway.auth import Caller
from mcp_gateway.calls import handover, questions, results, store, waiter
from mcp_gateway.calls.runs import CANT_RESUME, cancelled_outcome
from mcp_gateway.calls.tool_calls import add_answers, end_round, task_answers, task_asking
from mcp_gateway.models import Round, ToolCall
from mcp_gateway.protocol import INVALID_PARAMS, Message, RpcError
from mcp_gateway.wires.mcp_tasks import mcp_task_handles

logger = logging.getLogger(__name__)

ASKING = "The agent is waiting for answers to its questions."
ON_PAGE = "Waiting for the person to answer on the answer page."
CANCELLED = "Cancelled by the client."
TERMINAL = ("completed", "failed", "cancelled")


# --- the methods ---------------------------------------------------------------------------------


def get(message: Message, caller: Caller) -> dict[str, Any]:
    call = _task(message, caller)
    return detailed(call, message.params["taskId"], message.client_capabilities)


def update(message: Message, caller: Caller) -> dict[str, Any]:
    """Answers to the task's questions. The acknowledgement is empty; the resume is enqueued."""
    call = _task(message, caller)
    responses = message.params.get("inputResponses")
    if not isinstance(responses, dict):
        raise RpcError(INVALID_PARAMS, "Invalid params: inputResponses must be an object")
    limits.check_input_responses(responses)
    limits.check_stored_values(inputResponses=responses)
    if not caller.can_update_threads:
        # Answering resumes, and so updates, the call's thread: the auth handler decides each time.
        raise RpcError(INVALID_PARAMS, CANT_RESUME)
    with transaction.atomic():
        # Locked, so answers arriving together are merged, not lost: one waits for the other.
        round_ = _latest(call, lock=True)
        if round_ is None or round_.state != Round.State.ASKING:
            return {}  # nothing is outstanding: every key is ignored
        prefix = f"{round_.number}:"
        mine = {key[len(prefix) :]: answer for key, answer in responses.items() if key.startswith(prefix)}
        if not mine or (taken := task_answers(round_, mine, message.client_capabilities)) is None:
            return {}
        # An invalid answer raises: nothing is kept, and the question stays open.
        add_answers(round_, taken)
        _changed(call)
    return {}


def cancel(message: Message, caller: Caller) -> dict[str, Any]:
    """Cooperative cancellation: what has not started never starts, a running graph stops at its
    next step (runs.py), a question is not asked any more, and a pending staff approval is withdrawn.
    Acknowledged at once, a task that has ended too: the extension's cancel is eventually
    consistent, and a task whose work finished first keeps the terminal status it reached."""
    call = _task(message, caller)
    if ended(call) is None:
        cancel_call(call)
    return {}


def ended(call: ToolCall) -> str | None:
    """The terminal status of a task that has ended (completed, failed, cancelled), else None."""
    status = _status(call, _latest(call))
    return status if status in TERMINAL else None


def cancel_call(call: ToolCall) -> None:
    """Cancel the task a call is (for this extension's tasks/cancel and the 2025-11-25 one's alike)."""
    if not call.request_cancel():
        return  # it finished meanwhile
    # Read again after the flag is set: a run that ends from now on sees it (runs.py), and what it
    # recorded before is here.
    call.refresh_from_db(fields=["status", "expires_at"])
    round_ = _latest(call)
    if call.status == ToolCall.Status.AWAITING_STAFF:
        with transaction.atomic():
            if handover.withdraw(call.pk):
                ToolCall.finish_awaiting_staff(call.pk, cancelled_outcome())
    elif round_ is not None and round_.state == Round.State.ASKING:
        end_round(round_, cancelled_outcome())
    elif round_ is not None and round_.state == Round.State.RUNNING:
        with transaction.atomic():
            if store.cancel_unstarted(round_, cancelled_outcome()):
                # A request still waiting for this round (its client's tools/call) hears it ended.
                transaction.on_commit(lambda: waiter.notify(round_.pk, round_.recorded()))
    _changed(call)


def _changed(call: ToolCall) -> None:
    # The task's listen streams (mcp_task_listen.py) read it again once this has committed.
    transaction.on_commit(lambda: waiter.notify_task(call.pk))


# --- reading a task ------------------------------------------------------------------------------


def detailed(call: ToolCall, task_id: str, capabilities: dict[str, Any]) -> dict[str, Any]:
    """The task as tasks/get answers it: the status and its payload."""
    round_ = _latest(call)
    status = _status(call, round_)
    if status == "input_required":
        assert round_ is not None and round_.outcome is not None
        # As for a round: no question in a mode this request's client did not declare, but by link
        # to the round's answer page where it can open one.
        asking = task_asking(round_, capabilities)
        answered = round_.answers or {}
        requests = {f"{round_.number}:{k}": r for k, r in asking.requests.items() if k not in answered}
        rejected = round_.outcome.get("rejected")
        message = rejected["message"] if rejected else ASKING
        return {**mcp_task_handles.fields(call, task_id, status=status, message=message), "inputRequests": requests}
    if status in ("working", "cancelled"):
        message = CANCELLED if status == "cancelled" else None
        if status == "working" and round_ is not None and round_.state == Round.State.ASKING:
            message = ON_PAGE
        return mcp_task_handles.fields(call, task_id, status=status, message=message)
    outcome = _final_outcome(call, round_)
    if status == "failed":
        rejected = outcome["rejected"]
        error = {"code": INVALID_PARAMS, "message": rejected["message"], "data": rejected["data"]}
        return {**mcp_task_handles.fields(call, task_id, status=status, message=rejected["message"]), "error": error}
    return {**mcp_task_handles.fields(call, task_id, status=status), "result": _result(outcome, capabilities)}


def final_result(call: ToolCall, latest: Round | None, capabilities: dict[str, Any]) -> dict[str, Any]:
    """What the call's request would have answered once its task ended (a 2025-11-25
    tasks/result): its CallToolResult, or RpcError -32602 when LangGraph refused the answers."""
    outcome = _final_outcome(call, latest)
    if "rejected" in outcome and outcome.get("kind") == "result":
        raise RpcError(INVALID_PARAMS, outcome["rejected"]["message"], outcome["rejected"]["data"])
    return _result(outcome, capabilities)


def status_of(call: ToolCall, latest: Round | None) -> str:
    """The task's status, for the admin: `latest` is the call's latest round, read with it."""
    return _status(call, latest)


def _status(call: ToolCall, round_: Round | None) -> str:
    if call.status == ToolCall.Status.FINISHED:
        outcome = _final_outcome(call, round_)
        if outcome.get("cancelled"):
            return "cancelled"
        # LangGraph refused the answers that ended the call: the JSON-RPC error -32602 the call's
        # request would have answered with.
        return "failed" if "rejected" in outcome and outcome.get("kind") == "result" else "completed"
    if call.status == ToolCall.Status.PAUSED and round_ is not None and round_.state == Round.State.ASKING:
        # Every question has its client's response and the round still asks: the client was sent to
        # the round's answer page (tool_calls.task_answers), which answers it. Nothing is outstanding.
        requests = (round_.outcome or {}).get("requests", {})
        return "working" if requests and set(requests) <= set(round_.answers or {}) else "input_required"
    return "working"


def _final_outcome(call: ToolCall, round_: Round | None) -> dict[str, Any]:
    if call.final_outcome is not None:
        return dict(call.final_outcome)
    return dict(round_.outcome or {}) if round_ is not None else {}


def _result(outcome: dict[str, Any], capabilities: dict[str, Any]) -> dict[str, Any]:
    """The CallToolResult the call would have returned (tool_calls.render's rules)."""
    if outcome.get("kind") == "breakpoint":
        return results.at_breakpoint(outcome["values"], answerable=bool(questions.declared_modes(capabilities)))
    return outcome["result"]


def _latest(call: ToolCall, *, lock: bool = False) -> Round | None:
    rounds = Round.objects.filter(call=call).order_by("-number")
    if lock:
        rounds = rounds.select_for_update()
    round_ = rounds.first()
    if round_ is not None:
        round_.call = call
    return round_


def _task(message: Message, caller: Caller) -> ToolCall:
    """The caller's task named by the request; the extension's -32021 for a client that did not
    declare it on this request."""
    if not mcp_task_handles.declared(message.client_capabilities):
        raise mcp_task_handles.missing_capability(
            f"{message.method} belongs to the MCP Tasks extension, which this request does not declare."
        )
    if not caller.can_read_threads:
        raise mcp_task_handles.not_found()
    call = mcp_task_handles.verified_call(message.params.get("taskId"), caller=caller.identity)
    # In the call's trace, as an answer to one of its rounds is: a resume it enqueues carries it on.
    observe.call_known(call, None)
    return call


METHODS = {"tasks/get": get, "tasks/update": update, "tasks/cancel": cancel}
