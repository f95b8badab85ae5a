"""Every state change of an approval on the staff side, each in one transaction.

    run pauses on a staff_approval interrupt ──► approval_request_create (worker, with the round)
    staff decide (admin or REST API) ──► approval_decide ──after commit──► resume_approval task
        (run in the worker by resumes.py: the thread runs on, the answer is recorded)
    staff request changes ──► approval_request_changes ──after commit──► resume_approval task
        (the agent revises its call; a new approval names the one it revises: revision_of)
    nobody decides in time ──► approvals_expire (Celery beat's "sweep-approvals")
    pending too long ──► approvals_escalate (beat's "escalate-approvals")
    the MCP client cancels the task waiting for it ──► approval_withdraw (through the hand-over point)

The gateway's call is reached only through its hand-over point (mcp_gateway.handover): its task
says the run is resuming once a decision is taken, and the resume's trace links to the call's start.

The decision is claimed under a row lock, so however many decisions arrive at once, exactly one
wins; the rest get ApprovalConflict.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

import jsonschema
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from langgraph.types import Interrupt

from graph_runtime import runner, work
from graph_runtime.registry import get_graph
from mcp_gateway import handover

from . import audit, deciders, digests, metrics, notifications, selectors

# The refusals of who may decide, raised by approval_decide for the admin and the API to answer.
from .deciders import NotAllowed as NotAllowed
from .deciders import SameApprover as SameApprover
from .interrupts import STAFF_APPROVAL
from .models import MAX_APPROVALS, ApprovalPolicy, ApprovalRequest, DecidedVia, Signoff

logger = logging.getLogger(__name__)

# A task's statusMessage from the decision until the resumed run ends (handover.resuming).
RESUMING: dict[str, str] = {
    ApprovalRequest.Status.APPROVED: "Staff approved; the agent is resuming",
    ApprovalRequest.Status.REJECTED: "Staff rejected the action; the agent is resuming",
    ApprovalRequest.Status.CHANGES_REQUESTED: "Staff requested changes; the agent is revising its request",
    ApprovalRequest.Status.EXPIRED: "Nobody decided in time; the agent is resuming with a decline",
}
# The Celery task that resumes a decided approval (tasks.py), enqueued by name: see work.enqueue.
RESUME_APPROVAL = "approvals.tasks.resume_approval"


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
    *,
    call_id: Any,
    thread_id: str,
    graph: str,
    interrupt: Interrupt,
    caller: str,
    agent_message: str = "",
    revision_of: ApprovalRequest | None = None,
    requested_by_id: int | None = None,
) -> ApprovalRequest:
    """Queue one staff_approval interrupt for staff, bound to its action's digest, and tell them
    once the pause is committed. `revision_of`: the approval on which staff requested the changes
    this call was revised for. `requested_by_id`: the MCP caller's user, who may not approve it."""
    value = interrupt.value
    policy_ref = value.get("policy") if isinstance(value.get("policy"), dict) else {}
    policy_id, policy_version = bound_policy(value)
    policy = ApprovalPolicy.objects.filter(pk=policy_id).first() if policy_id is not None else None
    groups = policy.approver_group_ids() if policy is not None else []
    required = value.get("approvals_required")
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
            # its name for good. M of N from 1 to MAX_APPROVALS; anything else is one approval.
            "policy": policy,
            "policy_name": str(policy_ref.get("name") or "")[:120],
            "policy_key": policy_id,
            "policy_version": policy_version,
            "caller": caller[:255],
            "approvals_required": required
            if isinstance(required, int) and not isinstance(required, bool) and 1 <= required <= MAX_APPROVALS
            else 1,
            "argument_schemas": _schemas(value),
            "revision_of": revision_of,
            # The policy's first approver group decides; escalation hands it to the next.
            "approver_group_id": groups[0] if groups else None,
            "requested_by": get_user_model().objects.filter(pk=requested_by_id).first() if requested_by_id else None,
        },
    )
    if created:
        approval.digest = digests.sha256(approval.action())
        approval.save(update_fields=["digest"])
        audit.record(audit.REQUESTED, approval=approval, digest=approval.digest, **approval.action())
        # robust: a mail server that is down must not undo or fail the pause.
        transaction.on_commit(lambda: notifications.approval_requested(approval_id=approval.pk), robust=True)
    return approval


