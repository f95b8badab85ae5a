"""Drive the service's paused-call state machine in this thread, as the web and the worker would.

A tools/call becomes a ToolRequest; the request side starts or continues the call, and while its
answer waits for a round's run, the worker side runs that round here, then the request side
answers as the round says. Everything runs against the real PostgreSQL test database, LangGraph's PostgresSaver and
the graphs of tests/langgraph.json; no web server, broker or worker process takes part.

Every name of the service's internals that the fast tests use is in this file (and nowhere else
in tests/inprocess/), so that renaming them changes this file only:

    mcp_gateway.calls.tool_calls: ToolRequest (its fields), Waiting (.round, .req), begin, after_wait,
        outcome_from_record, KEY_REUSED
    mcp_gateway.wires.rounds.replies, mcp_gateway.wires.sessions.replies: client, reply (a request's client as
        its wire describes it; an outcome as its wire answers it)
    mcp_gateway.http.dispatch: tool_descriptors (what tools/list answers), start (the task methods)
    mcp_gateway.protocol: Message, validate_params
    mcp_gateway.calls.runs: run_round, run_leased (a run under a lease already taken)
    mcp_gateway.auth: Caller, ALL_PERMISSIONS, user_identity
    mcp_gateway.protocol: RpcError (.code, .message, .data, .http_status, .retry_after)
    mcp_gateway.calls.sweep: remove_expired_calls
    mcp_gateway.tasks: sweep_calls (beat's "sweep-calls", run in this process)
    mcp_gateway.wires.sessions.sessions: open_session, session_of, key_hash; mcp_gateway.models: Session (caller,
        protocol_version, capabilities, expires_at, key_hash)
    mcp_gateway.wires.sessions.call_streams: check_capacity, open_stream, Reading (one serving's reads),
        ask_round (replaced for one read), take_response; mcp_gateway.models: StreamEvent (stream_id, kind, key)
    mcp_gateway.streams.capacity: take, Place.give_back, open_streams; mcp_gateway.streams.pump: pump, Read
    mcp_gateway.calls.round_queue: nudge_stalled_rounds, RUN_ROUND
    mcp_gateway.models: Round.lease (.renew), Lease
    mcp_gateway.calls.store: take_lease, lease_first, record_round, Recording (a run's end recorded)
    graph_runtime.heartbeat: holding, beat, hand_back_after_grace, stopping (and its two events)
    graph_runtime.work: enqueue (the hand-off to the broker, replaced: the driver runs rounds itself;
        the real one fills the embedded default's run threads), in_process_backlog
    mcp_gateway.models: Round (State.RUNNING; call, number, state, finished_at; recorded), ToolCall
        (Status.FINISHED, Status.PAUSED; tool_name, thread_id, expires_at, created_at, log_lines)
    graph_runtime.checkpointer: close_pools
    graph_runtime.runner: bound, run, state, delete_thread; graph_runtime.registry: get_graph
    approvals.services: approval_decide, approval_request_changes, approvals_expire, approvals_escalate,
        RESUME_APPROVAL, AlreadyDecided, NothingPending, InvalidEdit, SameApprover, PolicyChanged,
        ChangesNotGiven, NotAllowed (the refusals of refusals.py); approvals.resumes: approval_resume,
        approval_resumes_nudge, claim_resume, hand_back_resume, resume_lease, resume_leased (a resume under a lease
        already claimed); approvals.selectors: approvals_pending;
        approvals.models: ApprovalRequest, DecidedVia; approvals.audit: record (an event appended to the chain);
        approvals.step_up: StepUpProof (what a door hands the decision service), and its refusals
        StepUpRequired, StepUpProofInvalid
    approvals.slack: RESPOND (the task that updates a Slack message), respond; approvals.email_links:
        link, APPROVE, REJECT (an e-mail's Approve and Reject links)
    hitl_project's `sweep` management command (cron's stand-in for beat)
    mcp_gateway.http.views: handle_post (the endpoint's request half, run in this thread); mcp_gateway.models:
        MCPToken.issue
    mcp_gateway.wires.pages.links: path_for, url_for (a round's answer page)
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from types import SimpleNamespace
from typing import Any

from celery import shared_task
from django.conf import settings
from django.test import TestCase
from mcp_types import CLIENT_INFO_META_KEY

from approvals import resumes as approval_resumes
from approvals import selectors as approval_selectors
from approvals import services as approval_services
from approvals.models import ApprovalRequest, DecidedVia
from graph_runtime import heartbeat, runner, work
from graph_runtime.registry import get_graph
from mcp_gateway import protocol
from mcp_gateway.auth import ALL_PERMISSIONS, Caller, user_identity
from mcp_gateway.calls import round_queue, runs, store, tool_calls
from mcp_gateway.calls import sweep as sweeping
from mcp_gateway.http import dispatch
from mcp_gateway.http.dispatch import tool_descriptors
from mcp_gateway.models import Lease, Round, ToolCall
from mcp_gateway.protocol import RpcError
from mcp_gateway.wires.rounds import replies as rounds_wire
from mcp_gateway.wires.sessions import replies as older_wire
from tests.rounds import checkpoint_rows, checkpoint_threads

__all__ = [
    "ApprovalConflict",
    "InvalidEdit",
    "Lease",
    "NothingPending",
    "RpcError",
    "Round",
    "PolicyChanged",
    "SameApprover",
    "ChangesNotGiven",
    "NotAllowed",
    "StepUpProofInvalid",
    "StepUpRequired",
    "ToolCall",
    "checkpoint_rows",
    "checkpoint_threads",
]

# What deciding an approval can be refused with: decided already, expired or withdrawn; its thread
# is not paused on it; edited arguments that do not fit its tool calls; a second approval of a
# two-person approval by the first approver, or by nobody in particular (the admin token).
ApprovalConflict = approval_services.AlreadyDecided
NothingPending = approval_services.NothingPending
InvalidEdit = approval_services.InvalidEdit
SameApprover = approval_services.SameApprover
PolicyChanged = approval_services.PolicyChanged
ChangesNotGiven = approval_services.ChangesNotGiven
NotAllowed = approval_services.NotAllowed
# A step-up policy's decision without a fresh proof of who decides, or with a wrong one.
StepUpRequired = approval_services.StepUpRequired
StepUpProofInvalid = approval_services.StepUpProofInvalid

# What the service handed to the broker in this test: (task name, args, countdown).
ENQUEUED: list[tuple[str, tuple[str, ...], float | None]] = []

EVERY_MODE = {"elicitation": {"form": {}, "url": {}}}
TASKS = "io.modelcontextprotocol/tasks"
# A client that declares the MCP Tasks extension, and can elicit.
WITH_TASKS = {**EVERY_MODE, "extensions": {TASKS: {}}}
INVALID_STATE = {
    "code": -32602,
    "message": "Invalid or expired requestState",
    "data": {"reason": "invalid_request_state"},
}
UNASKABLE = "This tool needs input that can't be asked over MCP"
CANT_ANSWER = "This tool paused to ask for human input, and this client can't answer it."
KEY_REUSED = tool_calls.KEY_REUSED
CANT_RESUME = "This tool paused to ask for human input, and this call can't be resumed."
TOO_MANY_ROUNDS = "This tool asked for input more than {limit} times, the most one call may ask."

# The thread permissions a caller may hold (what an auth handler grants).
CREATE, READ, UPDATE = "threads:create", "threads:read", "threads:update"


def tools() -> list[dict[str, Any]]:
    """What tools/list answers: each tool's name, description and inputSchema."""
    return tool_descriptors()


