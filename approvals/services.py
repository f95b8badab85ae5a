"""Every state change of an approval, each in one transaction.

    run pauses on a staff_approval interrupt ──► approval_request_create (worker, with the round)
    staff decide (admin or REST API) ──► approval_decide ──after commit──► resume_approval task
    resume_approval ──► approval_resume: run the thread on, record the answer, archive the drafts
    nobody decides in time ──► approvals_expire (Celery beat's "sweep-approvals")
    the MCP client cancels the task waiting for it ──► approval_withdraw (through the hand-over point)
    a resume that was never enqueued, or whose worker died ──► approval_resumes_nudge (beat's
        "take-over-stalled-resumes", every STALLED_CHECK_SECONDS)

The gateway's call is reached only through its hand-over point (mcp_gateway.handover): kept
waiting while staff decide, its resume traced as part of it, finished when the resumed run has
ended.

The decision is claimed under a row lock, so however many decisions arrive at once, exactly one
wins; the rest get ApprovalConflict. The resume is claimed with a lease (a conditional UPDATE, as
the gateway's rounds are), so however many copies of it run, exactly one runs the thread on.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from datetime import timedelta
from functools import partial
from typing import Any

import jsonschema
from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from langgraph.types import Interrupt

from hitl_project.graphs import heartbeat, log_context, runner, work
from hitl_project.graphs.registry import get_graph
from mcp_gateway import handover

from . import metrics, notifications, selectors
from .interrupts import STAFF_APPROVAL
from .models import ApprovalPolicy, ApprovalRequest, ContactMessage, DecidedVia, Signoff

logger = logging.getLogger(__name__)

# A task's statusMessage from the decision until the resumed run ends (handover.resuming).
RESUMING = {
    ApprovalRequest.Status.APPROVED: "Staff approved; the agent is resuming",
    ApprovalRequest.Status.REJECTED: "Staff rejected the action; the agent is resuming",
    ApprovalRequest.Status.EXPIRED: "Nobody decided in time; the agent is resuming with a decline",
}
# The Celery task that resumes a decided approval (tasks.py), enqueued by name: see work.enqueue.
RESUME_APPROVAL = "approvals.tasks.resume_approval"
# Longer than any gap between a decision's commit and a worker taking its resume.
RESUME_STALLED_AFTER = timedelta(seconds=60)


class NothingPending(Exception):
    """The thread's checkpoint holds no staff approval to decide."""


class ApprovalConflict(Exception):
    """The approval can no longer be decided: it was decided already, or it expired."""

    def __init__(self, approval: ApprovalRequest):
        self.approval = approval
        if approval.decided_at is not None:
            super().__init__(f"This approval was already {approval.status}.")
        elif approval.status == ApprovalRequest.Status.WITHDRAWN:
            super().__init__("This approval was withdrawn: the client cancelled its request.")
        else:
            super().__init__("This approval has expired.")


def is_staff_approval(interrupt: Interrupt) -> bool:
    value = interrupt.value
    return isinstance(value, dict) and value.get("type") == STAFF_APPROVAL


def model_text(state: dict[str, Any]) -> str:
    """What the model said last: the graph's `answer`, else the text of its last AI message."""
    if state.get("answer"):
        return str(state["answer"])
    for message in reversed(state.get("messages") or []):
        if getattr(message, "type", None) == "ai":
            return message.text
    return ""


# --- the pause ------------------------------------------------------------------------------