def bound_policy(value: dict[str, Any]) -> tuple[int | None, int | None]:
    """The id and version of the rule a staff_approval interrupt names, as its digest covers them."""
    policy = value.get("policy")
    if not isinstance(policy, dict):
        return None, None
    policy_id = policy.get("id") if _is_key(policy.get("id")) else None
    version = policy.get("version") if policy_id is not None and _is_key(policy.get("version")) else None
    return policy_id, version


def requested_digest(*, graph: str, caller: str, value: Any) -> str:
    """The digest of the action a staff_approval interrupt's value asks for."""
    value = value if isinstance(value, dict) else {}
    policy_id, version = bound_policy(value)
    calls = list(value.get("tool_calls") or [])
    return digests.action_digest(
        graph=graph, tool_calls=calls, caller=caller, policy_id=policy_id, policy_version=version
    )


def _is_key(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**31


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

    Whether anything is pending comes from the checkpoint alone, never from the rows: a thread
    that is not actually paused cannot be approved into running something
    (docs/rules.md, "The checkpoint decides what is pending").
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


class PolicyChanged(Exception):
    """The rule that required staff was edited or deleted while the call waited, and the decider
    has not confirmed having seen it as it is now (seen_policy_version)."""

    def __init__(self, approval: ApprovalRequest):
        self.approval = approval
        now = approval.current_policy_version
        if now == 0:
            change = f"The policy “{approval.policy_name}” was deleted since this call was requested"
            confirm = "confirm you have seen that (policy version 0)"
        else:
            change = (
                f"The policy “{approval.policy_name}” changed since this call was requested "
                f"(version {approval.policy_version}, now {now})"
            )
            confirm = f"confirm you have seen version {now}"
        super().__init__(f"{change}: look at it again, then {confirm} and decide.")


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
    on_behalf_of: Any = None,
    seen_policy_version: int | None = None,
) -> ApprovalRequest:
    """Record a staff decision (through the admin, by `user`, or the REST API) and enqueue the
    resume. Never waits for the model. `edited_arguments`: with an approval, the arguments each
    tool call runs with instead of the agent's (one JSON object per call, in order).

    Raises ApprovalConflict when it was decided already or has expired (even if the beat sweep has
    not marked it yet), NothingPending when its thread's checkpoint is not paused on it,
    InvalidEdit for edited arguments that do not fit the calls, SameApprover when a request that
    needs several approvals is approved twice by the same person, PolicyChanged when its rule
    changed since the request unless `seen_policy_version` is the rule's version now, and
    NotAllowed when `user` may not take it (deciders.py: the approver group, a delegate outside
    their period, self-approval). `on_behalf_of`: the staff member whose delegate `user` is.

    A request that needs several approvals (approvals_required, M of N) stays pending until the
    last: each approval is a Signoff of its own, and only the last one decides and resumes the run.
    A rejection by anyone ends it at once.
    """
    approval = _locked_for_decision(approval)
    if approval.policy_changed and seen_policy_version != approval.current_policy_version:
        raise PolicyChanged(approval)
    acting = deciders.decider(approval, user=user, on_behalf_of=on_behalf_of, approving=approved)
    if approved and approval.approvals_required > 1:
        return _approve_once_more(approval, note=note, via=via, acting=acting, edited_arguments=edited_arguments)
    # A rejection runs nothing; it keeps, for the audit, what a first approver approved to run.
    edited = approval.edited_tool_calls
    if approved and edited_arguments is not None:
        edited = _checked_edits(approval, edited_arguments)
    if approved:
        _sign_off(approval, acting, via=via, note=note)
        if edited is not None and edited != approval.edited_tool_calls:
            _record_edit(approval, edited, user=acting.user, via=via)
    _record_decision(
        approval,
        status=_approved_or_rejected(approved),
        note=note,
        via=via,
        acting=acting,
        edited=edited,
        seen_policy=seen_policy_version,
    )
    return approval


def _sign_off(approval: ApprovalRequest, acting: deciders.Decider, *, via: DecidedVia, note: str | None) -> None:
    behalf = acting.principal if acting.for_someone_else else None
    Signoff.objects.create(
        approval=approval,
        user=acting.user,
        username=_name(acting.user),
        on_behalf_of=behalf,
        on_behalf_of_username=_name(behalf),
        via=via,
        note=note or "",
    )


def _locked_for_decision(approval: ApprovalRequest) -> ApprovalRequest:
    """The approval, locked, once it is known to be open to a decision: the row lock makes decisions
    on one approval take turns, so the second one to get here sees the first one's status and is
    refused, and the thread is resumed exactly once."""
    approval = ApprovalRequest.objects.select_for_update().get(pk=approval.pk)
    if not approval.is_decidable:
        raise ApprovalConflict(approval)
    # Checked here, so every way in (the admin holds a row, the API a thread) is held to it.
    if approval.interrupt_id not in paused_on(graph=approval.graph, thread_id=approval.thread_id):
        raise NothingPending
    return approval