def staff_decides(
    approval_id: str, *, approved: bool, note: str | None = None, seen_policy_version: int | None = None
) -> str:
    """A staff decision on an approval, as the REST API makes it, and the resumed run it enqueues
    (run here); the answer the resumed run recorded. `seen_policy_version`: the decider confirms
    having seen the approval's rule at this version (needed once it changed since the request)."""
    from approvals.models import ApprovalRequest, DecidedVia
    from approvals.resumes import approval_resume
    from approvals.services import approval_decide

    with _committing():
        approval_decide(
            approval=ApprovalRequest.objects.get(pk=approval_id),
            approved=approved,
            note=note,
            via=DecidedVia.API,
            seen_policy_version=seen_policy_version,
        )
    with _committing():
        approval_resume(approval_id=approval_id)
    return ApprovalRequest.objects.get(pk=approval_id).answer


def caller(identity: str = "user:1", permissions: frozenset[str] | set[str] | None = None) -> Caller:
    return Caller(identity, ALL_PERMISSIONS if permissions is None else frozenset(permissions))


def staff_decided(approval_id: str) -> None:
    """A staff approval, as the REST API makes it: its resume is enqueued (in ENQUEUED), not run."""
    from approvals.models import ApprovalRequest, DecidedVia
    from approvals.services import approval_decide

    with _committing():
        approval_decide(
            approval=ApprovalRequest.objects.get(pk=approval_id), approved=True, note=None, via=DecidedVia.API
        )


def resume_approval(approval_id: str) -> None:
    """A worker's attempt at a decided approval's resume."""
    from approvals.resumes import approval_resume

    with _committing():
        approval_resume(approval_id=approval_id)


def resume_lease_and_die(approval_id: str) -> None:
    """A worker takes the lease of a decided approval's resume, then is killed: nobody renews it."""
    from approvals.resumes import claim_resume

    assert claim_resume(approval_id) is not None


def claim_resume(approval_id: str) -> Any:
    """A worker claims a decided approval's resume: the lease it holds, to run with `resume_holding`."""
    approval = approval_resumes.claim_resume(approval_id)
    assert approval is not None
    return approval_resumes.resume_lease(approval)


def resume_holding(lease: Any) -> None:
    """The resume of a worker that holds its lease (`claim_resume`), as approval_resume runs it."""
    with _committing():
        approval_resumes.resume_leased(lease.row, lease, lost=lease.lost)


def nudge_stalled_resumes() -> int:
    """Beat's stalled-resume sweep: how many resumes it enqueued again."""
    from approvals.resumes import approval_resumes_nudge

    return approval_resumes_nudge()


@contextlib.contextmanager
def worker_resuming(approval_id: str):
    """A live worker holding the lease of a decided approval's resume, with its heartbeat (beat it
    with `heartbeat_beat`), as approval_resume holds it while the resumed run goes on."""
    from approvals import resumes

    approval = resumes.claim_resume(approval_id)
    assert approval is not None
    lease = resumes.resume_lease(approval)
    with heartbeat.holding(
        f"resume {approval_id}", renew=lease.renew, hand_back=lambda: resumes.hand_back_resume(lease)
    ) as held:
        yield held


@contextlib.contextmanager
def _committing():
    """Run what the service leaves for after its commit (deleting a thread, notifying a waiting
    request) as the step ends: inside a test's transaction nothing commits."""
    with TestCase.captureOnCommitCallbacks(execute=True):
        yield


