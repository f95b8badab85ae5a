"""The staff decision: one service, and every rule of it, under the approval's row lock.

    staff decide (admin, REST API, Slack, e-mail link) ──► approval_decide ──after commit──► resume_approval
        (run in the worker by resumes.py: the thread runs on, the answer is recorded)
    staff request changes (admin, REST API) ──► approval_request_changes ──after commit──► resume_approval
        (the agent revises its call; a new approval names the one it revises: revision_of)

The doors only parse what they received (the decision, the decider, a step-up proof) and answer a
refusal (refusals.py) with its one status. Everything a decision must satisfy is checked here, in
this order, after the row is locked, so however many decisions arrive at once exactly one wins and
the others see it taken: the approval's state (pending, within its deadline, its thread's
checkpoint paused on it, its policy unchanged or seen again), who decides (deciders.py: the
permission, the approver group, a delegate's period, no self-approval, nobody twice in M of N),
their step-up when the policy requires one (step_up.check), and what they sent (edited arguments,
the changes asked for). Only then is anything recorded.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import Any

import jsonschema
from django.db import transaction
from django.utils import timezone

from graph_runtime import runner
from graph_runtime.registry import get_graph
from mcp_gateway import handover

from . import audit, deciders, digests, lifecycle, metrics, step_up
from .lifecycle import is_staff_approval
from .models import ApprovalRequest, DecidedVia, Signoff
from .refusals import AlreadyDecided, ChangesNotGiven, InvalidEdit, NothingPending, PolicyChanged, StepUpProofInvalid
from .step_up import StepUpProof

logger = logging.getLogger(__name__)


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
        raise AlreadyDecided(latest)  # a second decision, on a thread that ran on after the first
    raise NothingPending


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
    step_up: StepUpProof | None = None,
) -> ApprovalRequest:
    """Record a staff decision by `user` (None: the REST API's admin token) through the door `via`,
    and enqueue the resume. Never waits for the model. `edited_arguments`: with an approval, the
    arguments each tool call runs with instead of the agent's (one JSON object per call, in order).
    `on_behalf_of`: the staff member whose delegate `user` is. `seen_policy_version`: the version of
    the approval's policy the decider confirms having seen, once it changed since the request.
    `step_up`: the proof of who decides that the door received, for a policy that requires one.

    Raises a Refusal (refusals.py), in the order they are checked: AlreadyDecided, NothingPending,
    PolicyChanged; NotAllowed, SameApprover; StepUpRequired, StepUpProofInvalid; InvalidEdit.

    A request that needs several approvals (approvals_required, M of N) stays pending until the
    last: each approval is a Signoff of its own, and only the last one decides and resumes the run.
    A rejection by anyone ends it at once.
    """

    def decide() -> ApprovalRequest:
        locked = _locked_for_decision(approval, seen_policy_version=seen_policy_version)
        acting = _allowed(
            locked,
            user=user,
            on_behalf_of=on_behalf_of,
            approving=approved,
            proof=step_up,
            via=via,
            decision="approve" if approved else "reject",
            edited_digest=edit_digest(locked, edited_arguments) if approved else "",
        )
        if approved and locked.approvals_required > 1:
            return _approve_once_more(locked, note=note, via=via, acting=acting, edited_arguments=edited_arguments)
        # A rejection runs nothing; it keeps, for the audit, what a first approver approved to run.
        edited = locked.edited_tool_calls
        if approved and edited_arguments is not None:
            edited = _checked_edits(locked, edited_arguments)
        if approved:
            _sign_off(locked, acting, via=via, note=note)
            if edited is not None and edited != locked.edited_tool_calls:
                _record_edit(locked, edited, user=acting.user, via=via)
        _record_decision(
            locked,
            status=_approved_or_rejected(approved),
            note=note,
            via=via,
            acting=acting,
            edited=edited,
            seen_policy=seen_policy_version,
        )
        return locked

    return _in_one_transaction(decide)


def approval_request_changes(
    *,
    approval: ApprovalRequest,
    changes: str,
    via: DecidedVia,
    user: Any = None,
    on_behalf_of: Any = None,
    seen_policy_version: int | None = None,
    step_up: StepUpProof | None = None,
) -> ApprovalRequest:
    """Send the agent back with what must change: nothing runs, and the run resumes with
    {"approved": false, "changes_requested": true, "note": changes}. An agent that revises its call
    and asks again pauses on a new approval linked to this one (resumes.py). Ends a request that
    needs several approvals, as a rejection does; the same rules and refusals as approval_decide,
    and ChangesNotGiven when `changes` says nothing."""

    def send_back() -> ApprovalRequest:
        locked = _locked_for_decision(approval, seen_policy_version=seen_policy_version)
        acting = _allowed(
            locked, user=user, on_behalf_of=on_behalf_of, approving=False, proof=step_up, via=via,
            decision="request_changes",
        )  # fmt: skip
        if not changes.strip():
            raise ChangesNotGiven("Say what must change: the agent revises its call from your note.")
        _record_decision(
            locked,
            status=ApprovalRequest.Status.CHANGES_REQUESTED,
            note=changes,
            via=via,
            acting=acting,
            edited=locked.edited_tool_calls,
            seen_policy=seen_policy_version,
        )
        return locked

    return _in_one_transaction(send_back)


def _in_one_transaction(decide: Callable[[], ApprovalRequest]) -> ApprovalRequest:
    """`decide` in one transaction. A wrong TOTP code is refused only once that transaction has
    committed: nothing was decided, but django-otp's back-off (the device's count of wrong codes)
    must outlive the refusal, or guessing would cost nothing."""
    with transaction.atomic():
        try:
            return decide()
        except StepUpProofInvalid as refused:
            wrong = refused
    raise wrong


def _locked_for_decision(approval: ApprovalRequest, *, seen_policy_version: int | None) -> ApprovalRequest:
    """The approval, locked, once it is known to be open to a decision: the row lock makes decisions
    on one approval take turns, so the second one to get here sees the first one's status and is
    refused, whatever else it brings, and the thread is resumed exactly once."""
    approval = ApprovalRequest.objects.select_for_update().get(pk=approval.pk)
    if not approval.is_decidable:
        raise AlreadyDecided(approval)
    # Checked here, so every way in (the admin holds a row, the API a thread) is held to it.
    if approval.interrupt_id not in paused_on(graph=approval.graph, thread_id=approval.thread_id):
        raise NothingPending
    if approval.policy_changed and seen_policy_version != approval.current_policy_version:
        raise PolicyChanged(approval)
    return approval


def _allowed(
    approval: ApprovalRequest,
    *,
    user: Any,
    on_behalf_of: Any,
    approving: bool,
    proof: StepUpProof | None,
    via: str,
    decision: str,
    edited_digest: str = "",
) -> deciders.Decider:
    """Who decides, once they may (deciders.py) and have stepped up when the policy requires it:
    their proof is checked, and a code or a passkey's nonce used up, only for a decision that could
    otherwise be taken. A passkey's assertion must be of `decision`, with `edited_digest`."""
    acting = deciders.decider(approval, user=user, on_behalf_of=on_behalf_of, approving=approving)
    if approving and approval.approvals_required > 1:
        deciders.check_another_approver(approval, acting)
    step_up.check(approval, user=user, proof=proof, via=via, decision=decision, edited_digest=edited_digest)
    return acting


def edit_digest(approval: ApprovalRequest, edited_arguments: list[Any] | None) -> str:
    """The digest of the action as `edited_arguments` would run it, "" when they change nothing:
    what a passkey's assertion of an approval is bound to besides the approval's own digest.
    Arguments that are no edit at all are bound as they came; the decision refuses them after."""
    if edited_arguments is None:
        return ""
    try:
        edited = _checked_edits(approval, edited_arguments)
        return digests.sha256(approval.action(edited)) if edited is not None else ""
    except (InvalidEdit, ValueError, TypeError):
        return hashlib.sha256(repr(edited_arguments).encode()).hexdigest()


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
    """One approval of a request that needs several (M of N), by different staff (checked by
    _allowed), under the row lock approval_decide holds. Each is its own Signoff; the last one
    decides."""
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
    handover.resuming(approval.call_id, status_message=lifecycle.RESUMING[approval.status])
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
    lifecycle.enqueue_resume_on_commit(str(approval.pk))
    transaction.on_commit(lambda: metrics.decided(approval))
    logger.info("approval %s %s through %s by %s", approval.pk, approval.status, via, user or "the admin token")