@transaction.atomic
def approval_request_create(
    *, call_id: Any, thread_id: str, graph: str, interrupt: Interrupt, agent_message: str = ""
) -> ApprovalRequest:
    """Queue one staff_approval interrupt for staff, and tell them once the pause is committed."""
    value = interrupt.value
    policy = value.get("policy") if isinstance(value.get("policy"), dict) else {}
    policy_id = policy.get("id")
    # get_or_create: a round that is run again after a crash pauses on the same interrupt id.
    approval, created = ApprovalRequest.objects.get_or_create(
        thread_id=thread_id,
        interrupt_id=interrupt.id,
        defaults={
            "call_id": call_id,
            "graph": graph,
            "tool_calls": list(value.get("tool_calls") or []),
            "visitor_message": str(value.get("visitor_message") or ""),
            "agent_message": agent_message,
            "expires_at": timezone.now() + settings.APPROVAL_TTL,
            # The rule as the agent evaluated it when it paused: a link while the rule exists, and
            # its name for good. Only 2 means the two-person rule; anything else is one approval.
            "policy": ApprovalPolicy.objects.filter(pk=policy_id).first() if isinstance(policy_id, int) else None,
            "policy_name": str(policy.get("name") or "")[:120],
            "approvals_required": 2 if value.get("approvals_required") == 2 else 1,
            "argument_schemas": _schemas(value),
        },
    )
    if created:
        # robust: a mail server that is down must not undo or fail the pause.
        transaction.on_commit(lambda: notifications.approval_requested(approval_id=approval.pk), robust=True)
    return approval


def _schemas(value: dict[str, Any]) -> list[Any] | None:
    """One parameters schema per tool call, or None when the interrupt gives none that fit."""
    schemas = value.get("argument_schemas")
    if not isinstance(schemas, list) or len(schemas) != len(value.get("tool_calls") or []):
        return None
    return [schema if isinstance(schema, dict) and _is_schema(schema) else None for schema in schemas]


def _is_schema(schema: dict[str, Any]) -> bool:
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError:
        return False  # edits of this call are checked as JSON objects only
    return True


# --- the decision ---------------------------------------------------------------------------


def paused_on(*, graph: str, thread_id: str) -> list[str]:
    """The ids of the staff approvals the thread's checkpoint is paused on.

    Whether anything is pending comes from the checkpoint alone (the article's rule: a thread that
    is not actually paused cannot be approved into running something), never from the rows.
    """
    registered = get_graph(graph)
    if registered is None:
        return []
    return [i.id for i in runner.pending_interrupts(registered, thread_id) if is_staff_approval(i)]


def approval_for_thread(*, thread_id: str) -> ApprovalRequest:
    """The approval a decision on `thread_id` is about (the REST API names threads, not approvals).

    The rows only say which graph the thread runs and which approval a pending interrupt belongs
    to; what is pending comes from the checkpoint (paused_on).
    """
    rows = ApprovalRequest.objects.filter(thread_id=thread_id)
    graph = rows.values_list("graph", flat=True).first()
    pending = paused_on(graph=graph, thread_id=thread_id) if graph else []
    # The rows are read after the checkpoint: a decision commits before its resume moves the
    # checkpoint on, so a thread that has run on is seen decided here, never as unknown.
    approval = rows.filter(interrupt_id__in=pending).order_by("created_at").first()
    if approval is not None:
        return approval
    latest = rows.order_by("-created_at").first()
    if latest is not None and latest.decided_at is not None:
        raise ApprovalConflict(latest)  # a second decision, on a thread that ran on after the first
    raise NothingPending


class InvalidEdit(ValueError):
    """Edited arguments that are not the same calls, each with a JSON object of arguments that
    fits the tool's parameters schema."""


class SameApprover(Exception):
    """A second approval of a two-person approval by the one who gave the first, or by the admin
    token, which is nobody in particular."""


def _checked_edits(approval: ApprovalRequest, edits: list[Any]) -> list[dict[str, Any]] | None:
    """The edited calls as they will run, or None when nothing changed."""
    original = approval.tool_calls
    if len(edits) != len(original):
        raise InvalidEdit(f"Give arguments for each of the {len(original)} tool call(s), in order.")
    calls = []
    schemas = approval.argument_schemas or [None] * len(original)
    for call, arguments, schema in zip(original, edits, schemas, strict=True):
        if not isinstance(arguments, dict):
            raise InvalidEdit(f"The arguments of {call.get('name')} must be a JSON object.")
        if isinstance(schema, dict):
            # The tool's own parameters schema, as the agent declared it to the model.
            validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
            error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
            if error is not None:
                where = "/".join(str(part) for part in error.absolute_path)
                raise InvalidEdit(
                    f"The arguments of {call.get('name')} do not fit its parameters"
                    f"{f' at {where}' if where else ''}: {error.message}."
                )
        calls.append({"name": call.get("name"), "input": arguments})
    return None if calls == _as_run(original) else calls


