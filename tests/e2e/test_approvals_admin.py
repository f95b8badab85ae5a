"""Staff approvals in the Django admin, with a decider (staff with approvals.decide_approval) and a
viewer (staff who may only look). (Who may decide, and the audit of who did, are
tests/inprocess/test_approval_deciders.py.)"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse

from tests.e2e.approvals import HIRE_ME, paused_thread, record_model_requests, tool_messages, wait_until

PERMISSIONS = {
    "decider": ["view_approvalrequest", "decide_approval", "view_contactmessage"],
    "viewer": ["view_approvalrequest", "view_contactmessage"],
}


def _user(username: str, *, staff: bool, permissions: list[str]):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user(username, password="correct horse battery", is_staff=staff)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="approvals", codename__in=permissions))
    return user


@pytest.fixture
def model_requests(fake_model):
    return record_model_requests(fake_model)


@pytest.fixture
def decider(transactional_db):
    return _user("grace", staff=True, permissions=PERMISSIONS["decider"])


@pytest.fixture
def viewer(transactional_db):
    return _user("linus", staff=True, permissions=PERMISSIONS["viewer"])


def logged_in(user, **kwargs) -> Client:
    client = Client(**kwargs)
    client.force_login(user)
    return client


def change_url(approval) -> str:
    return reverse("admin:approvals_approvalrequest_change", args=[approval.pk])


def decide_url(approval) -> str:
    return reverse("admin:approvals_approvalrequest_decide", args=[approval.pk])


def test_the_queue_lists_pending_calls_newest_first_with_tool_arguments_message_age_and_time_left(
    mcp_url, token, viewer
):
    paused_thread(mcp_url, token, "Please pass a message to the owner: the first one.")
    paused_thread(mcp_url, token, "Please pass a message to the owner: the second one.")

    response = logged_in(viewer).get(reverse("admin:approvals_approvalrequest_changelist"))

    assert response.status_code == 200
    listed = [a.visitor_message for a in response.context["cl"].result_list]
    assert listed == [
        "Please pass a message to the owner: the second one.",
        "Please pass a message to the owner: the first one.",
    ]
    page = response.content.decode()
    for column in ("tool", "arguments", "visitor message", "age", "time left"):
        assert f">{column.capitalize()}<" in page or f">{column}<" in page.lower()
    assert "draft_contact_message" in page and "visitor@example.com" in page
    assert "6\xa0days, 23\xa0hours" in page  # time left of a seven-day approval


def test_decided_calls_leave_the_queue(mcp_url, token, decider):
    approval, _ = paused_thread(mcp_url, token)
    client = logged_in(decider)
    client.post(decide_url(approval), {"decision": "reject", "note": ""})

    response = client.get(reverse("admin:approvals_approvalrequest_changelist"))

    assert list(response.context["cl"].result_list) == []
    decided = client.get(reverse("admin:approvals_approvalrequest_changelist") + "?queue=decided")
    assert [a.pk for a in decided.context["cl"].result_list] == [approval.pk]


def test_past_its_deadline_an_approval_leaves_the_admin_queue_before_the_sweep_marks_it_expired(mcp_url, token, viewer):
    import time_machine

    approval, _ = paused_thread(mcp_url, token)
    client = logged_in(viewer)
    changelist = reverse("admin:approvals_approvalrequest_changelist")

    with time_machine.travel(approval.expires_at + timedelta(seconds=1)):
        queue = client.get(changelist)
        expired = client.get(changelist + "?queue=expired")

    assert list(queue.context["cl"].result_list) == []  # as in the REST API's list: it cannot be decided
    assert [a.pk for a in expired.context["cl"].result_list] == [approval.pk]


def test_a_decider_approves_with_a_note_and_the_answer_appears_once_the_run_lands(
    mcp_url, token, decider, model_requests
):
    approval, _ = paused_thread(mcp_url, token)
    client = logged_in(decider)
    page = client.get(change_url(approval)).content.decode()
    assert 'value="approve"' in page and 'value="reject"' in page and HIRE_ME in page

    response = client.post(decide_url(approval), {"decision": "approve", "note": "Fine by me."}, follow=True)

    assert response.redirect_chain == [(change_url(approval), 302)]
    assert "Approved. The run resumes in the background" in response.content.decode()
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.note) == ("approved", decider, "Fine by me.")
    assert approval.decided_at is not None

    def answered_page() -> str:  # the page reloads itself while the run goes on; so do we
        page = client.get(change_url(approval)).content.decode()
        return page if 'id="final-answer"' in page else ""

    page = wait_until(answered_page)
    assert "Your message was recorded" in page
    assert 'value="approve"' not in page  # decided: no second decision offered
    assert len(model_requests()) == 2


def test_a_rejection_in_the_admin_gives_the_model_the_note_verbatim_as_the_reason(
    mcp_url, token, decider, model_requests
):
    from approvals.models import ContactMessage

    approval, _ = paused_thread(mcp_url, token)
    note = "  Not taking projects right now — try again in spring.  "

    logged_in(decider).post(decide_url(approval), {"decision": "reject", "note": note})
    wait_until(lambda: type(approval).objects.get(pk=approval.pk).answered_at)

    [result] = tool_messages(model_requests()[1])
    assert json.loads(result) == {"status": "declined", "reason": note}
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.note) == ("rejected", decider, note)
    assert approval.answer.startswith("Sorry, the owner declined")
    assert not ContactMessage.objects.exists()


def test_deciding_in_the_admin_needs_the_csrf_token(mcp_url, token, decider):
    approval, _ = paused_thread(mcp_url, token)

    response = logged_in(decider, enforce_csrf_checks=True).post(decide_url(approval), {"decision": "approve"})

    assert response.status_code == 403
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_a_second_decision_in_the_admin_is_refused_with_a_clear_message(mcp_url, token, decider, model_requests):
    approval, _ = paused_thread(mcp_url, token)
    client = logged_in(decider)
    client.post(decide_url(approval), {"decision": "approve", "note": ""})

    response = client.post(decide_url(approval), {"decision": "reject", "note": "No."}, follow=True)

    assert "This approval was already approved." in response.content.decode()
    approval.refresh_from_db()
    assert approval.status == "approved" and approval.note == ""
    wait_until(lambda: type(approval).objects.get(pk=approval.pk).answered_at)
    assert len(model_requests()) == 2


def test_a_thread_that_is_not_paused_cannot_be_approved_in_the_admin(mcp_url, token, decider, model_requests):
    from approvals.refusals import NothingPending
    from graph_runtime import runner

    approval, thread_id = paused_thread(mcp_url, token)
    runner.delete_thread(thread_id)  # the checkpoint no longer says the thread is paused

    response = logged_in(decider).post(decide_url(approval), {"decision": "approve", "note": ""}, follow=True)

    assert NothingPending().said() in response.content.decode()
    approval.refresh_from_db()
    assert approval.status == "pending" and approval.decided_at is None  # nothing was recorded
    assert len(model_requests()) == 1


def test_a_decision_in_the_admin_past_the_deadline_is_refused_before_the_sweep_marks_it_expired(
    mcp_url, token, decider, model_requests
):
    import time_machine

    approval, _ = paused_thread(mcp_url, token)
    client = logged_in(decider)

    with time_machine.travel(approval.expires_at + timedelta(seconds=1)):
        page = client.get(change_url(approval)).content.decode()
        response = client.post(decide_url(approval), {"decision": "approve", "note": ""}, follow=True)

    assert 'value="approve"' not in page  # no decision is offered
    assert "This approval has expired." in response.content.decode()
    approval.refresh_from_db()
    assert approval.status == "pending" and approval.decided_at is None
    assert len(model_requests()) == 1


def test_archived_contact_messages_are_browsable_in_the_admin(mcp_url, token, decider):
    from approvals.models import ApprovalRequest, ContactMessage

    approval, _ = paused_thread(mcp_url, token)
    client = logged_in(decider)
    client.post(decide_url(approval), {"decision": "approve", "note": ""})
    wait_until(lambda: ApprovalRequest.objects.get(pk=approval.pk).answered_at)

    listing = client.get(reverse("admin:approvals_contactmessage_changelist"))
    message = ContactMessage.objects.get(approval=approval)
    detail = client.get(reverse("admin:approvals_contactmessage_change", args=[message.pk]))

    assert listing.status_code == 200 and "visitor@example.com" in listing.content.decode()
    assert detail.status_code == 200 and HIRE_ME in detail.content.decode()
