"""Staff approvals, deciding through the REST API: an approval resumes the thread, runs the tool,
archives the draft, and the API answers with the resumed run's answer. (That anything but an
explicit approval declines, and what a rejection tells the model, is tests/inprocess/
test_approval_fail_closed.py.)"""

from __future__ import annotations

from tests.e2e.approvals import (
    DRAFT,
    paused_thread,
    thread_state,
    tool_messages,
)


def test_approving_resumes_the_thread_runs_the_tool_and_archives_the_draft(mcp_url, token, admin_api, model_requests):
    from approvals.models import ContactMessage
    from mcp_gateway.models import ToolCall

    approval, thread_id = paused_thread(mcp_url, token)

    response = admin_api.decide(thread_id, approved=True)

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "approved" and body["thread_id"] == thread_id
    assert body["answer"].startswith("Your message was recorded")
    requests = model_requests()
    assert len(requests) == 2
    assert any("recorded" in m for m in tool_messages(requests[1]))
    assert admin_api.pending().json() == []
    assert thread_state(thread_id)["answer"] == body["answer"]  # the closing text lands in the thread state too
    assert thread_state(thread_id)["contact_drafts"] == [{"tool": "draft_contact_message", "input": DRAFT}]
    [archived] = ContactMessage.objects.filter(approval=approval)
    assert (archived.tool, archived.input) == ("draft_contact_message", DRAFT)
    approval.refresh_from_db()
    assert approval.answer == body["answer"] and approval.decided_at
    assert (approval.decided_via, approval.decided_by, approval.decider) == ("api", None, "the REST API (admin token)")
    assert ToolCall.objects.get(thread_id=thread_id).status == ToolCall.Status.FINISHED