@transaction.atomic
def approval_decide(
    *,
    approval: ApprovalRequest,
    approved: bool,
    note: str | None,
    via: DecidedVia,
    user: Any = None,
    edited_arguments: list[Any] | None = None,
) -> ApprovalRequest:
    """Record a staff decision (through the admin, by `user`, or the REST API) and enqueue the
    resume. Never waits for the model. `edited_arguments`: with an approval, the arguments each
    tool call runs with instead of the agent's (one JSON object per call, in order).

    Raises ApprovalConflict when it was decided already or has expired (even if the beat sweep has
    not marked it yet), NothingPending when its thread's checkpoint is not paused on it,
    InvalidEdit for edited arguments that do not fit the calls, and SameApprover when a request
    that needs two approvals is approved twice by the same person.

    A request that needs two approvals (approvals_required) stays pending after the first: each
    approval is a Signoff of its own, and only the last one decides and resumes the run. A
    rejection by anyone ends it at once.
    """
    # The row lock makes decisions on one approval take turns: the second one to get here sees
    # the first one's status and is refused, so the thread is resumed exactly once.
    approval = ApprovalRequest.objects.select_for_update().get(pk=approval.pk)
    if not approval.is_decidable:
        raise ApprovalConflict(approval)
    # Checked here, so every way in (the admin holds a row, the API a thread) is held to it.
    if approval.interrupt_id not in paused_on(graph=approval.graph, thread_id=approval.thread_id):
        raise NothingPending
    if approved and approval.approvals_required > 1:
        return _approve_once_more(approval, note=note, via=via, user=user, edited_arguments=edited_arguments)
    # A rejection runs nothing; it keeps, for the audit, what a first approver approved to run.
    edited = approval.edited_tool_calls
    if approved and edited_arguments is not None:
        edited = _checked_edits(approval, edited_arguments)
    if approved:
        Signoff.objects.create(approval=approval, user=user, username=_name(user), via=via, note=note or "")
    _record_decision(approval, approved=approved, note=note, via=via, user=user, edited=edited)
    return approval


def _name(user: Any) -> str:
    return user.get_username() if user is not None else ""


def _approve_once_more(
    approval: ApprovalRequest, *, note: str | None, via: DecidedVia, user: Any, edited_arguments: list[Any] | None
) -> ApprovalRequest:
    """One approval of a request that needs several, by different staff (the two-person rule),
    under the row lock approval_decide holds. Each is its own Signoff; the last one decides."""
    given = list(approval.signoffs.all())
    if user is None:
        raise SameApprover("Two approvals need two named staff: approve with your own login or staff API token.")
    if any(signoff.user_id == user.pk for signoff in given):
        raise SameApprover("You approved this already: another member of staff must give the second approval.")
    edited = None
    if edited_arguments is not None:
        edited = _checked_edits(approval, edited_arguments)
        if given and _as_run(edited or approval.tool_calls) != _as_run(approval.approved_tool_calls):
            # The second approver approves what the first one did; changing it needs a new request.
            raise InvalidEdit("The arguments the first approver approved cannot be changed: approve them or reject.")
    Signoff.objects.create(approval=approval, user=user, username=_name(user), via=via, note=note or "")
    if len(given) + 1 < approval.approvals_required:
        if not given:
            approval.edited_tool_calls = edited
            approval.save(update_fields=["edited_tool_calls"])
        logger.info("approval %s approved %s by %s", approval.pk, approval.progress, user)
        return approval
    # The final approval: the run goes on with the first approver's arguments and the last note given.
    last_note = note or next((signoff.note for signoff in reversed(given) if signoff.note), None)
    _record_decision(approval, approved=True, note=last_note, via=via, user=user, edited=approval.edited_tool_calls)
    return approval


