"""Request changes: the fourth decision beside approve, edit and reject. Staff say what must change;
nothing runs, the run receives it as its own outcome (not a rejection), the agent revises its call
and asks again, and the revised call is a new approval linked to the first, shown with every attempt
on the decision page and in the REST API."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import reverse

from approvals.models import ApprovalRequest, AuditEvent, ContactMessage
from tests.inprocess.driver import (
    ApprovalConflict,
    ChangesNotGiven,
    committing,
    decide,
    request_changes,
    run_resumes,
    thread_state,
    waiting_for_staff,
)
from tests.staff_approvals import DRAFT, HIRE_ME, tool_messages

CHANGES = "Reply to ada@work.example, not the personal address."
ADMIN_TOKEN = "request-changes-admin-token"


def staff(username: str):
    user = get_user_model().objects.create_user(username, password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=["view_approvalrequest", "decide_approval"]))
    return user


def revised(approval: ApprovalRequest) -> ApprovalRequest:
    return ApprovalRequest.objects.get(revision_of=approval)


def test_requesting_changes_runs_nothing_and_the_agent_receives_them_as_their_own_outcome(
    paused_approval, model_requests
):
    request_changes(paused_approval, CHANGES)
    run_resumes()

    paused_approval.refresh_from_db()
    assert paused_approval.status == "changes_requested" and paused_approval.note == CHANGES
    assert paused_approval.decision == {"approved": False, "note": CHANGES, "changes_requested": True}
    assert not ContactMessage.objects.exists()
    told = tool_messages(model_requests()[-1])
    assert [json.loads(message) for message in told] == [{"status": "changes_requested", "changes": CHANGES}]
    assert "declined" not in told[0]


def test_the_agent_revises_its_call_and_asks_again_on_a_new_approval_linked_to_the_first(paused_approval):
    request_changes(paused_approval, CHANGES)
    run_resumes()

    second = revised(paused_approval)
    assert (second.status, second.revision_of, second.call_id) == ("pending", paused_approval, paused_approval.call_id)
    assert second.tool_calls[0]["input"]["email"] == "ada@work.example"
    assert second.tool_calls[0]["input"] != DRAFT
    assert waiting_for_staff() == [second]
    assert second.attempts() == paused_approval.attempts() == [paused_approval, second]


def test_the_revised_call_runs_once_approved(paused_approval):
    request_changes(paused_approval, CHANGES)
    run_resumes()
    second = revised(paused_approval)

    decide(second, approved=True)
    run_resumes()

    second.refresh_from_db()
    assert second.status == "approved" and second.answer.startswith("Your message was recorded")
    assert [m.input["email"] for m in ContactMessage.objects.all()] == ["ada@work.example"]
    assert thread_state(second.thread_id)["staff_decision"] == {"approved": True, "note": None}


def test_a_revised_call_can_be_sent_back_again_and_every_attempt_stays_linked(paused_approval):
    request_changes(paused_approval, CHANGES)
    run_resumes()
    request_changes(revised(paused_approval), "Shorter, please.")
    run_resumes()

    third = revised(revised(paused_approval))
    assert [a.status for a in third.attempts()] == ["changes_requested", "changes_requested", "pending"]
    assert third.tool_calls[0]["input"]["message"] == f"{HIRE_ME} (Revised: Shorter, please.)"


def test_a_request_for_changes_must_say_what_must_change(paused_approval):
    with pytest.raises(ChangesNotGiven, match="Say what must change"):
        request_changes(paused_approval, "  ")

    paused_approval.refresh_from_db()
    assert paused_approval.status == "pending" and run_resumes() == []


def test_changes_cannot_be_requested_on_an_approval_already_decided(paused_approval):
    decide(paused_approval, approved=False)

    with pytest.raises(ApprovalConflict, match="already rejected"):
        request_changes(paused_approval, CHANGES)


# --- the admin ---------------------------------------------------------------------------------


def test_the_decision_page_requests_changes_and_shows_the_thread_of_attempts(paused_approval, client):
    client.force_login(staff("grace"))
    page = client.get(reverse("admin:approvals_approvalrequest_change", args=[paused_approval.pk])).content.decode()
    assert 'value="request_changes"' in page and 'id="attempts"' not in page

    with committing():
        client.post(
            reverse("admin:approvals_approvalrequest_decide", args=[paused_approval.pk]),
            {"decision": "request_changes", "note": CHANGES},
        )
    run_resumes()
    second = revised(paused_approval)
    page = client.get(reverse("admin:approvals_approvalrequest_change", args=[second.pk])).content.decode()

    assert 'id="attempts"' in page
    assert f"changes requested by grace (in the Django admin): “{CHANGES}”" in page
    assert reverse("admin:approvals_approvalrequest_change", args=[paused_approval.pk]) in page
    assert '<li class="current">This attempt' in page


def test_the_admin_refuses_a_request_for_changes_without_a_note(paused_approval, client):
    client.force_login(staff("grace"))

    with committing():
        response = client.post(
            reverse("admin:approvals_approvalrequest_decide", args=[paused_approval.pk]),
            {"decision": "request_changes", "note": ""},
            follow=True,
        )

    assert "Nothing was decided: Say what must change" in response.content.decode()
    paused_approval.refresh_from_db()
    assert paused_approval.status == "pending" and run_resumes() == []


# --- the REST API ------------------------------------------------------------------------------


@pytest.fixture
def api(client, settings):
    settings.ADMIN_TOKEN = ADMIN_TOKEN
    settings.APPROVAL_WAIT_SECONDS = 0  # the resume is not run here: answer at once

    def call(method, ref, body=None):
        return getattr(client, method)(
            f"/api/admin/approvals/{ref}",
            *([body] if body is not None else []),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {ADMIN_TOKEN}",
        )

    return call


def test_the_api_requests_changes_and_names_the_revised_approval_and_the_attempts(paused_approval, api):
    with committing():
        response = api("post", paused_approval.pk, {"request_changes": CHANGES})
    assert response.status_code == 202 and response.json()["status"] == "changes_requested"
    run_resumes()
    second = revised(paused_approval)

    assert api("get", paused_approval.pk).json()["attempts"] == [str(paused_approval.pk), str(second.pk)]
    detail = api("get", second.pk).json()
    assert (detail["revision_of"], detail["status"]) == (str(paused_approval.pk), "pending")


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"approved": False, "request_changes": CHANGES}, "Give either approved (true or false) or request_changes"),
        ({}, "This field is required: true or false. Or give request_changes"),
        ({"request_changes": " "}, "Say what must change."),
    ],
)
def test_the_api_refuses_a_decision_that_is_not_exactly_one_of_approve_reject_or_request_changes(
    paused_approval, api, body, error
):
    response = api("post", paused_approval.pk, body)

    assert response.status_code == 400 and error in json.dumps(response.json())
    paused_approval.refresh_from_db()
    assert paused_approval.status == "pending"


def test_staff_are_told_of_the_revised_call_with_the_changes_it_answers(paused_approval, settings, mailoutbox):
    settings.APPROVAL_NOTIFY_EMAIL = "owner@example.com"
    request_changes(paused_approval, CHANGES)
    run_resumes()

    told = mailoutbox[-1]
    assert str(revised(paused_approval).pk) in told.body
    assert f'It is the agent\'s revised call, after staff requested changes: "{CHANGES}"' in told.body


def test_the_audit_records_a_request_for_changes_as_its_own_event_and_the_revision_as_a_new_request(paused_approval):
    request_changes(paused_approval, CHANGES)
    run_resumes()
    second = revised(paused_approval)

    sent_back = AuditEvent.objects.get(approval_id=paused_approval.pk, kind="changes_requested")
    assert (sent_back.data["status"], sent_back.data["note"], sent_back.data["digest"]) == (
        "changes_requested",
        CHANGES,
        None,
    )
    assert AuditEvent.objects.filter(approval_id=second.pk, kind="requested").exists()
    assert not AuditEvent.objects.filter(approval_id=paused_approval.pk, kind="decided").exists()
