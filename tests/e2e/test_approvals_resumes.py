"""Staff approvals, the resume of a decision through the REST API: it is still resumed when the
broker refused it, and a second decision on the same thread, or ten at once, get 409. (That it
runs once however often it is delivered, and is retried when the database goes away, is
tests/inprocess/test_approval_resumes.py.)"""

from __future__ import annotations

import threading
from datetime import timedelta

from tests.e2e.approvals import ADMIN_TOKEN, AdminAPI, broker_refusing_tasks, paused_thread


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
        # Approved as requested: the digest approved is the one requested.
        "digest": approval.digest,
        "approved_digest": approval.digest,
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
