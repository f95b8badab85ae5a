"""Staff approvals, deciding: an approval resumes the thread and runs the tool; anything but an
explicit approved true declines (fail closed); a rejection gives the model its note."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.approvals import (
    DRAFT,
    SECOND_DRAFT,
    last_tool_result,
    paused_thread,
    resume_with,
    thread_state,
    tool_messages,
)
from tests.fakes import openai_server


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


def test_high_risk_tools_never_run_without_an_explicit_human_approval_so_each_call_needs_its_own(
    mcp_url, token, admin_api, monkeypatch
):
    from approvals.models import ApprovalRequest, ContactMessage
    from mcp_gateway.models import ToolCall

    script = openai_server.next_turn

    def asks_again(messages: list[dict[str, Any]], tools: list[str]) -> dict[str, Any]:
        # The fake model, once its first message is recorded, asks to send a second one.
        calls = [c["function"]["name"] for m in messages for c in m.get("tool_calls") or []]
        drafts = [name for name in calls if name == "draft_contact_message"]
        if len(drafts) == 1 and any("recorded" in content for content in tool_messages({"messages": messages})):
            return {
                "content": "",
                "tool_calls": [{"id": "call_2", "name": "draft_contact_message", "args": SECOND_DRAFT}],
            }
        return script(messages, tools)

    monkeypatch.setattr(openai_server, "next_turn", asks_again)
    first, thread_id = paused_thread(mcp_url, token)

    assert admin_api.decide(thread_id, approved=True).status_code == 200

    # The approval covered the call staff were shown; the second call paused for one of its own.
    assert thread_state(thread_id)["contact_drafts"] == [{"tool": "draft_contact_message", "input": DRAFT}]
    second = ApprovalRequest.objects.exclude(pk=first.pk).get(thread_id=thread_id)
    assert second.status == "pending"
    assert second.tool_calls == [{"name": "draft_contact_message", "input": SECOND_DRAFT}]
    assert ToolCall.objects.get(thread_id=thread_id).status == ToolCall.Status.AWAITING_STAFF

    response = admin_api.decide(thread_id, approved=False, note="One message is enough.")

    assert response.status_code == 200 and "declined" in response.json()["answer"]
    assert thread_state(thread_id)["contact_drafts"] == [{"tool": "draft_contact_message", "input": DRAFT}]
    assert [m.input for m in ContactMessage.objects.all()] == [DRAFT]


@pytest.mark.parametrize("approved", ["false", "no", "true", 1, [False], [True]])
def test_only_an_explicit_approved_true_reaches_the_run(mcp_url, token, model_in_this_process, approved):
    approval, thread_id = paused_thread(mcp_url, token)

    resume_with(approval, {"approved": approved})

    assert thread_state(thread_id)["contact_drafts"] == []
    assert "declined" in last_tool_result(thread_id)


@pytest.mark.parametrize("decision", [{}, {"note": "No verdict."}, {"approved": None}], ids=["empty", "no-key", "none"])
def test_an_empty_approval_a_missing_key_or_none_declines(mcp_url, token, model_in_this_process, decision):
    approval, thread_id = paused_thread(mcp_url, token)

    resume_with(approval, decision)

    assert thread_state(thread_id)["contact_drafts"] == []
    assert "declined" in last_tool_result(thread_id)


@pytest.mark.parametrize("value", [None, True, "approved", [{"approved": True}]])
def test_a_resume_value_that_is_not_a_decision_object_declines(mcp_url, token, model_in_this_process, value):
    approval, thread_id = paused_thread(mcp_url, token)

    resume_with(approval, value)

    assert thread_state(thread_id)["contact_drafts"] == []
    assert "declined" in last_tool_result(thread_id)


@pytest.mark.parametrize(
    "approval",
    [None, {}, {"decided": True}, {"decided": True, "approved": None}, {"decided": True, "approved": "true"}],
    ids=["none", "empty", "no-key", "approved-none", "approved-string"],
)
def test_execute_tools_declines_a_high_risk_call_unless_the_state_holds_an_explicit_approved_true(
    mcp_url, token, model_in_this_process, approval
):
    from graph_runtime import runner
    from graph_runtime.registry import get_graph

    _, thread_id = paused_thread(mcp_url, token)
    registered = get_graph("digital_twin")
    # The executor's own check, whatever request_approval made of the decision: the run goes on
    # to execute_tools with this approval in its state.
    runner.bound(registered.graph).update_state(
        {"configurable": {"thread_id": thread_id}}, {"approval": approval}, as_node="request_approval"
    )

    runner.run(registered, thread_id, carry_on=True)

    assert thread_state(thread_id)["contact_drafts"] == []
    assert json.loads(last_tool_result(thread_id)) == {
        "status": "declined",
        "reason": "The owner declined this request.",
    }


def test_a_decision_never_leaks_into_the_visitors_next_question(mcp_url, token, admin_api, model_in_this_process):
    from graph_runtime import runner
    from graph_runtime.registry import get_graph

    approval, thread_id = paused_thread(mcp_url, token)
    assert admin_api.decide(thread_id, approved=True).status_code == 200
    registered = get_graph("digital_twin")
    # A run that died between staff's decision and the tool leaves the decision in the checkpoint.
    runner.bound(registered.graph).update_state(
        {"configurable": {"thread_id": thread_id}},
        {"approval": {"decided": True, "approved": True, "note": None}},
        as_node="generate",
    )

    following = runner.run(registered, thread_id, arguments={"message": "Please pass another message to the owner."})

    assert [i.value["type"] for i in following.interrupts] == ["staff_approval"]  # paused for a new decision
    assert thread_state(thread_id)["contact_drafts"] == [{"tool": "draft_contact_message", "input": DRAFT}]


def test_rejecting_declines_without_running_the_tool_and_the_model_gets_the_note(
    mcp_url, token, admin_api, model_requests
):
    from approvals.models import ContactMessage

    _, thread_id = paused_thread(mcp_url, token)
    note = "Not taking projects right now — désolé."

    response = admin_api.decide(thread_id, approved=False, note=note)

    assert response.status_code == 200
    assert response.json()["status"] == "rejected"
    assert response.json()["answer"].startswith("Sorry, the owner declined")
    requests = model_requests()
    assert len(requests) == 2
    [result] = tool_messages(requests[1])
    assert json.loads(result) == {"status": "declined", "reason": note}
    assert "declined" in result and note in result  # the article: "my note verbatim", in any script
    assert thread_state(thread_id)["contact_drafts"] == []
    assert not ContactMessage.objects.exists()


def test_a_rejection_without_a_note_gives_the_model_the_default_reason(mcp_url, token, admin_api, model_requests):
    _, thread_id = paused_thread(mcp_url, token)

    response = admin_api.decide(thread_id, approved=False)

    assert response.status_code == 200 and response.json()["status"] == "rejected"
    [result] = tool_messages(model_requests()[1])
    assert json.loads(result) == {"status": "declined", "reason": "The owner declined this request."}


def test_a_rejection_declines_only_the_high_risk_call_and_a_read_only_call_of_the_same_turn_still_runs(
    mcp_url, token, admin_api, model_requests, model_asks_for_notes_and_a_message
):
    _, thread_id = paused_thread(mcp_url, token)
    assert len(model_requests()) == 1  # the search waited for the decision too

    response = admin_api.decide(thread_id, approved=False, note="Not now.")

    assert response.status_code == 200
    search, draft = (json.loads(result) for result in tool_messages(model_requests()[1]))
    assert search == {"results": ["The owner has built Django services since 2012, mostly APIs and admin tooling."]}
    assert draft == {"status": "declined", "reason": "Not now."}
    assert thread_state(thread_id)["contact_drafts"] == []
