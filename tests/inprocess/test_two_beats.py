"""Two beats: every job of CELERY_BEAT_SCHEDULE run twice at the same time (beat started on two
hosts) does its work once: each copy runs in a thread of its own, on its own connection to the
real PostgreSQL, both let go at once. Rows are committed so that each copy sees them."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any

import pytest
import time_machine
from django.conf import settings
from django.db import connection
from django.utils import timezone

from approvals.models import ApprovalRequest, AuditEvent
from approvals.services import RESUME_APPROVAL
from mcp_gateway.calls.round_queue import RUN_ROUND
from tests.inprocess.driver import (
    ENQUEUED,
    Lease,
    Round,
    ToolCall,
    call,
    checkpoint_rows,
    escalate_approvals,
    expire_approvals,
    lease_and_die,
    nudge_stalled,
    nudge_stalled_resumes,
    paused_for_staff,
    resume_approval,
    resume_lease_and_die,
    run_round,
    staff_decided,
    sweep_calls,
)

pytestmark = pytest.mark.django_db(transaction=True)

CALLS = 6


def _twice_at_once(job: Callable[[], Any]) -> list[Any]:
    """What each of two copies of `job`, started together on two threads, returned."""
    start = threading.Barrier(2)
    results: list[Any] = [None, None]
    errors: list[BaseException] = []

    def copy(n: int) -> None:
        try:
            start.wait(10)
            results[n] = job()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=copy, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    return results


def _later(delta: timedelta):
    return time_machine.travel(timezone.now() + delta, tick=False)


def _approvals(tmp_path) -> list[ApprovalRequest]:
    """CALLS calls handed to staff, each its own signal folder (tmp_path/n) for its resumed run."""
    for n in range(CALLS):
        (tmp_path / str(n)).mkdir()
    return [paused_for_staff("staff_held_effect", {"signal_dir": str(tmp_path / str(n))}) for n in range(CALLS)]


def test_two_beats_sweeping_expired_calls_at_once_remove_each_call_and_its_thread_once():
    for _ in range(CALLS):
        assert call("choose_region")["resultType"] == "input_required"
    threads = list(ToolCall.objects.values_list("thread_id", flat=True))

    with _later(timedelta(hours=25)):
        swept = _twice_at_once(sweep_calls)

    assert sum(s["calls_removed"] for s in swept) == CALLS
    assert not ToolCall.objects.exists()
    assert sum(checkpoint_rows(t) for t in threads) == 0


def test_two_beats_expiring_approvals_at_once_decline_each_once_with_one_audit_event_and_one_resume(tmp_path):
    approvals = _approvals(tmp_path)

    with _later(settings.APPROVAL_TTL + timedelta(minutes=1)):
        expired = _twice_at_once(expire_approvals)

    assert sum(expired) == CALLS
    assert set(ApprovalRequest.objects.values_list("status", flat=True)) == {ApprovalRequest.Status.EXPIRED}
    events = Counter(AuditEvent.objects.filter(kind="expired").values_list("approval_id", flat=True))
    assert events == Counter({a.pk: 1 for a in approvals})
    resumes = Counter(args for name, args, _ in ENQUEUED if name == RESUME_APPROVAL)
    assert resumes == Counter({(str(a.pk),): 1 for a in approvals})


def test_two_beats_escalating_approvals_at_once_escalate_each_once_with_one_audit_event_and_one_notice(
    tmp_path, mailoutbox, settings
):
    settings.APPROVAL_ESCALATE_AFTER = timedelta(hours=1)
    settings.APPROVAL_ESCALATION_EMAIL = "escalations@example.com"
    approvals = _approvals(tmp_path)
    told = len(mailoutbox)

    with _later(timedelta(hours=2)):
        escalated = _twice_at_once(escalate_approvals)

    assert sum(escalated) == CALLS
    events = Counter(AuditEvent.objects.filter(kind="escalated").values_list("approval_id", flat=True))
    assert events == Counter({a.pk: 1 for a in approvals})
    assert len(mailoutbox) - told == CALLS


def _each_copy_at_once(enqueued: list[str], run: Callable[[str], Any]) -> dict[str, list[Any]]:
    """What `run` returned for each copy of each task the jobs enqueued, the copies of one task
    run at the same time, as two workers would (one copy: run alone)."""
    results: dict[str, list[Any]] = {}
    for task_id, copies in Counter(enqueued).items():
        assert copies <= 2, (task_id, copies)
        results[task_id] = _twice_at_once(partial(run, task_id)) if copies == 2 else [run(task_id)]
    return results


def test_two_beats_nudging_stalled_rounds_at_once_have_each_round_run_once():
    for _ in range(CALLS):
        call("choose_region", outlasting=True)
    rounds = list(Round.objects.filter(state=Round.State.RUNNING).values_list("pk", flat=True))
    for round_id in rounds:
        lease_and_die(round_id)
    ENQUEUED.clear()  # the first copies, taken by the workers that died

    with _later(timedelta(seconds=settings.RUN_LEASE_SECONDS + 1)):
        nudged = _twice_at_once(nudge_stalled)
        ran = _each_copy_at_once([args[0] for name, args, _ in ENQUEUED if name == RUN_ROUND], run_round)

    # Each copy of the job enqueues what it found (a round twice at most); the lease runs it once.
    assert CALLS <= sum(n["rounds_nudged"] for n in nudged) <= 2 * CALLS
    assert {round_id: leases.count(Lease.AGAIN) for round_id, leases in ran.items()} == {str(r): 1 for r in rounds}
    assert not Round.objects.filter(state=Round.State.RUNNING).exists()


def test_two_beats_nudging_stalled_resumes_at_once_have_each_resume_run_and_answered_once(tmp_path):
    approvals = _approvals(tmp_path)
    for n, approval in enumerate(approvals):
        (tmp_path / str(n) / "release").touch()
        staff_decided(str(approval.pk))
        resume_lease_and_die(str(approval.pk))
    ENQUEUED.clear()  # the first copies, taken by the workers that died

    with _later(timedelta(seconds=settings.RUN_LEASE_SECONDS + 1)):
        nudged = _twice_at_once(nudge_stalled_resumes)
        _each_copy_at_once([args[0] for name, args, _ in ENQUEUED if name == RESUME_APPROVAL], resume_approval)

    assert CALLS <= sum(nudged) <= 2 * CALLS
    finished = Counter(AuditEvent.objects.filter(kind="finished").values_list("approval_id", flat=True))
    assert finished == Counter({a.pk: 1 for a in approvals})
    effects = [(tmp_path / str(n) / "effects").read_text().splitlines() for n in range(CALLS)]
    assert effects == [["effect"]] * CALLS
