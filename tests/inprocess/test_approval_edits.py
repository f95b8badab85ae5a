"""Staff may edit a high-risk call's arguments before approving it: the edited arguments are what
runs and is archived, the agent's own stay in the record beside them, and edits that do not fit
the tool's parameters are refused with nothing decided. (Edits under the two-person rule are
test_two_person_rule.py.)"""

from __future__ import annotations

import re

import pytest

from approvals.models import ContactMessage
from tests.inprocess.driver import InvalidEdit, decide, run_resumes, thread_state
from tests.staff_approvals import DRAFT


def test_approving_with_edited_arguments_runs_them_and_the_record_keeps_the_original_beside_them(paused_approval):
    edited = {**DRAFT, "message": "Edited before approving."}

    decide(paused_approval, approved=True, arguments=[edited])
    run_resumes()

    paused_approval.refresh_from_db()
    assert "Edited before approving." in paused_approval.answer
    assert ContactMessage.objects.get(approval=paused_approval).input == edited
    assert thread_state(paused_approval.thread_id)["contact_drafts"] == [
        {"tool": "draft_contact_message", "input": edited}
    ]
    assert paused_approval.tool_calls == [{"name": "draft_contact_message", "input": DRAFT}]
    assert paused_approval.edited_tool_calls == [{"name": "draft_contact_message", "input": edited}]


def test_approving_with_the_arguments_unchanged_records_no_edit(paused_approval):
    decide(paused_approval, approved=True, arguments=[DRAFT])
    run_resumes()

    paused_approval.refresh_from_db()
    assert paused_approval.status == "approved" and paused_approval.edited_tool_calls is None
    assert ContactMessage.objects.get(approval=paused_approval).input == DRAFT


def test_a_rejection_ignores_edited_arguments(paused_approval):
    decide(paused_approval, approved=False, arguments=[{"not": "the tool's arguments"}])
    run_resumes()

    paused_approval.refresh_from_db()
    assert paused_approval.status == "rejected" and paused_approval.edited_tool_calls is None
    assert paused_approval.decision == {"approved": False, "note": None}
    assert not ContactMessage.objects.exists()


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ([{**DRAFT, "email": "not an address"}], "do not fit its parameters at email: 'not an address' is not a"),
        ([{"name": "Visitor"}], "do not fit its parameters: 'email' is a required property"),
        ([DRAFT, DRAFT], "Give arguments for each of the 1 tool call(s), in order."),
        (["a string"], "The arguments of draft_contact_message must be a JSON object."),
    ],
)
def test_edited_arguments_that_do_not_fit_the_tools_parameters_are_refused_and_nothing_is_decided(
    paused_approval, arguments, error
):
    with pytest.raises(InvalidEdit, match=re.escape(error)):
        decide(paused_approval, approved=True, arguments=arguments)

    paused_approval.refresh_from_db()
    assert (paused_approval.status, paused_approval.decided_at, paused_approval.edited_tool_calls) == (
        "pending",
        None,
        None,
    )
    assert not paused_approval.signoffs.exists() and run_resumes() == []
