"""Evidence for an auditor: what was decided on each approval, by whom, how they proved it was
them, what ran, and whether the audit chain that records it holds.

For one approval or the approvals requested in a period, `evidence()` gathers, from the approval's
row, its sign-offs and its events of the audit chain:

- the exact action (the tool calls, the graph, the caller, the policy's id and version) and its
  SHA-256 digest, and the policy by name, id, version, and the approvals and step-up it required;
- each approver: every sign-off (M of N) and the final decision, with the time, the channel (admin,
  API, Slack, e-mail), the delegation (on whose behalf) and the note or the changes requested,
  and the proof of presence: how the channel authenticated them and the step-up they gave (the
  `stepped_up` event: password or TOTP, with this decision or earlier in the same login; or a
  passkey, with the credential's name and id and its assertion verified again now);
- staff's edit, the agent's original call and its revisions (the approvals linked by revision_of);
- what ran: the approved digest, the calls as run, whether the resume ran them or refused, and the
  run's answer or error;
- the audit chain's verification (audit.verify, against the head row and, when given, a head
  recorded elsewhere), and each of the approval's events with its hashes and whether it lies
  within the verified part of the chain.

The doors (the admin's evidence pages, as JSON and as a printable page) only choose the approvals.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from . import audit, passkeys
from .models import ApprovalRequest, AuditEvent, AuditHead, DecidedVia, PasskeyProof

# The most approvals one export of a period holds: a bigger period is exported in parts.
MAX_APPROVALS = 1000

# How each door knows who is there, before any step-up.
AUTHENTICATED_BY: dict[str, str] = {
    DecidedVia.ADMIN: "the Django admin's login (session)",
    DecidedVia.API: "a staff API token",
    DecidedVia.SLACK: "a request signed with the Slack app's signing secret, from the Slack user linked to them",
    DecidedVia.EMAIL: "a signed single-use e-mail link, confirmed in the Django admin's login (session)",
}


def for_period(since: datetime | None, until: datetime | None) -> list[ApprovalRequest]:
    """The approvals requested in [since, until), oldest first, at most MAX_APPROVALS."""
    approvals = ApprovalRequest.objects.order_by("created_at")
    if since is not None:
        approvals = approvals.filter(created_at__gte=since)
    if until is not None:
        approvals = approvals.filter(created_at__lt=until)
    return list(approvals.prefetch_related("signoffs")[:MAX_APPROVALS])


def evidence(approvals: Iterable[ApprovalRequest], *, expected_head: audit.Head | None = None) -> dict[str, Any]:
    """The evidence for `approvals`, as plain JSON values."""
    approvals = list(approvals)
    checked, broken = audit.verify(expected_head)
    head = AuditHead.objects.filter(pk=1).first()
    events: dict[str, list[AuditEvent]] = {}
    ids = [approval.pk for approval in approvals]
    for event in AuditEvent.objects.filter(approval_id__in=ids).order_by("seq"):
        events.setdefault(str(event.approval_id), []).append(event)
    users = {event.actor for bunch in events.values() for event in bunch if event.actor}
    # A step-up given on the step-up page before deciding is an event of no approval.
    session_step_ups = list(AuditEvent.objects.filter(kind=audit.STEPPED_UP, approval_id=None, actor__in=users))
    return {
        "generated_at": timezone.now().isoformat(),
        "audit_chain": {
            "holds": broken is None,
            "events_checked": checked,
            "broken": str(broken) if broken else None,
            "head": {"seq": head.seq, "hash": head.hash} if head else {"seq": 0, "hash": audit.GENESIS},
            "verified_against": (
                {"seq": expected_head.seq, "hash": expected_head.hash, "recorded": "elsewhere"}
                if expected_head
                else {
                    "seq": head.seq if head else 0,
                    "hash": head.hash if head else audit.GENESIS,
                    "recorded": "the head row",
                }
            ),
        },
        "approvals": [
            _record(approval, events.get(str(approval.pk), []), session_step_ups, broken=broken)
            for approval in approvals
        ],
    }


def _record(
    approval: ApprovalRequest, events: list[AuditEvent], session_step_ups: list[AuditEvent], *, broken: Any
) -> dict[str, Any]:
    step_ups = [event for event in events if event.kind == audit.STEPPED_UP] + session_step_ups
    signoffs = sorted(approval.signoffs.all(), key=lambda signoff: signoff.created_at)
    approvers = [
        {
            "kind": "sign-off",
            "who": signoff.username,
            "on_behalf_of": signoff.on_behalf_of_username or None,
            "channel": signoff.via,
            "at": signoff.created_at.isoformat(),
            "note": signoff.note,
            "proof_of_presence": _proof(signoff.username, signoff.via, signoff.created_at, approval, step_ups),
        }
        for signoff in signoffs
    ]
    decision = None
    if approval.decided_at is not None:
        decision = {
            "status": approval.status,
            "who": approval.decided_by_username or None,
            "on_behalf_of": approval.decided_on_behalf_of_username or None,
            "channel": approval.decided_via,
            "at": approval.decided_at.isoformat(),
            "note": approval.note,
            "changes_requested": approval.note if approval.status == ApprovalRequest.Status.CHANGES_REQUESTED else None,
            "proof_of_presence": _proof(
                approval.decided_by_username, approval.decided_via, approval.decided_at, approval, step_ups
            ),
        }
    kinds = {event.kind for event in events}
    refused = next((event.data.get("reason") for event in events if event.kind == audit.REFUSED), None)
    revised_by = ApprovalRequest.objects.filter(revision_of=approval).only("pk", "tool_calls").first()
    return {
        "approval": str(approval.pk),
        "status": approval.status,
        "requested_at": approval.created_at.isoformat(),
        "expires_at": approval.expires_at.isoformat(),
        "thread_id": approval.thread_id,
        "action": approval.action(),
        "digest": approval.digest,
        "policy": {
            "name": approval.policy_name or None,
            "id": approval.policy_key,
            "version": approval.policy_version,
            "approvals_required": approval.approvals_required,
            "requires_step_up": approval.policy.requires_step_up if approval.policy is not None else None,
            "requires_passkey": approval.policy.requires_passkey if approval.policy is not None else None,
        },
        "visitor_message": approval.visitor_message,
        "agent_message": approval.agent_message,
        "calls": {
            "as_requested": approval.tool_calls,
            "edited_by_staff": approval.edited_tool_calls,
            "revises": (
                {"approval": str(approval.revision_of_id), "tool_calls": approval.revision_of.tool_calls}
                if approval.revision_of is not None
                else None
            ),
            "revised_by": (
                {"approval": str(revised_by.pk), "tool_calls": revised_by.tool_calls}
                if revised_by is not None
                else None
            ),
        },
        "approvers": approvers,
        "decision": decision,
        "ran": {
            "approved_digest": approval.approved_digest or None,
            "tool_calls": approval.approved_tool_calls if approval.approved_digest else None,
            "resumed": audit.RESUMED in kinds,
            "refused": refused,
            "answer": approval.answer or None,
            "error": approval.error or None,
            "answered_at": approval.answered_at.isoformat() if approval.answered_at else None,
        },
        "audit_events": [
            {
                **audit.body(event),
                "prev_hash": event.prev_hash,
                "hash": event.hash,
                "verified": broken is None or event.seq < broken.seq,
            }
            for event in events
        ],
    }


def _proof(who: str, via: str, at: datetime, approval: ApprovalRequest, step_ups: list[AuditEvent]) -> dict[str, Any]:
    """How `who` proved it was them when deciding through `via` at `at`: the door's own
    authentication, and the step-up that counted for this decision (recorded with it, or given on
    the step-up page within STEP_UP_MINUTES before), if any."""
    if not who:
        return {"authenticated_by": "the shared ADMIN_TOKEN (names nobody)", "step_up": None}
    window = timedelta(minutes=settings.STEP_UP_MINUTES)
    counted = [
        event
        for event in step_ups
        if event.actor == who and event.at <= at and (event.approval_id == approval.pk or at - event.at < window)
    ]
    step_up = max(counted, key=lambda event: event.seq, default=None)
    return {
        "authenticated_by": AUTHENTICATED_BY.get(via, via),
        "step_up": (
            {
                "method": step_up.data.get("method"),
                "at": audit.body(step_up)["at"],
                "with_this_decision": step_up.approval_id == approval.pk,
                "audit_event": step_up.seq,
                **({"passkey": _passkey(step_up)} if step_up.data.get("method") == passkeys.REQUIRED else {}),
            }
            if step_up is not None
            else None
        ),
    }


def _passkey(event: AuditEvent) -> dict[str, Any]:
    """The passkey that confirmed a decision, and its stored assertion verified again now."""
    recorded = event.data.get("passkey") or {}
    kept = recorded.get("proof")
    proof = PasskeyProof.objects.filter(pk=kept).first() if isinstance(kept, int) else None
    failed = "its stored assertion is missing." if proof is None else passkeys.reverify(proof, event)
    return {
        "credential_name": recorded.get("credential_name"),
        "credential_id": recorded.get("credential_id"),
        "decision": recorded.get("decision"),
        "nonce": recorded.get("nonce"),
        "challenge": recorded.get("challenge"),
        "verified": not failed,
        "failure": failed or None,
    }
