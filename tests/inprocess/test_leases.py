"""Leases: a worker holds the round it runs, or a staff decision's resume, for RUN_LEASE_SECONDS,
renewed by its process's heartbeat while it lives; one whose lease nobody renews is taken over,
and a stopping worker hands its runs back. Driven in-process, with time-machine for the clock."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from approvals.services import RESUME_APPROVAL
from mcp_gateway.calls import store
from mcp_gateway.calls.round_queue import RUN_ROUND
from tests.inprocess.driver import (
    ENQUEUED,
    Lease,
    Round,
    call,
    heartbeat_beat,
    lease_and_die,
    lost_record,
    nudge_stalled,
    nudge_stalled_resumes,
    resume_approval,
    resume_lease_and_die,
    run_round,
    staff_decided,
    stop_worker,
    take_lease,
    worker_resuming,
    worker_running,
)


def _running_first_call() -> tuple[Round, dict]:
    """A first call whose run outlasted the request's wait: its round 0 is RUNNING, and the client
    holds a requestState to collect it with."""
    still_running = call("choose_region", outlasting=True)
    assert set(still_running) == {"resultType", "requestState"}, still_running
    return Round.objects.get(state=Round.State.RUNNING), still_running


def _later(seconds: float):
    return time_machine.travel(timezone.now() + timedelta(seconds=seconds), tick=False)


def test_a_round_whose_lease_nobody_renews_is_taken_over_once_it_runs_out_and_runs_once():
    round_, still_running = _running_first_call()
    lease_and_die(round_.pk)

    with _later(settings.RUN_LEASE_SECONDS - 1):
        assert nudge_stalled() == {"rounds_nudged": 0}
        assert run_round(round_.pk) == Lease.HELD
    with _later(settings.RUN_LEASE_SECONDS + 1):
        assert nudge_stalled() == {"rounds_nudged": 1}
        assert ENQUEUED[-1][:2] == (RUN_ROUND, (str(round_.pk),))
        assert run_round(round_.pk) == Lease.AGAIN
        assert run_round(round_.pk) == Lease.GONE

    asked = call("choose_region", request_state=still_running["requestState"])
    assert asked["resultType"] == "input_required" and asked["inputRequests"], asked


def test_the_heartbeat_of_a_live_worker_keeps_its_round_from_being_taken_over_however_long_the_run():
    round_, _ = _running_first_call()
    with worker_running(round_.pk):
        for beat in range(1, 10):  # nine beats: three leases' worth
            with _later(beat * settings.RUN_HEARTBEAT_SECONDS):
                assert heartbeat_beat() == 1
                assert nudge_stalled() == {"rounds_nudged": 0}
                assert run_round(round_.pk) == Lease.HELD

    with _later(10 * settings.RUN_HEARTBEAT_SECONDS + settings.RUN_LEASE_SECONDS):
        assert nudge_stalled() == {"rounds_nudged": 1}  # the worker is gone: nobody renewed it


def test_a_stopping_worker_hands_back_the_rounds_still_running_after_the_grace_period_at_once():
    round_, _ = _running_first_call()
    with worker_running(round_.pk):
        assert stop_worker(grace=0.2) == [0]  # the process exits

        round_.refresh_from_db()
        assert round_.leased_until <= timezone.now()  # another worker may take it now
        name, args, countdown = ENQUEUED[-1]
        assert (name, args) == (RUN_ROUND, (str(round_.pk),))
        assert countdown and countdown > 0  # once this process has exited
        assert heartbeat_beat() == 0  # a round handed back is not renewed
    assert run_round(round_.pk) == Lease.HANDED_BACK  # nor is a new one taken


def test_a_stopping_worker_whose_runs_end_within_the_grace_period_hands_nothing_back():
    round_, _ = _running_first_call()
    enqueued = len(ENQUEUED)
    with worker_running(round_.pk):
        pass  # the run ends
    assert stop_worker(grace=0.2) == []  # Celery's own shutdown ends the process
    round_.refresh_from_db()
    assert round_.leased_until > timezone.now()
    assert len(ENQUEUED) == enqueued


def test_a_worker_whose_lease_was_taken_over_can_neither_renew_nor_record_and_learns_it_at_its_next_beat():
    round_, still_running = _running_first_call()
    with worker_running(round_.pk, lease=True) as first:
        # It cannot reach the database for longer than the lease: another worker takes the round.
        with _later(settings.RUN_LEASE_SECONDS + 1):
            assert take_lease(round_.pk) == Lease.AGAIN
        assert heartbeat_beat() == 0  # back, its renewal matches nothing
        assert first.lost.is_set()  # the run stops at its next step
        assert lost_record(first.round)
        assert Round.objects.get(pk=round_.pk).state == Round.State.RUNNING  # left to the new holder

    with _later(settings.RUN_LEASE_SECONDS + 1):
        assert run_round(round_.pk) == Lease.HELD  # the new holder's lease stands
    with _later(2 * settings.RUN_LEASE_SECONDS + 2):
        assert run_round(round_.pk) == Lease.AGAIN  # (that worker died too) taken over, run once
    asked = call("choose_region", request_state=still_running["requestState"])
    assert asked["resultType"] == "input_required" and asked["inputRequests"], asked


# --- a staff decision's resume holds the same lease ---------------------------------------------


def _decided_approval() -> str:
    """A call handed to staff, and their approval: its resume is enqueued, not yet run."""
    from approvals.models import ApprovalRequest

    paused = call("digital_twin", {"message": "Please contact the owner: hire me?"})
    approval_id = paused["structuredContent"]["approval_id"]
    staff_decided(approval_id)
    assert ApprovalRequest.objects.get(pk=approval_id).decided_at is not None
    return approval_id


def _answered(approval_id: str) -> bool:
    from approvals.models import ApprovalRequest

    return ApprovalRequest.objects.get(pk=approval_id).answered_at is not None


def test_a_staff_resume_whose_lease_nobody_renews_is_taken_over_once_it_runs_out_and_runs_once(
    model_in_this_process,
):
    approval_id = _decided_approval()
    resume_lease_and_die(approval_id)

    with _later(settings.RUN_LEASE_SECONDS - 1):
        assert nudge_stalled_resumes() == 0
        resume_approval(approval_id)  # a redelivered copy: the dead worker's lease still stands
        assert not _answered(approval_id)
    with _later(settings.RUN_LEASE_SECONDS + 1):
        assert nudge_stalled_resumes() == 1
        assert ENQUEUED[-1][:2] == (RESUME_APPROVAL, (approval_id,))
        resume_approval(approval_id)
        assert _answered(approval_id)
        assert nudge_stalled_resumes() == 0


def test_the_heartbeat_of_a_live_worker_keeps_its_staff_resume_from_being_taken_over_however_long_the_run(
    model_in_this_process,
):
    approval_id = _decided_approval()
    with worker_resuming(approval_id):
        for beat in range(1, 10):  # nine beats: three leases' worth
            with _later(beat * settings.RUN_HEARTBEAT_SECONDS):
                assert heartbeat_beat() == 1
                assert nudge_stalled_resumes() == 0
                resume_approval(approval_id)  # a copy finds the lease held and leaves it
                assert not _answered(approval_id)

    with _later(10 * settings.RUN_HEARTBEAT_SECONDS + settings.RUN_LEASE_SECONDS):
        assert nudge_stalled_resumes() == 1  # the worker is gone: nobody renewed it


def test_a_stopping_worker_hands_back_the_staff_resume_still_running_after_the_grace_period_at_once(
    model_in_this_process,
):
    approval_id = _decided_approval()
    enqueued = len(ENQUEUED)
    with worker_resuming(approval_id):
        assert stop_worker(grace=0.2) == [0]  # the process exits

        from approvals.models import ApprovalRequest

        assert ApprovalRequest.objects.get(pk=approval_id).resume_leased_until is None  # free now
        name, args, countdown = ENQUEUED[-1]
        assert (name, args) == (RESUME_APPROVAL, (approval_id,))
        assert countdown and countdown > 0  # once this process has exited
        assert len(ENQUEUED) == enqueued + 1
        assert heartbeat_beat() == 0  # a resume handed back is not renewed
    resume_approval(approval_id)  # nor is a new one taken: it goes to another worker
    assert not _answered(approval_id)
    assert ENQUEUED[-1][:2] == (RESUME_APPROVAL, (approval_id,))


def _synchronous_commit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('synchronous_commit')")
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_a_worker_s_lease_skips_the_wal_flush_for_its_own_statement_only():
    round_, _ = _running_first_call()
    # Autocommitted, as a worker takes it: the lease commits, and the connection's next
    # statements (a record, which is an acknowledgement) wait for the flush again.
    leased = store.lease_first(round_.pk)
    assert leased is not None and leased.call.pk == round_.call_id
    assert _synchronous_commit() == "on"
    assert Round.objects.get(pk=round_.pk).leased_until == leased.leased_until


@pytest.mark.django_db(transaction=True)
def test_a_lease_taken_inside_a_transaction_leaves_that_transaction_s_commit_flushed():
    round_, _ = _running_first_call()
    with transaction.atomic():
        assert store.lease_first(round_.pk) is not None
        assert _synchronous_commit() == "on"
