"""An approval's life around the decision, each change in one transaction: queued when a run pauses
on a staff_approval interrupt, withdrawn when its MCP client cancels, escalated when nobody decides
it in time, expired (declined) past its deadline. The decision itself is decisions.py's.

    run pauses on a staff_approval interrupt ──► approval_request_create (worker, with the round)
    the MCP client cancels the task waiting for it ──► approval_withdraw (through the hand-over point)
    pending too long ──► approvals_escalate (beat's "escalate-approvals")
    nobody decides in time ──► approvals_expire (Celery beat's "sweep-approvals") ──after commit──►
        resume_approval task, with the decline

The gateway's call is reached only through its hand-over point (mcp_gateway.handover).
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

from graph_runtime import work
from mcp_gateway import handover

from . import audit, digests, metrics, notifications, selectors
from .interrupts import STAFF_APPROVAL
from .models import MAX_APPROVALS, ApprovalPolicy, ApprovalRequest, DecidedVia

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


def enqueue_resume_on_commit(approval_id: str) -> None:
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
        enqueue_resume_on_commit(str(approval_id))
    for approval_id in overdue:
        audit.record(audit.EXPIRED, approval=approval_id)
    transaction.on_commit(lambda: metrics.APPROVALS.labels(ApprovalRequest.Status.EXPIRED).inc(len(overdue)))
    logger.info("expired %d approvals nobody decided; resuming their agents with a decline", len(overdue))
    return len(overdue)