def _as_run(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"name": call.get("name"), "input": call.get("input")} for call in calls]


def _record_decision(
    approval: ApprovalRequest, *, approved: bool, note: str | None, via: DecidedVia, user: Any, edited: Any
) -> None:
    """The final decision: recorded, and the resume enqueued once it has committed."""
    approval.status = ApprovalRequest.Status.APPROVED if approved else ApprovalRequest.Status.REJECTED
    approval.note = note or ""
    approval.edited_tool_calls = edited
    approval.decided_via = via
    approval.decided_by = user
    approval.decided_by_username = _name(user)
    approval.decided_at = timezone.now()
    approval.save(
        update_fields=[
            "status",
            "note",
            "edited_tool_calls",
            "decided_via",
            "decided_by",
            "decided_by_username",
            "decided_at",
        ]
    )
    # A task's client learns the decision was taken before the resumed run ends.
    handover.resuming(approval.call_id, status_message=RESUMING[approval.status])
    _enqueue_resume_on_commit(str(approval.pk))
    transaction.on_commit(lambda: metrics.decided(approval))
    logger.info("approval %s %s through %s by %s", approval.pk, approval.status, via, user or "the admin token")


def _enqueue_resume_on_commit(approval_id: str) -> None:
    # robust: the decision is committed by then; a broker that refuses the task must not turn it
    # into an error (a retry would only get 409). approval_resumes_nudge enqueues it again.
    transaction.on_commit(lambda: work.enqueue(RESUME_APPROVAL, approval_id), robust=True)


