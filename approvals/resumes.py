"""The resume of a decided approval, in the worker: run the thread on with the decision, then
record what came of it, and hand the call back to the gateway (mcp_gateway.handover): kept
waiting when the run paused for staff again, finished otherwise.

    approval_decide / approvals_expire (decisions.py, lifecycle.py) ──after commit──► resume_approval task
    resume_approval ──► approval_resume: claim the lease, run on, record the answer, archive drafts
    a resume never enqueued, or whose worker died ──► approval_resumes_nudge (beat's
        "nudge-stalled-resumes", every STALLED_CHECK_SECONDS)

The resume is claimed with the lease a round's run holds too (graph_runtime/leases.py), renewed by
the worker's heartbeat, so however many copies of it run, exactly one runs the thread on, and a
copy that arrives after its worker died takes it over from the thread's last checkpoint. A resume
that lost its lease (taken over, or run out by its process's clock) records nothing, writes no
checkpoint (runner.run's `fence`) and starts no step more.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import Q
from django.utils import timezone
from langgraph.types import Interrupt

from graph_runtime import heartbeat, leases, log_context, runner, work
from graph_runtime.registry import get_graph
from mcp_gateway import handover

from . import audit, digests
from .lifecycle import RESUME_APPROVAL, approval_request_create, is_staff_approval, model_text, requested_digest
from .models import ApprovalRequest, ContactMessage

logger = logging.getLogger(__name__)


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


def approval_resume(*, approval_id: uuid.UUID | str) -> None:
    """Run the thread on with the decision, then record what came of it. Safe to run twice, and
    twice at once: only the copy that claims the lease runs; the others return at once."""
    if heartbeat.stopping():
        # This worker is stopping: the resume goes to another one (after this process has exited).
        work.enqueue(RESUME_APPROVAL, str(approval_id), countdown=heartbeat.HAND_BACK_COUNTDOWN)
        return
    approval = claim_resume(approval_id)
    if approval is None:
        return
    lease = resume_lease(approval)
    log_context.about(
        approval_id=str(approval.pk), call_id=approval.call_id and str(approval.call_id), graph=approval.graph
    )
    # The resume's span descends from the staff decision's request; it links to the call's start.
    handover.resume_running(approval.call_id)
    try:
        with heartbeat.holding(
            f"the resume of approval {approval.pk}", renew=lease.renew, hand_back=lambda: hand_back_resume(lease)
        ):
            # Lost once a renewal fails (the heartbeat) or the lease ran out by this process's clock.
            resume_leased(approval, lease, lost=lease.lost)
    except BaseException:
        # Not the agent's failure (that is recorded as the answer) but ours, such as a lost
        # database: let the task's retry have the resume at once.
        lease.end()
        raise


def claim_resume(approval_id: uuid.UUID | str) -> ApprovalRequest | None:
    """Lease a decided, unanswered approval to this worker, or None when there is nothing to do or
    another copy holds it. The worker's heartbeat renews the lease while the resume runs
    (resume_lease); once nobody renews it (the worker died), it runs out after
    RUN_LEASE_SECONDS, and a copy enqueued by approval_resumes_nudge or redelivered by the broker
    takes over."""
    now = timezone.now()
    free = leases.free("resume_leased_until", now)
    claimable = ApprovalRequest.objects.filter(free, pk=approval_id, decided_at__isnull=False, answered_at__isnull=True)
    if not leases.take(claimable, "resume_leased_until", now):
        return None
    return ApprovalRequest.objects.get(pk=approval_id)


def resume_lease(approval: ApprovalRequest) -> leases.Held:
    """This worker's lease on a decided approval's resume, once claimed, until its answer is
    recorded. A worker whose lease another took over can neither renew it nor record the answer,
    and its run stops at its next step. Ended, it is free at once (a resume has no first attempt to
    tell apart)."""
    return leases.Held(approval, "resume_leased_until", Q(answered_at__isnull=True), remember_attempt=False)


def hand_back_resume(lease: leases.Held) -> None:
    """The worker stops with this resume still running: another worker carries it on from the
    thread's last checkpoint, at once."""
    lease.end()
    work.enqueue(RESUME_APPROVAL, str(lease.row.pk), countdown=heartbeat.HAND_BACK_COUNTDOWN)


