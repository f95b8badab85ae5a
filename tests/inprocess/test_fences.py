"""Fences: a run that lost its lease (taken over, or run out by its process's clock, as after a
SIGSTOP longer than the lease) records nothing and writes no checkpoint, whatever it was doing
when it lost it; and no step starts before the checkpoint of the step before it is written, so a
write that fails leaves no effect to make again. Driven in-process, with time-machine for the
clock; the takeovers between two steps commit their rows, so the checkpointer's own connections
see the lease they fence on."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
import time_machine
from django.conf import settings
from django.db import connection
from django.utils import timezone

from graph_runtime.checkpointer import postgres_dsn
from tests.inprocess.driver import (
    Lease,
    Round,
    call,
    checkpoint_rows,
    claim_resume,
    paused_for_staff,
    resume_approval,
    resume_holding,
    resume_lease_and_die,
    run_holding,
    run_round,
    staff_decided,
    take_over,
    worker_running,
)
from tests.rounds import eventually


def _later(seconds: float):
    return time_machine.travel(timezone.now() + timedelta(seconds=seconds), tick=False)


def _in_a_thread(work: Callable[[], object]) -> threading.Thread:
    def run() -> None:
        try:
            work()
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _effects(folder: Path) -> list[str]:
    return (folder / "effects").read_text().splitlines() if (folder / "effects").exists() else []


def test_a_round_whose_lease_ran_out_by_its_process_s_clock_records_nothing_and_writes_no_checkpoint():
    still_running = call("choose_region", outlasting=True)
    round_ = Round.objects.get(state=Round.State.RUNNING)
    with worker_running(round_.pk, lease=True) as stopped:
        # The worker was stopped after it took the lease, and goes on after the lease ran out,
        # before its heartbeat ran: nobody has taken the round over yet.
        with _later(settings.RUN_LEASE_SECONDS + 1):
            run_holding(stopped.round, attempted_before=False)
    assert checkpoint_rows(round_.call.thread_id) == 0
    assert Round.objects.get(pk=round_.pk).state == Round.State.RUNNING  # left to the next worker

    with _later(settings.RUN_LEASE_SECONDS + 1):
        assert run_round(round_.pk) == Lease.AGAIN
    asked = call("choose_region", request_state=still_running["requestState"])
    assert asked["resultType"] == "input_required" and asked["inputRequests"], asked


@pytest.mark.django_db(transaction=True)
def test_a_round_taken_over_between_two_steps_of_its_old_holder_keeps_the_new_holder_s_checkpoints_only(
    tmp_path,
):
    call("effect_then_ask", {"signal_dir": str(tmp_path)}, outlasting=True)
    round_ = Round.objects.get(state=Round.State.RUNNING)
    thread_id = round_.call.thread_id
    old_holder = _in_a_thread(lambda: run_round(round_.pk))
    assert eventually(lambda: (tmp_path / "started").exists())
    # The old holder is in its first step (the effect) when it is stopped past its lease, and
    # another worker takes the round over; then it goes on, its own clock still within its lease.
    with _later(settings.RUN_LEASE_SECONDS + 1):
        new_holder = take_over(round_.pk)
    written = checkpoint_rows(thread_id)
    (tmp_path / "release").touch()
    old_holder.join(30)
    assert not old_holder.is_alive()

    assert checkpoint_rows(thread_id) == written  # its step's writes and checkpoint were refused
    assert Round.objects.get(pk=round_.pk).state == Round.State.RUNNING
    run_holding(new_holder)
    recorded = Round.objects.get(pk=round_.pk)
    assert recorded.state == Round.State.ASKING, recorded.outcome
    # The node that ran during the stop finished its own effect; the new holder ran it again.
    assert _effects(tmp_path) == ["effect", "effect"]


@pytest.mark.django_db(transaction=True)
def test_a_staff_resume_taken_over_between_two_steps_of_its_old_holder_records_nothing_and_writes_no_checkpoint(
    tmp_path,
):
    from approvals.models import ApprovalRequest, AuditEvent

    approval = paused_for_staff("staff_held_effect", {"signal_dir": str(tmp_path)})
    staff_decided(str(approval.pk))
    old_holder = _in_a_thread(lambda: resume_approval(str(approval.pk)))
    assert eventually(lambda: (tmp_path / "started").exists())
    with _later(settings.RUN_LEASE_SECONDS + 1):
        resume_lease_and_die(str(approval.pk))  # another worker takes the resume over
    written = checkpoint_rows(approval.thread_id)
    (tmp_path / "release").touch()
    old_holder.join(30)
    assert not old_holder.is_alive()

    assert checkpoint_rows(approval.thread_id) == written
    assert ApprovalRequest.objects.get(pk=approval.pk).answered_at is None
    assert not AuditEvent.objects.filter(approval_id=approval.pk, kind="finished").exists()
    with _later(2 * settings.RUN_LEASE_SECONDS + 2):  # that worker died too: taken over, run once
        resume_approval(str(approval.pk))
    answered = ApprovalRequest.objects.get(pk=approval.pk)
    assert answered.answered_at is not None and not answered.error, answered.error
    assert AuditEvent.objects.filter(approval_id=approval.pk, kind="finished").count() == 1


def test_a_staff_resume_whose_lease_ran_out_by_its_process_s_clock_records_nothing_and_writes_no_checkpoint(
    tmp_path,
):
    from approvals.models import ApprovalRequest, AuditEvent

    approval = paused_for_staff("staff_held_effect", {"signal_dir": str(tmp_path)})
    (tmp_path / "release").touch()
    staff_decided(str(approval.pk))
    written = checkpoint_rows(approval.thread_id)
    events = AuditEvent.objects.filter(approval_id=approval.pk).count()
    # Stopped right after it claimed the resume, the worker goes on after its lease ran out.
    stopped = claim_resume(str(approval.pk))
    with _later(settings.RUN_LEASE_SECONDS + 1):
        resume_holding(stopped)
    assert checkpoint_rows(approval.thread_id) == written
    assert AuditEvent.objects.filter(approval_id=approval.pk).count() == events  # not even "resumed"
    assert ApprovalRequest.objects.get(pk=approval.pk).answered_at is None
    assert _effects(tmp_path) == []


@pytest.mark.django_db(transaction=True)
def test_a_node_that_requires_the_lease_before_its_effect_makes_no_effect_once_its_round_was_taken_over(tmp_path):
    call("checked_effect", {"signal_dir": str(tmp_path)}, outlasting=True)
    round_ = Round.objects.get(state=Round.State.RUNNING)
    old_holder = _in_a_thread(lambda: run_round(round_.pk))
    assert eventually(lambda: (tmp_path / "started").exists())
    with _later(settings.RUN_LEASE_SECONDS + 1):
        new_holder = take_over(round_.pk)
    (tmp_path / "release").touch()
    old_holder.join(30)
    assert not old_holder.is_alive()
    assert _effects(tmp_path) == []  # its node asked for the lease before the effect, and stopped

    run_holding(new_holder)
    assert Round.objects.get(pk=round_.pk).state == Round.State.FINISHED
    assert _effects(tmp_path) == ["effect"]


@pytest.mark.django_db(transaction=True)
def test_a_step_starts_only_once_the_checkpoint_of_the_step_before_it_is_written(tmp_path):
    # A checkpoint write that fails (the database restarting) has the run retried from the last
    # checkpoint written: a step already started beside that write would make its effect again.
    call("slow_step_then_effect", {"signal_dir": str(tmp_path), "tag": "t", "seconds": 0.5}, outlasting=True)
    round_ = Round.objects.get(state=Round.State.RUNNING)
    run = _in_a_thread(lambda: run_round(round_.pk))
    assert eventually(lambda: (tmp_path / "started").exists())
    with psycopg.connect(postgres_dsn()) as held:
        held.execute("LOCK TABLE checkpoints IN EXCLUSIVE MODE")  # until this transaction ends

        def write_waiting() -> bool:
            waiting = "SELECT count(*) FROM pg_locks WHERE relation = 'checkpoints'::regclass AND NOT granted"
            return held.execute(waiting).fetchone() == (1,)

        # The first step has ended and its checkpoint waits for the table; the effect, the next
        # step, would follow in milliseconds if it did not wait for that write.
        assert eventually(write_waiting)
        time.sleep(0.5)
        assert _effects(tmp_path) == []
    run.join(30)
    assert not run.is_alive()
    assert _effects(tmp_path) == ["t"]
    assert Round.objects.get(pk=round_.pk).state == Round.State.FINISHED


def test_in_the_embedded_default_a_round_whose_lease_ran_out_while_it_waited_is_still_its_own_and_records(settings):
    # One process runs every round of its data directory and never takes over one it has: nobody
    # else can hold the round, whatever its lease says.
    settings.CELERY_TASK_ALWAYS_EAGER = True
    call("choose_region", outlasting=True)
    round_ = Round.objects.get(state=Round.State.RUNNING)
    with worker_running(round_.pk, lease=True) as waited:
        with _later(settings.RUN_LEASE_SECONDS + 1):
            run_holding(waited.round, attempted_before=False)
    assert Round.objects.get(pk=round_.pk).state == Round.State.ASKING
