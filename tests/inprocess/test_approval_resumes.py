"""A staff decision's resume runs the agent on exactly once: a copy delivered again after it
finished, or after its worker died before recording it, runs nothing again; two copies at once
run the tool once; and a resume that loses the database is retried, not recorded as the agent's
failure. (Its lease is test_leases.py.)"""

from __future__ import annotations

import threading

import psycopg
import pytest
from django.db import connection
from langgraph.checkpoint.postgres import PostgresSaver

from approvals.models import ApprovalRequest, ContactMessage
from tests.inprocess.driver import decide, paused_for_staff, resume_approval, run_resumes
from tests.staff_approvals import HIRE_ME


def test_a_redelivered_resume_neither_runs_the_model_again_nor_archives_twice(model_requests):
    approval = paused_for_staff("digital_twin", {"message": HIRE_ME})
    decide(approval, approved=True)
    run_resumes()
    approval.refresh_from_db()
    answer = approval.answer

    resume_approval(str(approval.pk))  # delivered again after it finished
    # Delivered again after a worker died between resuming the thread and recording the outcome.
    ApprovalRequest.objects.filter(pk=approval.pk).update(answered_at=None, answer="")
    resume_approval(str(approval.pk))

    assert len(model_requests()) == 2
    assert ContactMessage.objects.filter(approval=approval).count() == 1
    approval.refresh_from_db()
    assert approval.answer == answer and approval.answered_at is not None


# Each copy runs on a thread of its own, with its own connection: the decision must be committed.
@pytest.mark.django_db(transaction=True)
def test_two_copies_of_one_resume_running_at_once_run_the_tool_once(model_requests):
    approval = paused_for_staff("digital_twin", {"message": HIRE_ME})
    decide(approval, approved=True)  # its resume waits in the queue while two copies run here
    start = threading.Barrier(2)

    def deliver():
        start.wait()
        try:
            resume_approval(str(approval.pk))
        finally:
            connection.close()

    copies = [threading.Thread(target=deliver) for _ in range(2)]
    for copy in copies:
        copy.start()
    for copy in copies:
        copy.join(60)

    assert len(model_requests()) == 2  # the pause, and one resumed run
    assert ContactMessage.objects.filter(approval=approval).count() == 1
    approval.refresh_from_db()
    assert approval.answer.startswith("Your message was recorded")


def test_a_resume_that_loses_the_database_is_retried_not_recorded_as_the_agents_failure(paused_approval, monkeypatch):
    decide(paused_approval, approved=True)  # its resume is delivered here, where the database
    # connection can be lost at the moment the resume reads the checkpoint
    reads = PostgresSaver.get_tuple

    def lost(self, config):
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(PostgresSaver, "get_tuple", lost)
    with pytest.raises(psycopg.OperationalError):  # the task's autoretry takes it from here
        resume_approval(str(paused_approval.pk))
    monkeypatch.setattr(PostgresSaver, "get_tuple", reads)
    paused_approval.refresh_from_db()
    assert paused_approval.answered_at is None and not paused_approval.error

    resume_approval(str(paused_approval.pk))  # the retry

    paused_approval.refresh_from_db()
    assert paused_approval.answer.startswith("Your message was recorded")