def _request(
    name: str,
    arguments: dict[str, Any] | None,
    *,
    responses: dict[str, Any] | None = None,
    request_state: str | None = None,
    context: dict[str, Any] | None = None,
    capabilities: dict[str, Any] | None = None,
    modern: bool = True,
    by: Caller | None = None,
    idempotency_key: str | None = None,
    log_level: str = "",
    client_info: dict[str, Any] | None = None,
) -> tool_calls.ToolRequest:
    return tool_calls.ToolRequest(
        caller=by or caller(),
        name=name,
        arguments=arguments or {},
        context=context,
        responses=responses,
        request_state=request_state,
        client=_client(EVERY_MODE if capabilities is None else capabilities, modern=modern, info=client_info),
        idempotency_key=idempotency_key,
        log_level=log_level,
    )


def _client(capabilities: dict[str, Any], *, modern: bool, info: dict[str, Any] | None = None) -> tool_calls.Client:
    """The client as the request's wire describes it: a 2026-07-28 one (`info`: the clientInfo its
    request's _meta carries), or an older one without a session."""
    message = _message(capabilities, modern=modern, info=info)
    return rounds_wire.client(message) if modern else older_wire.client(message, None)


def _message(capabilities: dict[str, Any], *, modern: bool, info: dict[str, Any] | None = None) -> protocol.Message:
    version = protocol.MODERN if modern else "2025-06-18"
    params = {"_meta": {CLIENT_INFO_META_KEY: info}} if info is not None else {}
    return protocol.Message(0, "tools/call", params, version, client_capabilities=capabilities)


def _rendered(req: tool_calls.ToolRequest, step: Any) -> Any:
    """A step of the state machine as the request's wire answers it (a Waiting as it is)."""
    if isinstance(step, tool_calls.Waiting):
        return step
    if req.client.rounds:
        return rounds_wire.reply(step)
    return older_wire.reply(_message(req.capabilities, modern=False), req.caller, None, step)


def call(
    name: str, arguments: dict[str, Any] | None = None, *, outlasting: bool = False, **request: Any
) -> dict[str, Any]:
    """One tools/call: its result, or the RpcError it is answered with. `request`: what else the
    request carries (`_request`'s keywords; `responses` are its inputResponses). `outlasting`: the
    run it waits for outlasts the request's wait, which answers as a timed-out wait does; the round
    is left for `finish_runs`."""
    req = _request(name, arguments, **request)
    with _committing():
        step = _rendered(req, tool_calls.begin(req))
    while isinstance(step, tool_calls.Waiting):
        if outlasting:
            with _committing():
                step = _rendered(req, tool_calls.after_wait(step, timed_out=True))
            if isinstance(step, tool_calls.Waiting):
                continue
            return step
        with _committing():
            runs.run_round(step.round.id)
        with _committing():
            step = _run_ended(step)
    return step


def _run_ended(waiting: tool_calls.Waiting) -> Any:
    """What the web does once the run's notification reaches a waiting request (waiting.py): the
    answer from the round's record alone where that needs no database, else after_wait with it;
    rendered by the request's wire."""
    recorded = notification(waiting)
    if recorded is not None and (outcome := tool_calls.outcome_from_record(waiting, recorded)) is not None:
        return _rendered(waiting.req, outcome)
    return _rendered(waiting.req, tool_calls.after_wait(waiting, timed_out=False, recorded=recorded))


def notification(waiting: tool_calls.Waiting) -> Any:
    """What the worker published when it recorded the round the request waits for (Round.recorded:
    what its rows hold once the record commits); None while it runs."""
    round_ = Round.objects.select_related("call").get(pk=waiting.round.id)
    return None if round_.state == Round.State.RUNNING else round_.recorded()


