"""Staff approvals fail closed: a high-risk tool runs only on an explicit `approved: true` from
staff, once per call staff were shown; anything else declines, and a rejection gives the model
staff's note as the reason. Each digital_twin run talks to the fake model."""

from __future__ import annotations

import json
from typing import Any

import pytest

from approvals.models import ApprovalRequest, ContactMessage
from mcp_gateway.models import ToolCall
from tests.fakes import openai_server
from tests.inprocess.driver import (
    decide,
    paused_for_staff,
    resume_thread_with,
    run_resumes,
    run_thread,
    staff_decides,
    thread_state,
    waiting_for_staff,
    write_thread_state,
)
from tests.staff_approvals import DRAFT, HIRE_ME, SECOND_DRAFT, tool_messages


def last_tool_result(thread_id: str) -> str:
    return [m.content for m in thread_state(thread_id)["messages"] if m.type == "tool"][-1]


def test_high_risk_tools_never_run_without_an_explicit_human_approval_so_each_call_needs_its_own(
    model_in_this_process, monkeypatch
):
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
    first = paused_for_staff("digital_twin", {"message": HIRE_ME})
    thread_id = first.thread_id

    staff_decides(str(first.pk), approved=True)

    # The approval covered the call staff were shown; the second call paused for one of its own.
    assert thread_state(thread_id)["contact_drafts"] == [{"tool": "draft_contact_message", "input": DRAFT}]
    second = ApprovalRequest.objects.exclude(pk=first.pk).get(thread_id=thread_id)
    assert second.status == "pending"
    assert second.tool_calls == [{"name": "draft_contact_message", "input": SECOND_DRAFT}]
    assert ToolCall.objects.get(thread_id=thread_id).status == ToolCall.Status.AWAITING_STAFF

    answer = staff_decides(str(second.pk), approved=False, note="One message is enough.")

    assert "declined" in answer
    assert thread_state(thread_id)["contact_drafts"] == [{"tool": "draft_contact_message", "input": DRAFT}]
    assert [m.input for m in ContactMessage.objects.all()] == [DRAFT]


@pytest.mark.parametrize("approved", ["false", "no", "true", 1, [False], [True]])
def test_only_an_explicit_approved_true_reaches_the_run(paused_approval, approved):
    resume_thread_with(paused_approval, {"approved": approved})

    assert thread_state(paused_approval.thread_id)["contact_drafts"] == []
    assert "declined" in last_tool_result(paused_approval.thread_id)


@pytest.mark.parametrize("decision", [{}, {"note": "No verdict."}, {"approved": None}], ids=["empty", "no-key", "none"])
def test_an_empty_approval_a_missing_key_or_none_declines(paused_approval, decision):
    resume_thread_with(paused_approval, decision)

    assert thread_state(paused_approval.thread_id)["contact_drafts"] == []
    assert "declined" in last_tool_result(paused_approval.thread_id)


@pytest.mark.parametrize("value", [None, True, "approved", [{"approved": True}]])
def test_a_resume_value_that_is_not_a_decision_object_declines(paused_approval, value):
    resume_thread_with(paused_approval, value)

    assert thread_state(paused_approval.thread_id)["contact_drafts"] == []
    assert "declined" in last_tool_result(paused_approval.thread_id)


@pytest.mark.parametrize(
    "approval",
    [None, {}, {"decided": True}, {"decided": True, "approved": None}, {"decided": True, "approved": "true"}],
    ids=["none", "empty", "no-key", "approved-none", "approved-string"],
)
def test_execute_tools_declines_a_high_risk_call_unless_the_state_holds_an_explicit_approved_true(
    paused_approval, approval
):
    # The executor's own check, whatever request_approval made of the decision: the run goes on
    # to execute_tools with this approval in its state.
    write_thread_state(paused_approval.thread_id, {"approval": approval}, as_node="request_approval")

    run_thread(paused_approval.thread_id, carry_on=True)

    assert thread_state(paused_approval.thread_id)["contact_drafts"] == []
    assert json.loads(last_tool_result(paused_approval.thread_id)) == {
        "status": "declined",
        "reason": "The owner declined this request.",
    }


def test_a_decision_never_leaks_into_the_visitors_next_question(paused_approval):
    staff_decides(str(paused_approval.pk), approved=True)
    # A run that died between staff's decision and the tool leaves the decision in the checkpoint.
    write_thread_state(
        paused_approval.thread_id, {"approval": {"decided": True, "approved": True, "note": None}}, as_node="generate"
    )

    following = run_thread(
        paused_approval.thread_id, arguments={"message": "Please pass another message to the owner."}
    )

    assert [i.value["type"] for i in following.interrupts] == ["staff_approval"]  # paused for a new decision
    assert thread_state(paused_approval.thread_id)["contact_drafts"] == [
        {"tool": "draft_contact_message", "input": DRAFT}
    ]


def test_rejecting_declines_without_running_the_tool_and_the_model_gets_the_note(model_requests):
    approval = paused_for_staff("digital_twin", {"message": HIRE_ME})
    note = "Not taking projects right now — désolé."

    decide(approval, approved=False, note=note)
    run_resumes()

    approval.refresh_from_db()
    assert approval.status == "rejected"
    assert approval.answer.startswith("Sorry, the owner declined")
    requests = model_requests()
    assert len(requests) == 2
    [result] = tool_messages(requests[1])
    assert json.loads(result) == {"status": "declined", "reason": note}
    assert "declined" in result and note in result  # the article: "my note verbatim", in any script
    assert thread_state(approval.thread_id)["contact_drafts"] == []
    assert not ContactMessage.objects.exists()


def test_a_rejection_without_a_note_gives_the_model_the_default_reason(model_requests):
    approval = paused_for_staff("digital_twin", {"message": HIRE_ME})

    decide(approval, approved=False)
    run_resumes()

    approval.refresh_from_db()
    assert approval.status == "rejected"
    [result] = tool_messages(model_requests()[1])
    assert json.loads(result) == {"status": "declined", "reason": "The owner declined this request."}


def test_a_rejection_declines_only_the_high_risk_call_and_a_read_only_call_of_the_same_turn_still_runs(
    model_requests, model_asks_for_notes_and_a_message
):
    approval = paused_for_staff("digital_twin", {"message": HIRE_ME})
    assert len(model_requests()) == 1  # the search waited for the decision too

    decide(approval, approved=False, note="Not now.")
    run_resumes()

    search, draft = (json.loads(result) for result in tool_messages(model_requests()[1]))
    assert search == {"results": ["The owner has built Django services since 2012, mostly APIs and admin tooling."]}
    assert draft == {"status": "declined", "reason": "Not now."}
    assert thread_state(approval.thread_id)["contact_drafts"] == []


def test_the_approval_lists_only_the_high_risk_calls_of_the_turn(model_asks_for_notes_and_a_message):
    paused_for_staff("digital_twin", {"message": HIRE_ME})

    [listed] = waiting_for_staff()

    # request_approval's payload: the read-only search of the same turn is not staff's to decide.
    assert listed.tool_calls == [{"name": "draft_contact_message", "input": DRAFT}]