def binding_refusal(approval: ApprovalRequest, pending: Interrupt) -> str | None:
    """Why the decision may not run what the thread would run now, or None when it may: what the
    paused run asks for must be what was requested (digest), and what staff approved must be what
    was recorded as approved (approved_digest). A rejection runs nothing, so nothing is checked."""
    if approval.status != ApprovalRequest.Status.APPROVED:
        return None
    asked = requested_digest(graph=approval.graph, caller=approval.caller, value=pending.value)
    approved = digests.sha256(approval.action(approval.approved_tool_calls))
    if asked != approval.digest or not approval.approved_digest or approved != approval.approved_digest:
        return (
            f"What would run (digest {asked[:12]}…, approved as {approved[:12]}…) differs from what staff "
            f"approved (digest {approval.approved_digest[:12] or 'none'}…): nothing ran, and a new approval is "
            "required."
        )
    return None


def resume_leased(approval: ApprovalRequest, lease: leases.Held, *, lost: Callable[[], bool]) -> None:
    registered = get_graph(approval.graph)
    refusal = None
    try:
        if registered is None:
            raise LookupError(f"the graph {approval.graph!r} is no longer registered")
        # One read of the thread decides which of the three cases this is.
        snapshot = runner.state(registered, approval.thread_id)
        pending = next((i for i in snapshot.interrupts if i.id == approval.interrupt_id), None)
        if pending is not None:
            # Fail closed: an approval whose digest does not match what would run reaches the run
            # as a decline, so the action never runs and the agent ends honestly.
            refusal = binding_refusal(approval, pending)
            decision = approval.decision if refusal is None else {"approved": False, "note": refusal}
            with lease.lock, transaction.atomic():
                if not _still_held(lease):
                    raise leases.LeaseLost(f"the resume of approval {approval.pk}")
                if refusal is None:
                    audit.record(audit.RESUMED, approval=approval, digest=approval.approved_digest or None)
                else:
                    audit.record(audit.REFUSED, approval=approval, reason=refusal)
            run = runner.run(
                registered,
                approval.thread_id,
                resume={approval.interrupt_id: decision},
                stop=lost,
                fence=lease.fenced,
            )
            values, interrupts = run.values, run.interrupts
        elif runner.stopped_mid_run(snapshot):
            # A redelivered task whose first delivery died in the middle of the resumed run (after
            # the decision was saved, before the run ended): it goes on from the last checkpoint,
            # so the nodes that finished (the approved tool) do not run again, and the answer is
            # the run's end, not the state it had reached.
            run = runner.run(registered, approval.thread_id, carry_on=True, stop=lost, fence=lease.fenced)
            values, interrupts = run.values, run.interrupts
        else:
            # A redelivered task whose first delivery resumed the thread but died before recording
            # it: the checkpoint holds the outcome, and resuming again would answer nothing.
            values, interrupts = dict(snapshot.values), ()
            if not values:
                raise LookupError("the paused thread no longer exists")
    except leases.LeaseLost:
        _lost(approval)  # a record or a checkpoint write refused
        return
    except (*runner.INFRASTRUCTURE_ERRORS, DatabaseError):
        raise  # retried by the task (RETRY_ON_INFRASTRUCTURE); approval_resume gives up its lease
    except Exception as exc:  # the agent's own failure is recorded, so nobody waits for ever
        logger.exception("resuming approval %s failed", approval.pk)
        _record_outcome(lease, values={}, interrupts=(), error=f"The resumed run failed: {exc}")
        return
    if lost():
        _lost(approval)
        return
    _record_outcome(lease, values=values, interrupts=interrupts, error=refusal or "")


