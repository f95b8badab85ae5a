"""Staff approvals, the resume of a decision: it runs once however often it is delivered, is
retried when the database goes away, is still resumed when the broker refused it, and a second
decision on the same thread gets 409."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from tests.e2e.approvals import ADMIN_TOKEN, AdminAPI, broker_refusing_tasks, paused_thread


def test_a_redelivered_resume_neither_runs_the_model_again_nor_archives_twice(
    mcp_url, token, admin_api, model_requests
):
    from approvals.models import ApprovalRequest, ContactMessage
    from approvals.tasks import resume_approval

    approval, thread_id = paused_thread(mcp_url, token)
    answer = admin_api.decide(thread_id, approved=True).json()["answer"]

    resume_approval(str(approval.pk))  # delivered again after it finished
    # Delivered again after a worker died between resuming the thread and recording the outcome.
    ApprovalRequest.objects.filter(pk=approval.pk).update(answered_at=None, answer="")
    resume_approval(str(approval.pk))

    assert len(model_requests()) == 2
    assert ContactMessage.objects.filter(approval=approval).count() == 1
    approval.refresh_from_db()
    assert approval.answer == answer and approval.answered_at is not None


def test_two_copies_of_one_resume_running_at_once_run_the_tool_once(
    mcp_url, token, admin_api, model_requests, celery_worker, settings, model_in_this_process
):
    from django.db import connection

    from approvals.models import ContactMessage
    from approvals.tasks import resume_approval

    approval, thread_id = paused_thread(mcp_url, token)
    # The decision's resume waits in the queue while two copies of it run here at once, as two
    # workers would run a redelivered task.
    celery_worker.stop()
    settings.APPROVAL_WAIT_SECONDS = 0.5
    try:
        assert admin_api.decide(thread_id, approved=True).status_code == 202
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
    finally:
        celery_worker.start()

    assert len(model_requests()) == 2  # the pause, and one resumed run
    assert ContactMessage.objects.filter(approval=approval).count() == 1
    approval.refresh_from_db()
    assert approval.answer.startswith("Your message was recorded")


def test_a_resume_that_loses_the_database_is_retried_not_recorded_as_the_agents_failure(
    mcp_url, token, admin_api, model_requests, celery_worker, settings, model_in_this_process, monkeypatch
):
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    from approvals import resumes

    approval, thread_id = paused_thread(mcp_url, token)
    # The decision's resume waits in the queue while it is delivered here, where the database
    # connection can be lost at the moment the resume reads the checkpoint.
    celery_worker.stop()
    settings.APPROVAL_WAIT_SECONDS = 0.5
    try:
        assert admin_api.decide(thread_id, approved=True).status_code == 202
        reads = PostgresSaver.get_tuple

        def lost(self, config):
            raise psycopg.OperationalError("server closed the connection unexpectedly")

        monkeypatch.setattr(PostgresSaver, "get_tuple", lost)
        with pytest.raises(psycopg.OperationalError):  # the task's autoretry takes it from here
            resumes.approval_resume(approval_id=approval.pk)
        monkeypatch.setattr(PostgresSaver, "get_tuple", reads)
        approval.refresh_from_db()
        assert approval.answered_at is None and not approval.error

        resumes.approval_resume(approval_id=approval.pk)  # the retry
    finally:
        celery_worker.start()

    approval.refresh_from_db()
    assert approval.answer.startswith("Your message was recorded")


def test_a_saved_decision_whose_resume_the_broker_refused_is_still_resumed_by_the_periodic_job(
    mcp_url, token, admin_api, settings
):
    import time_machine
    from django.utils import timezone

    from approvals.models import ContactMessage
    from approvals.resumes import approval_wait_for_answer
    from approvals.tasks import nudge_stalled_resumes
    from mcp_gateway.models import ToolCall

    approval, thread_id = paused_thread(mcp_url, token)
    settings.APPROVAL_WAIT_SECONDS = 0.5

    with broker_refusing_tasks():
        response = admin_api.decide(thread_id, approved=True)

    # Not an error: the decision is saved, and answered like one whose run is slow.
    assert response.status_code == 202
    assert response.json() == {
        "status": "approved",
        "approval_id": str(approval.pk),
        "thread_id": thread_id,
        "answer": None,
        "approvals_given": 1,
        "approvals_required": 1,
    }
    assert admin_api.decide(thread_id, approved=True).status_code == 409
    assert nudge_stalled_resumes() == {"resumes_nudged": 0}  # a queued resume is left alone
    with time_machine.travel(timezone.now() + timedelta(minutes=2)):
        assert nudge_stalled_resumes() == {"resumes_nudged": 1}
    approval = approval_wait_for_answer(approval_id=approval.pk, timeout=60)
    assert approval.answer.startswith("Your message was recorded")
    assert ContactMessage.objects.filter(approval=approval).count() == 1
    assert ToolCall.objects.get(thread_id=thread_id).status == ToolCall.Status.FINISHED


def test_a_second_decision_on_the_same_thread_gets_409(mcp_url, token, admin_api, model_requests):
    _, thread_id = paused_thread(mcp_url, token)
    assert admin_api.decide(thread_id, approved=True).status_code == 200

    again = admin_api.decide(thread_id, approved=False, note="Changed my mind.")

    assert again.status_code == 409
    assert again.json()["detail"] == "This approval was already approved."
    assert len(model_requests()) == 2


def test_ten_decisions_at_once_resume_the_thread_once_and_the_rest_get_409(
    mcp_url, token, admin_api, model_requests, live_server
):
    from approvals.models import ContactMessage

    approval, thread_id = paused_thread(mcp_url, token)
    start = threading.Barrier(10)
    statuses: list[int] = []

    def decide():
        client = AdminAPI(live_server.url, ADMIN_TOKEN)
        start.wait()
        statuses.append(client.decide(thread_id, approved=True).status_code)

    threads = [threading.Thread(target=decide) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)

    assert sorted(statuses) == [200] + [409] * 9
    assert len(model_requests()) == 2  # one resume: one more model call
    assert ContactMessage.objects.filter(approval=approval).count() == 1