def first_call_waiting(name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> tool_calls.Waiting:
    """A first call's request, waiting for its run, which has run (as a worker runs it)."""
    with _committing():
        step = tool_calls.begin(_request(name, arguments, **kw))
    assert isinstance(step, tool_calls.Waiting), step
    with _committing():
        runs.run_round(step.round.id)
    return step


def begun(name: str, arguments: dict[str, Any] | None = None, **request: Any) -> Round:
    """A tools/call whose request committed its round and then died before it could enqueue the
    run (its web host was killed): the running round, nobody's task."""
    with _committing():
        step = tool_calls.begin(_request(name, arguments, **request))
    assert isinstance(step, tool_calls.Waiting), step
    ENQUEUED.clear()  # the publish that died with the request
    return Round.objects.get(pk=step.round.id)


def rounds_enqueued() -> list[str]:
    """The rounds handed to the broker so far in this test."""
    return [args[0] for name, args, _ in ENQUEUED if name == round_queue.RUN_ROUND]


def reply_from_notification(waiting: tool_calls.Waiting, recorded: Any) -> dict[str, Any] | None:
    """The web's answer from the run's notification alone; None when it must use the database."""
    outcome = tool_calls.outcome_from_record(waiting, recorded)
    return None if outcome is None else _rendered(waiting.req, outcome)


def reply_after_wait(waiting: tool_calls.Waiting) -> dict[str, Any] | tool_calls.Waiting:
    """The web's answer from the round's row, as when the notification did not carry its record."""
    with _committing():
        return _rendered(waiting.req, tool_calls.after_wait(waiting, timed_out=False))


def answer(name: str, arguments: dict[str, Any] | None, round_: dict[str, Any], responses: dict, **kw: Any) -> dict:
    """Call again with answers to `round_` and its requestState."""
    return call(name, arguments, responses=responses, request_state=round_["requestState"], **kw)


def asked(name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    """Call the tool and expect a round of questions."""
    result = call(name, arguments, **kw)
    assert result.get("resultType") == "input_required" and "inputRequests" in result, result
    return result


def refused(name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    """Call the tool and expect a JSON-RPC error: {"code", "message", "data"} as on the wire."""
    try:
        result = call(name, arguments, **kw)
    except RpcError as exc:
        return error_of(exc)
    raise AssertionError(f"no error: {result}")


def refused_answer(name: str, arguments: dict[str, Any] | None, round_: dict[str, Any], responses: dict, **kw: Any):
    """Answer `round_` and expect a JSON-RPC error."""
    return refused(name, arguments, responses=responses, request_state=round_["requestState"], **kw)


def error_of(exc: RpcError) -> dict[str, Any]:
    error = {"code": exc.code, "message": exc.message}
    if exc.data is not None:
        error["data"] = exc.data
    return error


def finish_runs() -> None:
    """The worker's side for the rounds left running (`call(..., outlasting=True)`)."""
    for round_id in Round.objects.filter(state=Round.State.RUNNING).values_list("pk", flat=True):
        with _committing():
            runs.run_round(round_id)


def run_round(round_id: Any) -> Lease:
    """A worker's attempt at the round: what its lease got."""
    with _committing():
        return runs.run_round(round_id)


def take_lease(round_id: Any) -> Lease:
    """A worker's attempt at the round's lease, without running it: what it got."""
    return store.take_lease(round_id)[0]


def take_over(round_id: Any) -> Round:
    """Another worker takes the round's lease (its last holder's ran out): the round as it reads it."""
    lease, round_ = store.take_lease(round_id)
    assert lease == Lease.AGAIN and round_ is not None, lease
    return round_


def run_holding(round_: Round, *, attempted_before: bool = True) -> None:
    """The run of a worker that holds the round's lease (`take_over`, `worker_running`), as
    run_round makes it once it has the lease."""
    with _committing():
        runs.run_leased(round_, attempted_before=attempted_before, lease_lost=round_.lease.lost)


def lease_and_die(round_id: Any) -> None:
    """A worker takes the round's lease, then is killed: nobody renews it."""
    assert take_lease(round_id) in (Lease.FIRST, Lease.AGAIN)


def run_ended(call_: ToolCall) -> None:
    """A run of the call (a new round of it) ended with a result, reached by a requestState: the
    call is finished and kept as such a call is."""
    first = Round.objects.create(
        call=call_, number=call_.rounds.count(), request_state_hash="-", with_request_state=True
    )
    leased = store.lease_first(first.pk)
    assert leased is not None
    assert (
        store.record_round(leased, Round.State.FINISHED, {"kind": "result", "result": {}}) is store.Recording.RECORDED
    )
    call_.refresh_from_db()


def lost_record(round_: Round) -> bool:
    """A worker records the end of the run it holds `round_` for: False when its lease was taken
    over (or another run recorded the round)."""
    recorded = store.record_round(round_, Round.State.FINISHED, {"kind": "result", "result": {}}, with_call=False)
    return recorded is store.Recording.LOST


def nudge_stalled() -> dict[str, int]:
    """The stalled-round sweep."""
    return round_queue.nudge_stalled_rounds()


@contextlib.contextmanager
def worker_running(round_id: Any, *, lease: bool = False):
    """A live worker holding the round's lease, with its heartbeat (beat it with `heartbeat_beat`);
    yields what the worker's stop hands back, or (`lease`) the lease it holds, with the round as
    the worker read it (`.round`)."""
    handed_back: list[Any] = []
    lease, round_ = store.take_lease(round_id)  # as the worker reads it: with its lease
    assert lease in (Lease.FIRST, Lease.AGAIN) and round_ is not None
    with heartbeat.holding(str(round_id), renew=round_.lease.renew, hand_back=lambda: runs.hand_back(round_)) as held:
        yield SimpleNamespace(lost=held.lost, round=round_) if lease else handed_back


def heartbeat_beat() -> int:
    return heartbeat.beat()


def stop_worker(grace: float) -> list[int]:
    """SIGTERM's graceful stop, in this process, with `grace` seconds: the exit codes it ended the
    process with (none when every run finished within the grace period)."""
    exits: list[int] = []
    heartbeat.hand_back_after_grace(0, grace, exit=exits.append)
    return exits


def sweep() -> dict[str, int]:
    """The periodic sweep: remove the expired calls with their threads."""
    with _committing():
        return sweeping.remove_expired_calls()


def is_finished(call_: ToolCall) -> bool:
    return call_.status == ToolCall.Status.FINISHED


def is_paused(call_: ToolCall) -> bool:
    return call_.status == ToolCall.Status.PAUSED


def call_of(request_state: str) -> ToolCall:
    """The ToolCall row behind a requestState (its first part is the round id)."""
    return Round.objects.select_related("call").get(pk=request_state.partition(".")[0]).call


def rounds_of(request_state: str) -> int:
    return Round.objects.filter(call=call_of(request_state)).count()


# --- the MCP Tasks extension -----------------------------------------------------------------------


def task_request(method: str, task_id: str, *, by: Caller | None = None, capabilities: dict | None = None, **params):
    """One tasks/get, tasks/update or tasks/cancel: its result, or the RpcError it is answered with."""
    message = protocol.Message(
        id=1,
        method=method,
        params={"taskId": task_id, **params},
        version=protocol.MODERN,
        client_capabilities=WITH_TASKS if capabilities is None else capabilities,
    )
    protocol.validate_params(message)
    with _committing():
        return dispatch.start(message, by or caller())


def get_task(task_id: str, **kw: Any) -> dict[str, Any]:
    return task_request("tasks/get", task_id, **kw)


def update_task(task_id: str, responses: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return task_request("tasks/update", task_id, inputResponses=responses, **kw)


def cancel_task(task_id: str, **kw: Any) -> dict[str, Any]:
    return task_request("tasks/cancel", task_id, **kw)


def task_refused(method: str, task_id: str, **kw: Any) -> dict[str, Any]:
    try:
        result = task_request(method, task_id, **kw)
    except RpcError as exc:
        return error_of(exc)
    raise AssertionError(f"no error: {result}")


def task(name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    """Call the tool as a client that declares the extension, and expect a task."""
    result = call(name, arguments, capabilities=kw.pop("capabilities", WITH_TASKS), **kw)
    assert result.get("resultType") == "task", result
    return result


def call_of_task(task_id: str) -> ToolCall:
    return ToolCall.objects.get(pk=task_id.partition(".")[0])


# --- staff approvals -------------------------------------------------------------------------------


def paused_for_staff(name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> ApprovalRequest:
    """A tools/call that the run hands to staff: the approval it waits for."""
    result = call(name, arguments, **kw)
    assert result.get("structuredContent", {}).get("status") == "pending", result
    return ApprovalRequest.objects.get(pk=result["structuredContent"]["approval_id"])


def decide(
    approval: ApprovalRequest,
    *,
    approved: bool,
    note: str | None = None,
    by: Any = None,
    door: str = "api",
    arguments: list[Any] | None = None,
    on_behalf_of: Any = None,
    seen_policy_version: int | None = None,
    step_up: Any = None,
) -> ApprovalRequest:
    """A staff decision through the admin (`door="admin"`, by the user `by`) or the REST API (by
    `by`'s staff token, or the shared admin token when `by` is None), with `arguments` edited
    before approving, `on_behalf_of` the staff member `by` is a delegate of, and `step_up` the
    proof the door received (`step_up_proof`). Its resume is enqueued (in ENQUEUED), not run: see
    `run_resumes`."""
    with _committing():
        return approval_services.approval_decide(
            approval=approval,
            approved=approved,
            note=note,
            via=DecidedVia(door),
            user=by,
            edited_arguments=arguments,
            on_behalf_of=on_behalf_of,
            seen_policy_version=seen_policy_version,
            step_up=step_up,
        )


def step_up_proof(user: Any, *, password: str = "", code: str = "", at: float | None = None) -> Any:
    """The step-up a door hands the decision service: `user`'s password or TOTP code sent with the
    decision, or the time (`at`, a Unix time) their login stepped up."""
    return approval_services.StepUpProof(user.pk, at=at, password=password, code=code)


def caller_of(user: Any) -> Caller:
    """The MCP caller whose token belongs to `user` (the default auth handler's identity)."""
    return caller(user_identity(user.pk))


def request_changes(
    approval: ApprovalRequest, changes: str, *, by: Any = None, door: str = "api", step_up: Any = None
) -> ApprovalRequest:
    """Staff send the call back with what must change (through the admin or the REST API, as
    `decide`). Its resume is enqueued, not run: see `run_resumes`."""
    with _committing():
        return approval_services.approval_request_changes(
            approval=approval, changes=changes, via=DecidedVia(door), user=by, step_up=step_up
        )


def audit_event(kind: str, **data: Any) -> Any:
    """One event appended to the audit chain, as a state change appends it, committed."""
    from approvals import audit

    with _committing():
        return audit.record(kind, **data)


def resumes_enqueued() -> list[str]:
    """The ids of the approvals whose resume was handed to the broker in this test, not yet run."""
    return [args[0] for name, args, _ in ENQUEUED if name == approval_services.RESUME_APPROVAL]


def run_resumes() -> list[str]:
    """The worker's side of the resumes enqueued so far: each runs (and leaves ENQUEUED) in turn;
    the ids of the approvals resumed."""
    ran = []
    while queued := [entry for entry in ENQUEUED if entry[0] == approval_services.RESUME_APPROVAL]:
        ENQUEUED.remove(queued[0])
        approval_id = queued[0][1][0]
        with _committing():
            approval_resumes.approval_resume(approval_id=approval_id)
        ran.append(approval_id)
    return ran


def slack_responses() -> list[tuple[str, dict[str, Any]]]:
    """(response_url, message) of each Slack message update handed to the broker in this test."""
    from approvals import slack

    return [(args[0], json.loads(args[1])) for name, args, _ in ENQUEUED if name == slack.RESPOND]


def send_slack_responses() -> None:
    """The worker's side of the Slack message updates enqueued so far: each posted to its URL."""
    from approvals import slack

    while queued := [entry for entry in ENQUEUED if entry[0] == slack.RESPOND]:
        ENQUEUED.remove(queued[0])
        slack.respond(*queued[0][1])


def email_link(approval: ApprovalRequest, *, approve: bool = True) -> str:
    """A fresh Approve (or Reject) link, as an approval's e-mail carries one."""
    from approvals import email_links

    return email_links.link(approval, email_links.APPROVE if approve else email_links.REJECT)


def expire_approvals() -> int:
    """Beat's "sweep-approvals": how many approvals nobody decided in time it declined."""
    with _committing():
        return approval_services.approvals_expire()


def escalate_approvals() -> int:
    """Beat's "escalate-approvals": how many approvals pending too long were escalated."""
    with _committing():
        return approval_services.approvals_escalate()


def sweep_command() -> str:
    """`manage.py sweep`, cron's stand-in for beat: what it prints."""
    import io

    from django.core.management import call_command

    out = io.StringIO()
    with _committing():
        call_command("sweep", stdout=out)
    return out.getvalue()


def waiting_for_staff() -> list[ApprovalRequest]:
    """The queue staff decide from (the admin's and the REST API's list)."""
    return list(approval_selectors.approvals_pending())


def thread_state(thread_id: str, graph: str = "digital_twin") -> dict[str, Any]:
    """The values of the thread's last checkpoint."""
    return dict(runner.state(get_graph(graph), thread_id).values)


def resume_thread_with(approval: ApprovalRequest, value: Any) -> Any:
    """Resume the paused thread with `value` as what interrupt() returns, as the worker does.

    Staff's decisions always reach the graph as {"approved": bool, "note": ...} (approval.decision),
    so any other value can only be sent to the graph here, where it enters it."""
    return runner.run(get_graph(approval.graph), approval.thread_id, resume={approval.interrupt_id: value})


def write_thread_state(thread_id: str, values: dict[str, Any], *, as_node: str, graph: str = "digital_twin") -> None:
    """Write `values` into the thread's state as if `as_node` had returned them, as a run that died
    after that node would leave them."""
    runner.bound(get_graph(graph).graph).update_state(
        {"configurable": {"thread_id": thread_id}}, values, as_node=as_node
    )


def run_thread(
    thread_id: str, *, arguments: dict[str, Any] | None = None, carry_on: bool = False, graph: str = "digital_twin"
) -> Any:
    """Run the thread on from its last checkpoint (`carry_on`), or with a new input (`arguments`)."""
    return runner.run(get_graph(graph), thread_id, arguments=arguments, carry_on=carry_on)


def forget_thread(thread_id: str) -> None:
    """Delete the thread's checkpoints: it is no longer paused on anything."""
    runner.delete_thread(thread_id)


@contextlib.contextmanager
def committing():
    """Run what the service leaves for after its commit (a decision's resume enqueued) as the block
    ends: for requests made with Django's test client inside the test's transaction."""
    with _committing():
        yield


# --- the embedded default's run threads ------------------------------------------------------------

# The real hand-off, before no_broker replaces it in every test.
_enqueue_on_run_threads = work.enqueue
_hold = threading.Event()


@shared_task(name="tests.inprocess.held_run")
def _held_run() -> None:
    """A run that holds its thread until the test lets it go (it touches no database)."""
    _hold.wait(60)


@contextlib.contextmanager
def run_threads_full():
    """The embedded default (runs on threads of this process) with every run thread busy and
    EMBEDDED_RUN_QUEUE_MAX runs queued behind them, on the real pool; let go as the block ends."""
    eager = settings.CELERY_TASK_ALWAYS_EAGER
    settings.CELERY_TASK_ALWAYS_EAGER = True
    _hold.clear()
    try:
        for _ in range(settings.CELERY_WORKER_CONCURRENCY + settings.EMBEDDED_RUN_QUEUE_MAX):
            _enqueue_on_run_threads("tests.inprocess.held_run")
        yield
    finally:
        _hold.set()
        settings.CELERY_TASK_ALWAYS_EAGER = eager
        deadline = time.monotonic() + 30
        while work.in_process_backlog() and time.monotonic() < deadline:
            time.sleep(0.01)


# --- for the layer's conftest ----------------------------------------------------------------------


def no_broker(monkeypatch) -> None:
    """Nothing is handed to a broker: the driver runs each round itself. What would have been is
    in ENQUEUED. The process is not stopping, and its heartbeat has no thread."""
    ENQUEUED.clear()
    monkeypatch.setattr(work, "enqueue", lambda name, *args, countdown=None: ENQUEUED.append((name, args, countdown)))
    monkeypatch.setattr(heartbeat, "_stopping", type(heartbeat._stopping)())
    monkeypatch.setattr(heartbeat, "_handing_back", type(heartbeat._handing_back)())
    # The heartbeat beats when a test says so (heartbeat_beat). Its own thread would use a connection
    # of its own, which does not see the test's uncommitted rows: a beat that came while a round ran
    # would find its lease gone and stop the run as taken over.
    monkeypatch.setattr(heartbeat, "_start_thread", lambda: None)


def close_checkpoint_pools() -> None:
    from graph_runtime.checkpointer import close_pools

    close_pools()


def progress_told(reports: list[tuple[str, dict[str, float] | None]]) -> list[dict[str, Any]]:
    """The notifications/progress params a 2026-07-28 call's stream sends when it reads the call
    after each of `reports` (a message, and the graph's own numbers or None for a step's name)."""
    import json

    from mcp_gateway.wires.rounds import call_notifications

    call_id = first_call_waiting("choose_region").round.call_id
    notices = call_notifications._Notices(call_id, token="t", logs=False)
    told = []
    for message, numbers in reports:
        store.report_progress(call_id, message, numbers)
        told += [json.loads(frame.decode().split("data: ", 1)[1])["params"] for frame in notices.read()]
    return told


# --- older clients' sessions (MCP_OLDER_CLIENTS=answer) -------------------------------------------


def open_session(
    by: Caller | None = None,
    *,
    version: str = "2025-11-25",
    capabilities: dict[str, Any] | None = None,
    client_info: dict[str, Any] | None = None,
) -> str:
    """An initialize's session, as the view opens it; its id."""
    from mcp_gateway.wires.sessions import sessions

    params: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": EVERY_MODE if capabilities is None else capabilities,
    }
    if client_info is not None:
        params["clientInfo"] = client_info
    message = protocol.Message(0, "initialize", params, version)
    return sessions.open_session(message, by or caller(), version)


def session_of(raw: str, by: Caller | None = None) -> Any:
    """The session a request naming `raw` is served in; None where the view answers 404."""
    from mcp_gateway.wires.sessions import sessions

    return sessions.session_of(raw, by or caller())


def stored_session(raw: str) -> Any:
    from mcp_gateway.models import Session
    from mcp_gateway.wires.sessions import sessions

    return Session.objects.get(key_hash=sessions.key_hash(raw))


def tools_listed_in_session(raw: str, version: str = "2025-11-25") -> dict[str, dict[str, Any]]:
    """What tools/list answers an older client in the session `raw` names, by tool name."""
    listed = dispatch.start(protocol.Message(1, "tools/list", {}, version), caller(), stored_session(raw))
    assert isinstance(listed, dict)
    return {tool["name"]: tool for tool in listed["tools"]}


def sessions_stored() -> list[Any]:
    from mcp_gateway.models import Session

    return list(Session.objects.all())


def sweep_calls() -> dict[str, int]:
    from mcp_gateway import tasks

    return tasks.sweep_calls()


def open_stream_allowed(by: Caller | None = None) -> None:
    """Raises the RpcError a request gets when its stream would pass MCP_MAX_STREAMS or the
    caller's MCP_STREAMS_PER_CALLER."""
    from mcp_gateway.wires.sessions import call_streams

    call_streams.check_capacity(by or caller())


def stream_place(identity: str) -> Any:
    """A place for one stream of `identity`'s (give_back() ends it), or the RpcError that refuses it."""
    from mcp_gateway.streams import capacity

    return capacity.take(identity)


def streams_open(identity: str | None = None) -> int:
    """The streams this process counts as served: all of them, or one caller's."""
    from mcp_gateway.streams import capacity

    return capacity.open_streams(identity)


def pumped(
    reads: list[dict[str, Any] | BaseException],
    *,
    identity: str = "pumped",
    first: tuple[bytes, ...] = (),
    client_leaves_after: int | None = None,
) -> list[str]:
    """The frames the stream pump sends (as text) for a stream whose successive reads give these
    (each a pump.Read's fields, or an exception the read raises), until a read says done or the
    client leaves after that many frames. The stream's place is taken for `identity`."""
    import asyncio

    from mcp_gateway.streams import capacity, pump

    steps = iter(reads)

    def read() -> pump.Read:
        step = next(steps)
        if isinstance(step, BaseException):
            raise step
        return pump.Read(**step)

    async def client() -> list[str]:
        got: list[str] = []
        frames = pump.pump(read, capacity.take(identity), first=first)
        try:
            async for frame in frames:
                got.append(frame.decode())
                if client_leaves_after is not None and len(got) >= client_leaves_after:
                    break
        finally:
            await frames.aclose()  # as Django's ASGI handler closes a stream whose client went away
        return got

    return asyncio.run(client())


def stream_questions_answered_between_reads(name: str, answer: dict[str, Any], *, first: int) -> list[str]:
    """A 2025-11-25 session's stream of a call of `name` that asks its questions; the client
    answers the `first` of them with `answer` while the stream reads the round again, after it
    read the round and before it looked at which questions are open (as a response from another
    web process can arrive). The keys of the questions the stream has asked, in order."""
    from mcp_gateway.models import StreamEvent
    from mcp_gateway.wires.sessions import call_streams

    session = stored_session(open_session())
    call_id = first_call_waiting(name).round.call_id
    streaming = call_streams.open_stream(session, 1, caller(), call_id)
    call_streams.Reading(streaming).read()
    questions = StreamEvent.objects.filter(stream_id=streaming.stream_id, kind=StreamEvent.Kind.QUESTION)
    ask = call_streams.ask_round

    def answered_meanwhile(stream, req, round_):
        for question in questions.order_by("pk")[:first]:
            response = {"jsonrpc": "2.0", "id": f"{streaming.stream_id}.{question.pk}", "result": answer}
            call_streams.take_response(session, caller(), response)
        ask(stream, req, round_)

    call_streams.ask_round = answered_meanwhile
    try:
        call_streams.Reading(streaming).read()
    finally:
        call_streams.ask_round = ask
    return list(questions.order_by("pk").values_list("key", flat=True))


def call_stream(name: str, arguments: dict[str, Any] | None = None, *, capabilities: dict[str, Any]) -> Any:
    """A 2025-11-25 session (its client declaring `capabilities`) whose tools/call of `name` is
    answered on the call's stream, its first run done: the stream, to read and answer."""
    from mcp_gateway.wires.sessions import call_streams

    session = stored_session(open_session(capabilities=capabilities))
    call_id = first_call_waiting(name, arguments).round.call_id
    return SimpleNamespace(session=session, streaming=call_streams.open_stream(session, 1, caller(), call_id))


def stream_messages(stream: Any) -> list[dict[str, Any]]:
    """The JSON-RPC messages the call's stream sends now that it has not sent before."""
    from mcp_gateway.wires.sessions import call_streams

    if not hasattr(stream, "reading"):
        stream.reading = call_streams.Reading(stream.streaming)
    with _committing():
        read = stream.reading.read()
    return [
        json.loads(line.removeprefix("data: "))
        for frame in read.frames
        for line in frame.decode().splitlines()
        if line.startswith("data: ")
    ]


def respond_on_stream(stream: Any, request_id: str, result: dict[str, Any]) -> None:
    """The client's response to a request its call's stream sent (the view answers 202)."""
    from mcp_gateway.wires.sessions import call_streams

    with _committing():
        call_streams.take_response(stream.session, caller(), {"jsonrpc": "2.0", "id": request_id, "result": result})


def call_in_session(raw: str, name: str, by: Caller | None = None) -> ToolCall:
    """A tools/call of `name` in the 2025-11-25 session `raw`, as the view starts it (its run left
    for finish_runs): the call it started."""
    message = protocol.Message(1, "tools/call", {"name": name, "arguments": {}}, "2025-11-25")
    with _committing():
        step = dispatch.start(message, by or caller(), stored_session(raw))
    assert isinstance(step, tool_calls.Waiting), step
    return step.round.call


def older_task(raw: str, name: str, by: Caller | None = None) -> str:
    """A task-augmented tools/call of `name` in the 2025-11-25 session `raw`: its task id."""
    from mcp_gateway.http import dispatch

    params = {"name": name, "arguments": {}, "task": {}}
    with _committing():
        message = protocol.Message(1, "tools/call", params, "2025-11-25")
        created = dispatch.start(message, by or caller(), stored_session(raw))
    assert isinstance(created, dict), created
    return created["task"]["taskId"]


def open_session_stream(raw: str, by: Caller | None = None) -> Any:
    """The session's own stream (GET without Last-Event-ID), opened."""
    from mcp_gateway.wires.sessions import session_streams

    return session_streams.open_stream(stored_session(raw), by or caller(), None)


def session_stream_statuses(watching: Any) -> dict[str, dict[str, Any]] | None:
    """What an open session stream reads now: each watched task's notifications/tasks/status
    params by task id; None when the stream ends there."""
    from mcp_gateway.wires.sessions import session_streams

    read = session_streams.statuses(watching)
    return None if read is None else {task_id: n["params"] for task_id, n in read[0].items()}


def session_stream_resumed_after(last_event_id: str) -> int | None:
    """The number of the last event a session's stream resumed with `last_event_id` counts on from."""
    from mcp_gateway.wires.sessions import session_streams

    return session_streams.open_stream(stored_session(open_session()), caller(), last_event_id).after


def task_result_stream_messages(name: str, *, meta: dict[str, Any], progress: str) -> list[dict[str, Any]]:
    """A 2025-11-25 session's task-augmented tools/call of `name` carrying `meta`, then its
    tasks/result stream read once while the run reports `progress`: the messages it sends."""
    import json

    from mcp_gateway.http import dispatch
    from mcp_gateway.models import CallStream, ToolCall
    from mcp_gateway.wires.sessions import call_streams

    session = stored_session(open_session())
    params = {"name": name, "arguments": {}, "task": {}, "_meta": meta}
    created = dispatch.start(protocol.Message(1, "tools/call", params, "2025-11-25"), caller(), session)
    assert isinstance(created, dict), created
    task_id = created["task"]["taskId"]
    result = protocol.Message(2, "tasks/result", {"taskId": task_id}, "2025-11-25")
    streaming = dispatch.start(result, caller(), session)
    assert isinstance(streaming, call_streams.Streaming), streaming
    ToolCall.objects.filter(pk=CallStream.objects.get(pk=streaming.stream_id).call_id).update(progress=progress)
    step = call_streams.Reading(streaming).read()
    return [json.loads(frame.decode().split("data: ", 1)[1]) for frame in step.frames]


# --- the endpoint's request half -------------------------------------------------------------------


def post_mcp(
    method: str,
    params: dict[str, Any],
    *,
    headers: dict[str, str] | None = None,
    without: tuple[str, ...] = (),
    repeated: tuple[tuple[str, str], ...] = (),
) -> tuple[int, dict[str, Any]]:
    """One 2026-07-28 POST to /mcp/ as the view takes it (views.handle_post: authentication, the
    envelope, its headers, the method), in this thread; a tools/call's run is run here too, as
    `call` runs it. `headers`: added to the routing headers a client sends, `without`: routing
    headers left out, `repeated`: header lines sent a second time. The HTTP status and the body."""
    import json

    from django.contrib.auth import get_user_model
    from django.http import HttpResponse
    from django.test import AsyncRequestFactory

    from mcp_gateway.http import views
    from mcp_gateway.models import MCPToken

    user, _ = get_user_model().objects.get_or_create(username="ada")
    meta = {
        "io.modelcontextprotocol/protocolVersion": protocol.MODERN,
        "io.modelcontextprotocol/clientCapabilities": EVERY_MODE,
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": method,
        "params": {**params, "_meta": {**meta, **params.get("_meta", {})}},
    }
    sent = {
        "Authorization": f"Bearer {MCPToken.issue(user)[1]}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": protocol.MODERN,
        "Mcp-Method": method,
        **({"Mcp-Name": params["name"]} if "name" in params else {}),
        **(headers or {}),
    }
    sent = {k: v for k, v in sent.items() if k not in without}
    request = AsyncRequestFactory().post("/mcp/", data=json.dumps(body), content_type="application/json", headers=sent)
    request.scope["headers"] += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in repeated]
    with _committing():
        answer = views.handle_post(request, request.body)
    if isinstance(answer, HttpResponse):
        return answer.status_code, json.loads(answer.content)
    message, _session, step = answer
    while isinstance(step, tool_calls.Waiting):
        with _committing():
            runs.run_round(step.round.id)
        with _committing():
            step = _run_ended(step)
    return 200, protocol.result_body(message, step)


# --- the hosted answer pages -----------------------------------------------------------------------


def answer_page(request_state: str) -> str:
    """The path of the answer page of the round a requestState names."""
    from mcp_gateway.wires.pages import links

    return links.path_for(Round.objects.select_related("call").get(pk=request_state.partition(".")[0]))


def latest_answer_page(request_state: str) -> str:
    """The path of the answer page of the latest round of the call a requestState names."""
    from mcp_gateway.wires.pages import links

    latest = Round.objects.select_related("call").filter(call=call_of(request_state)).order_by("-number").first()
    assert latest is not None
    return links.path_for(latest)


def asking_page(call_: ToolCall) -> str:
    """The path of the answer page of the call's asking round."""
    from mcp_gateway.wires.pages import links

    return links.path_for(Round.objects.select_related("call").get(call=call_, state=Round.State.ASKING))


def answer_page_url(request_state: str) -> str:
    """The answer page's link as other code gets it to hand out (absolute with SITE_URL)."""
    from mcp_gateway.wires.pages import links

    return links.url_for(Round.objects.select_related("call").get(pk=request_state.partition(".")[0]))