class ChangesNotGiven(ValueError):
    """A request for changes that does not say what must change."""


@transaction.atomic
def approval_request_changes(
    *, approval: ApprovalRequest, changes: str, via: DecidedVia, user: Any = None, on_behalf_of: Any = None
) -> ApprovalRequest:
    """Send the agent back with what must change: nothing runs, and the run resumes with
    {"approved": false, "changes_requested": true, "note": changes}. An agent that revises its call
    and asks again pauses on a new approval linked to this one (resumes.py). Ends a request that
    needs several approvals, as a rejection does; the same errors as approval_decide."""
    if not changes.strip():
        raise ChangesNotGiven("Say what must change: the agent revises its call from your note.")
    approval = _locked_for_decision(approval)
    acting = deciders.decider(approval, user=user, on_behalf_of=on_behalf_of, approving=False)
    _record_decision(
        approval,
        status=ApprovalRequest.Status.CHANGES_REQUESTED,
        note=changes,
        via=via,
        acting=acting,
        edited=approval.edited_tool_calls,
    )
    return approval


def _name(user: Any) -> str:
    return user.get_username() if user is not None else ""


def _approve_once_more(
    approval: ApprovalRequest,
    *,
    note: str | None,
    via: DecidedVia,
    acting: deciders.Decider,
    edited_arguments: list[Any] | None,
) -> ApprovalRequest:
    """One approval of a request that needs several (M of N), by different staff, under the row
    lock approval_decide holds. Each is its own Signoff; the last one decides."""
    deciders.check_another_approver(approval, acting)
    given = list(approval.signoffs.all())
    edited = None
    if edited_arguments is not None:
        edited = _checked_edits(approval, edited_arguments)
        if given and _as_run(edited or approval.tool_calls) != _as_run(approval.approved_tool_calls):
            # Later approvers approve what the first one did; changing it needs a new request.
            raise InvalidEdit("The arguments the first approver approved cannot be changed: approve them or reject.")
    _sign_off(approval, acting, via=via, note=note)
    if not given and edited is not None:
        _record_edit(approval, edited, user=acting.user, via=via)
    if len(given) + 1 < approval.approvals_required:
        if not given:
            approval.edited_tool_calls = edited
            approval.save(update_fields=["edited_tool_calls"])
        audit.record(
            audit.SIGNED_OFF,
            approval=approval,
            actor=acting.user,
            on_behalf_of=_name(acting.principal) if acting.for_someone_else else None,
            via=via,
            digest=digests.sha256(approval.action(edited or approval.tool_calls)),
            progress=approval.progress,
            note=note or "",
        )
        logger.info("approval %s approved %s by %s", approval.pk, approval.progress, acting.user)
        return approval
    # The final approval: the run goes on with the first approver's arguments and the last note given.
    last_note = note or next((signoff.note for signoff in reversed(given) if signoff.note), None)
    _record_decision(
        approval,
        status=ApprovalRequest.Status.APPROVED,
        note=last_note,
        via=via,
        acting=acting,
        edited=approval.edited_tool_calls,
    )
    return approval


def _approved_or_rejected(approved: bool) -> str:
    return ApprovalRequest.Status.APPROVED if approved else ApprovalRequest.Status.REJECTED


def _record_edit(approval: ApprovalRequest, edited: list[dict[str, Any]], *, user: Any, via: DecidedVia) -> None:
    """Staff's edited arguments are another action: their own digest, in the audit."""
    audit.record(
        audit.EDITED,
        approval=approval,
        actor=user,
        via=via,
        digest=digests.sha256(approval.action(edited)),
        requested_digest=approval.digest,
        tool_calls=edited,
    )


def _as_run(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"name": call.get("name"), "input": call.get("input")} for call in calls]