def _lost(approval: ApprovalRequest) -> None:
    # Another worker took the resume over (or may, its lease having run out) while this one could
    # not renew it: that one records the answer; this run stopped and leaves it.
    logger.warning("the resume of approval %s lost its lease; this run stops and records nothing", approval.pk)


def _record_outcome(
    lease: leases.Held, *, values: dict[str, Any], interrupts: Iterable[Interrupt], error: str = ""
) -> None:
    with lease.lock, transaction.atomic():
        if lease.lost():
            return  # run out by this process's clock: another worker may hold the resume by now
        approval = ApprovalRequest.objects.select_for_update().get(pk=lease.row.pk)
        if approval.answered_at is not None or approval.resume_leased_until != lease.until:
            return  # recorded by an earlier delivery, or the resume is another worker's now
        _record_answer(approval, values=values, interrupts=interrupts, error=error)


def _still_held(lease: leases.Held) -> bool:
    """In the caller's transaction: whether this worker holds the resume, its row locked until the
    transaction ends (a takeover waits for what the transaction records)."""
    return (
        not lease.lost()
        and ApprovalRequest.objects.select_for_update(no_key=True)
        .filter(pk=lease.row.pk, answered_at__isnull=True, resume_leased_until=lease.until)
        .exists()
    )


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
    paused_again = bool(staff_interrupts and not other_interrupts)
    if paused_again:
        # The run paused for staff again: the call keeps waiting, on a new approval.
        handover.keep_waiting(approval.call_id, until=timezone.now() + settings.APPROVAL_TTL)
    else:
        # The answer and drafts are copied here by now: the gateway may remove the call with its thread.
        handover.run_ended(approval.call_id, values=values, error=error)
    # The audit last (audit.record holds the chain's head until the commit), after the call's row.
    audit.record(audit.FINISHED, approval=approval, error=error or None, paused_again=paused_again)
    # After a request for changes, the new approval is the agent's revised call: the next attempt.
    revises = approval if approval.status == ApprovalRequest.Status.CHANGES_REQUESTED else None
    for interrupt in staff_interrupts if paused_again else []:
        approval_request_create(
            call_id=approval.call_id,
            thread_id=approval.thread_id,
            graph=approval.graph,
            interrupt=interrupt,
            caller=approval.caller,
            agent_message=model_text(values),
            revision_of=revises,
            requested_by_id=approval.requested_by_id,
        )
        revises = None  # one revision per attempt


def _archive_drafts(approval: ApprovalRequest, drafts: list[dict[str, Any]]) -> None:
    # contact_drafts accumulates over the thread's life: archive only the ones no earlier
    # approval on this thread has archived.
    archived = ContactMessage.objects.filter(approval__thread_id=approval.thread_id).count()
    ContactMessage.objects.bulk_create(
        ContactMessage(approval=approval, position=position, tool=draft.get("tool", ""), input=draft.get("input"))
        for position, draft in enumerate(drafts)
        if position >= archived
    )


def approval_resumes_nudge(*, limit: int = 1000) -> int:
    """Enqueue again the resumes of decided approvals that have no answer and that no worker holds.

    A decision is committed before its resume is enqueued, so a broker that is down at that moment
    leaves a decided approval whose call waits for ever; so does a worker that died mid-resume.
    leases.stalled_after() leaves alone a resume that is only queued. A second copy of a queued resume
    is harmless: the lease lets one run.
    """
    now = timezone.now()
    stalled = ApprovalRequest.objects.filter(
        leases.stalled("resume_leased_until", "decided_at", now),
        decided_at__isnull=False,
        answered_at__isnull=True,
    ).values_list("pk", flat=True)[:limit]
    count = 0
    for approval_id in stalled:
        if work.in_flight_here(RESUME_APPROVAL, str(approval_id)):
            continue  # on this process's threads (the embedded default): queued or waiting, not lost
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