def approval_wait_for_answer(*, approval_id: uuid.UUID | str, timeout: float) -> ApprovalRequest:
    """Poll the row until the resumed run's answer has landed or `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        approval = ApprovalRequest.objects.get(pk=approval_id)
        if approval.answered_at is not None or time.monotonic() >= deadline:
            return approval
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, 0.5)


# --- the resume (worker) --------------------------------------------------------------------


def approval_resume(*, approval_id: uuid.UUID | str) -> None:
    """Run the thread on with the decision, then record what came of it. Safe to run twice, and
    twice at once: only the copy that claims the lease runs; the others return at once."""
    if heartbeat.stopping():
        # This worker is stopping: the resume goes to another one (after this process has exited).
        work.enqueue(RESUME_APPROVAL, str(approval_id), countdown=heartbeat.HAND_BACK_COUNTDOWN)
        return
    approval = _claim_resume(approval_id)
    if approval is None:
        return
    lease = ResumeLease(approval.pk, approval.resume_leased_until)
    log_context.about(
        approval_id=str(approval.pk), call_id=approval.call_id and str(approval.call_id), graph=approval.graph
    )
    # The resume's span descends from the staff decision's request; it links to the call's start.
    handover.resume_running(approval.call_id)
    try:
        with heartbeat.holding(
            f"the resume of approval {approval.pk}", renew=lease.renew, hand_back=lambda: _hand_back_resume(lease)
        ) as held:
            _resume(approval, lease, lost=held.lost.is_set)
    except BaseException:
        # Not the agent's failure (that is recorded as the answer) but ours, such as a lost
        # database: let the task's retry have the resume at once.
        lease.end()
        raise


def _claim_resume(approval_id: uuid.UUID | str) -> ApprovalRequest | None:
    """Lease a decided, unanswered approval to this worker, or None when there is nothing to do or
    another copy holds it. The worker's heartbeat renews the lease while the resume runs
    (ResumeLease.renew); once nobody renews it (the worker died), it runs out after
    RUN_LEASE_SECONDS, and a copy enqueued by approval_resumes_nudge or redelivered by the broker
    takes over."""
    now = timezone.now()
    free = Q(resume_leased_until__isnull=True) | Q(resume_leased_until__lte=now)
    lease = now + timedelta(seconds=settings.RUN_LEASE_SECONDS)
    claimable = ApprovalRequest.objects.filter(free, pk=approval_id, decided_at__isnull=False, answered_at__isnull=True)
    if not claimable.update(resume_leased_until=lease):
        return None
    return ApprovalRequest.objects.get(pk=approval_id)


class ResumeLease:
    """This worker's lease on a decided approval's resume: its while resume_leased_until holds the
    value it last wrote (as a round's lease, Round.renew_lease). A worker whose lease another took
    over can neither renew it nor record the answer, and its run stops at its next step."""

    def __init__(self, approval_id: Any, until: Any) -> None:
        self.approval_id, self.until = approval_id, until
        # The heartbeat's thread renews while the run's thread records: one at a time.
        self.lock = threading.Lock()

    def _mine(self) -> QuerySet[ApprovalRequest]:
        return ApprovalRequest.objects.filter(
            pk=self.approval_id, answered_at__isnull=True, resume_leased_until=self.until
        )

    def renew(self) -> bool:
        """The worker is alive (its heartbeat): it holds the resume another RUN_LEASE_SECONDS.
        False once the answer is recorded, or the lease is another worker's."""
        with self.lock:
            until = timezone.now() + timedelta(seconds=settings.RUN_LEASE_SECONDS)
            if not self._mine().update(resume_leased_until=until):
                return False
            self.until = until
            return True

    def end(self) -> None:
        with self.lock:
            self._mine().update(resume_leased_until=None)


def _hand_back_resume(lease: ResumeLease) -> None:
    """The worker stops with this resume still running: another worker carries it on from the
    thread's last checkpoint, at once."""
    lease.end()
    work.enqueue(RESUME_APPROVAL, str(lease.approval_id), countdown=heartbeat.HAND_BACK_COUNTDOWN)


def _resume(approval: ApprovalRequest, lease: ResumeLease, *, lost: Callable[[], bool]) -> None:
    registered = get_graph(approval.graph)
    try:
        if registered is None:
            raise LookupError(f"the graph {approval.graph!r} is no longer registered")
        # One read of the thread decides which of the three cases this is.
        snapshot = runner.state(registered, approval.thread_id)
        if approval.interrupt_id in {i.id for i in snapshot.interrupts}:
            run = runner.run(
                registered, approval.thread_id, resume={approval.interrupt_id: approval.decision}, stop=lost
            )
            values, interrupts = run.values, run.interrupts
        elif runner.stopped_mid_run(snapshot):
            # A redelivered task whose first delivery died in the middle of the resumed run (after
            # the decision was saved, before the run ended): it goes on from the last checkpoint,
            # so the nodes that finished (the approved tool) do not run again, and the answer is
            # the run's end, not the state it had reached.
            run = runner.run(registered, approval.thread_id, carry_on=True, stop=lost)
            values, interrupts = run.values, run.interrupts
        else:
            # A redelivered task whose first delivery resumed the thread but died before recording
            # it: the checkpoint holds the outcome, and resuming again would answer nothing.
            values, interrupts = dict(snapshot.values), ()
            if not values:
                raise LookupError("the paused thread no longer exists")
    except (*runner.INFRASTRUCTURE_ERRORS, DatabaseError):
        raise  # retried by the task (RETRY_ON_INFRASTRUCTURE); approval_resume gives up its lease
    except Exception as exc:  # the agent's own failure is recorded, so nobody waits for ever
        logger.exception("resuming approval %s failed", approval.pk)
        _record_outcome(lease, values={}, interrupts=(), error=f"The resumed run failed: {exc}")
        return
    if lost():
        # Another worker took the resume over while this one could not renew its lease: that one
        # records the answer; this run stopped at its step.
        logger.warning("the resume of approval %s was taken over; this run stops", approval.pk)
        return
    _record_outcome(lease, values=values, interrupts=interrupts)


def _record_outcome(
    lease: ResumeLease, *, values: dict[str, Any], interrupts: Iterable[Interrupt], error: str = ""
) -> None:
    with lease.lock, transaction.atomic():
        approval = ApprovalRequest.objects.select_for_update().get(pk=lease.approval_id)
        if approval.answered_at is not None or approval.resume_leased_until != lease.until:
            return  # recorded by an earlier delivery, or the resume is another worker's now
        _record_answer(approval, values=values, interrupts=interrupts, error=error)


def _record_answer(
    approval: ApprovalRequest, *, values: dict[str, Any], interrupts: Iterable[Interrupt], error: str
) -> None:
    _archive_drafts(approval, values.get("contact_drafts") or [])
    staff_interrupts = [i for i in interrupts if is_staff_approval(i)]
    other_interrupts = [i for i in interrupts if not is_staff_approval(i)]
    if other_interrupts and not error:
        # The MCP client's request ended when the call was handed to staff: nobody can answer.
        error = "The resumed run paused for input that only the MCP client could give."
    approval.answer = model_text(values)
    approval.error = error
    approval.answered_at = timezone.now()
    approval.resume_leased_until = None
    approval.save(update_fields=["answer", "error", "answered_at", "resume_leased_until"])
    if staff_interrupts and not other_interrupts:
        # The run paused for staff again: the call keeps waiting, on a new approval.
        for interrupt in staff_interrupts:
            approval_request_create(
                call_id=approval.call_id,
                thread_id=approval.thread_id,
                graph=approval.graph,
                interrupt=interrupt,
                agent_message=model_text(values),
            )
        handover.keep_waiting(approval.call_id, until=timezone.now() + settings.APPROVAL_TTL)
        return
    # The answer and drafts are copied here by now: the gateway may remove the call with its thread.
    handover.finish(approval.call_id, values=values, error=error)


def _archive_drafts(approval: ApprovalRequest, drafts: list[dict[str, Any]]) -> None:
    # contact_drafts accumulates over the thread's life: archive only the ones no earlier
    # approval on this thread has archived.
    archived = ContactMessage.objects.filter(approval__thread_id=approval.thread_id).count()
    ContactMessage.objects.bulk_create(
        ContactMessage(approval=approval, position=position, tool=draft.get("tool", ""), input=draft.get("input"))
        for position, draft in enumerate(drafts)
        if position >= archived
    )


# --- withdrawal -----------------------------------------------------------------------------


@transaction.atomic
def approval_withdraw(*, call_id: Any) -> bool:
    """The MCP client cancelled the task that waits for these approvals: the undecided ones leave
    the queue as withdrawn, and nobody can decide them any more. False, withdrawing nothing, when
    one was decided already (by staff, or expired): its resume runs on and ends the call honestly.

    The row locks make this and a decision take turns (approval_decide locks the approval too): a
    decision either lands first, and the withdrawal is refused, or finds the approval withdrawn.
    """
    open_ = list(ApprovalRequest.objects.select_for_update().filter(call_id=call_id, answered_at__isnull=True))
    if any(approval.decided_at is not None for approval in open_):
        return False
    pending = [approval.pk for approval in open_ if approval.status == ApprovalRequest.Status.PENDING]
    ApprovalRequest.objects.filter(pk__in=pending).update(status=ApprovalRequest.Status.WITHDRAWN)
    transaction.on_commit(lambda: metrics.APPROVALS.labels(ApprovalRequest.Status.WITHDRAWN).inc(len(pending)))
    logger.info("approvals %s withdrawn: the client cancelled call %s", pending, call_id)
    return True


# --- escalation -----------------------------------------------------------------------------


@transaction.atomic
def approvals_escalate() -> int:
    """Mark the approvals still pending APPROVAL_ESCALATE_AFTER after they were queued as escalated,
    and tell staff again (the escalation address and webhook) once that has committed."""
    if not settings.APPROVAL_ESCALATE_AFTER:
        return 0
    now = timezone.now()
    overdue = list(
        ApprovalRequest.objects.select_for_update(skip_locked=True)
        .filter(selectors.waiting(), escalated_at__isnull=True, created_at__lte=now - settings.APPROVAL_ESCALATE_AFTER)
        .values_list("pk", flat=True)
    )
    ApprovalRequest.objects.filter(pk__in=overdue).update(escalated_at=now)
    for approval_id in overdue:
        # robust: a mail server that is down must not undo the mark (nor tell the others twice).
        transaction.on_commit(partial(notifications.approval_escalated, approval_id=approval_id), robust=True)
    if overdue:
        logger.info("escalated %d approvals still pending after %s", len(overdue), settings.APPROVAL_ESCALATE_AFTER)
    return len(overdue)


# --- expiry ---------------------------------------------------------------------------------


EXPIRED_NOTE = "Nobody decided in time; the request expired."


@transaction.atomic
def approvals_expire() -> int:
    """Decline, fail-closed, the approvals nobody decided within APPROVAL_TTL.

    Each is recorded as `expired` (not as a staff rejection) and its thread is resumed with the
    decline, so the agent ends honestly ("declined") and the call finishes and is cleaned up.
    """
    now = timezone.now()
    overdue = dict(
        ApprovalRequest.objects.select_for_update(skip_locked=True)
        .filter(status=ApprovalRequest.Status.PENDING, expires_at__lte=now)
        .values_list("pk", "call_id")
    )
    if not overdue:
        return 0
    ApprovalRequest.objects.filter(pk__in=overdue).update(
        status=ApprovalRequest.Status.EXPIRED, note=EXPIRED_NOTE, decided_via=DecidedVia.EXPIRED, decided_at=now
    )
    for approval_id, call_id in overdue.items():
        handover.resuming(call_id, status_message=RESUMING[ApprovalRequest.Status.EXPIRED])
        _enqueue_resume_on_commit(str(approval_id))
    transaction.on_commit(lambda: metrics.APPROVALS.labels(ApprovalRequest.Status.EXPIRED).inc(len(overdue)))
    logger.info("expired %d approvals nobody decided; resuming their agents with a decline", len(overdue))
    return len(overdue)


def approval_resumes_nudge(*, limit: int = 1000) -> int:
    """Enqueue again the resumes of decided approvals that have no answer and that no worker holds.

    A decision is committed before its resume is enqueued, so a broker that is down at that moment
    leaves a decided approval whose call waits for ever; so does a worker that died mid-resume.
    RESUME_STALLED_AFTER leaves alone a resume that is only queued. A second copy of a queued resume
    is harmless: the lease lets one run.
    """
    now = timezone.now()
    stalled = ApprovalRequest.objects.filter(
        Q(resume_leased_until__lte=now)
        | Q(resume_leased_until__isnull=True, decided_at__lte=now - RESUME_STALLED_AFTER),
        decided_at__isnull=False,
        answered_at__isnull=True,
    ).values_list("pk", flat=True)[:limit]
    count = 0
    for approval_id in stalled:
        logger.warning("the resume of approval %s looks lost; enqueueing it again", approval_id)
        work.enqueue(RESUME_APPROVAL, str(approval_id))
        count += 1
    return count


def approval_resumes_take_over() -> int:
    """For a process that runs every resume itself (the embedded default), as it starts: no resume
    can be running yet, so a decided approval without an answer was left by a process stopped
    mid-resume or before the resume's turn. Its lease ends now and it is enqueued again, so it goes
    on from the thread's checkpoint instead of waiting out RUN_LEASE_SECONDS for
    approval_resumes_nudge."""
    now = timezone.now()
    unanswered = ApprovalRequest.objects.filter(decided_at__isnull=False, answered_at__isnull=True)
    unanswered.filter(resume_leased_until__gt=now).update(resume_leased_until=now)
    approval_ids = list(unanswered.values_list("pk", flat=True))
    for approval_id in approval_ids:
        work.enqueue(RESUME_APPROVAL, str(approval_id))
    return len(approval_ids)