def _record_decision(
    approval: ApprovalRequest,
    *,
    status: str,
    note: str | None,
    via: DecidedVia,
    acting: deciders.Decider,
    edited: Any,
    seen_policy: int | None = None,
) -> None:
    """The final decision: recorded, bound to the digest of what is to run, and the resume
    enqueued once it has committed."""
    user = acting.user
    approval.status = status
    # Only an approval runs something: a rejection or a request for changes approves no digest.
    approved = status == ApprovalRequest.Status.APPROVED
    approval.approved_digest = digests.sha256(approval.action(edited or approval.tool_calls)) if approved else ""
    approval.note = note or ""
    approval.edited_tool_calls = edited
    approval.decided_via = via
    approval.decided_by = user
    approval.decided_by_username = _name(user)
    approval.decided_on_behalf_of_username = _name(acting.principal) if acting.for_someone_else else ""
    approval.decided_at = timezone.now()
    approval.save(
        update_fields=[
            "status",
            "note",
            "edited_tool_calls",
            "decided_via",
            "decided_by",
            "decided_by_username",
            "decided_on_behalf_of_username",
            "decided_at",
            "approved_digest",
        ]
    )
    # A task's client learns the decision was taken before the resumed run ends.
    handover.resuming(approval.call_id, status_message=RESUMING[approval.status])
    audit.record(
        # Sent back for changes is its own kind of event, not a rejection.
        audit.CHANGES_REQUESTED if status == ApprovalRequest.Status.CHANGES_REQUESTED else audit.DECIDED,
        approval=approval,
        actor=user,
        on_behalf_of=approval.decided_on_behalf_of_username or None,
        via=via,
        status=approval.status,
        digest=approval.approved_digest or None,
        note=approval.note,
        policy_version_seen=seen_policy,
    )
    _enqueue_resume_on_commit(str(approval.pk))
    transaction.on_commit(lambda: metrics.decided(approval))
    logger.info("approval %s %s through %s by %s", approval.pk, approval.status, via, user or "the admin token")


def _enqueue_resume_on_commit(approval_id: str) -> None:
    # robust: the decision is committed by then; a broker that refuses the task must not turn it
    # into an error (a retry would only get 409). resumes.approval_resumes_nudge enqueues it again.
    transaction.on_commit(lambda: work.enqueue(RESUME_APPROVAL, approval_id), robust=True)


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
    for approval_id in pending:
        audit.record(audit.WITHDRAWN, approval=approval_id)
    transaction.on_commit(lambda: metrics.APPROVALS.labels(ApprovalRequest.Status.WITHDRAWN).inc(len(pending)))
    logger.info("approvals %s withdrawn: the client cancelled call %s", pending, call_id)
    return True


# --- escalation -----------------------------------------------------------------------------


@transaction.atomic
def approvals_escalate() -> int:
    """Escalate the approvals still pending APPROVAL_ESCALATE_AFTER after they were queued, or after
    their last escalation: marked as escalated, handed to their policy's next approver group when it
    has one, and told to staff again (the escalation address and webhook) once that has committed.
    An approval whose policy has no further group is escalated once."""
    if not settings.APPROVAL_ESCALATE_AFTER:
        return 0
    now = timezone.now()
    due = now - settings.APPROVAL_ESCALATE_AFTER
    overdue = list(
        ApprovalRequest.objects.select_for_update(skip_locked=True)
        .filter(selectors.waiting())
        .filter(
            Q(escalated_at__isnull=True, created_at__lte=due)
            | Q(escalated_at__lte=due, approver_group__isnull=False, policy__isnull=False)
        )
    )
    escalated = []
    for approval in overdue:
        groups = approval.policy.approver_group_ids() if approval.policy is not None else []
        following = approval.escalation_level + 1
        if following < len(groups):
            approval.approver_group_id, approval.escalation_level = groups[following], following
        elif approval.escalated_at is not None:
            continue  # escalated once already, and there is nobody further to hand it to
        approval.escalated_at = now
        approval.save(update_fields=["escalated_at", "approver_group", "escalation_level"])
        escalated.append(approval)
    for approval in escalated:
        # Recorded last (audit.record holds the chain's head until the commit).
        group = approval.approver_group.name if approval.approver_group is not None else None
        audit.record(audit.ESCALATED, approval=approval, approver_group=group)
    for approval in escalated:
        # robust: a mail server that is down must not undo the mark (nor tell the others twice).
        transaction.on_commit(partial(notifications.approval_escalated, approval_id=approval.pk), robust=True)
    if escalated:
        logger.info("escalated %d approvals still pending after %s", len(escalated), settings.APPROVAL_ESCALATE_AFTER)
    return len(escalated)


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
    for approval_id in overdue:
        audit.record(audit.EXPIRED, approval=approval_id)
    transaction.on_commit(lambda: metrics.APPROVALS.labels(ApprovalRequest.Status.EXPIRED).inc(len(overdue)))
    logger.info("expired %d approvals nobody decided; resuming their agents with a decline", len(overdue))
    return len(overdue)
