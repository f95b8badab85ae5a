"""The two-person rule: a call a policy sends to staff for two approvals runs only once two
different staff members have approved it; the first approval shows as "1 of 2", any rejection
ends it, and nobody approves twice. Each approval is its own locked, audited decision."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import reverse

from approvals.models import ApprovalPolicy, ApprovalRequest, AuditEvent, ContactMessage, Outcome
from tests.inprocess.driver import (
    ApprovalConflict,
    InvalidEdit,
    SameApprover,
    call,
    decide,
    resume_approval,
    resumes_enqueued,
)

CONTACT = "Please pass a message to the owner: can we talk about a Django project?"
ADMIN_TOKEN = "two-person-admin-token"

# The rule must be committed for the graph's thread to read it (test_approval_policies.py).
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def two_approvals() -> ApprovalRequest:
    ApprovalPolicy.objects.create(
        name="Messages to the owner", tool_pattern="draft_contact_message", outcome=Outcome.TWO_APPROVALS
    )
    result = call("digital_twin", {"message": CONTACT})
    return ApprovalRequest.objects.get(pk=result["structuredContent"]["approval_id"])


def staff(username: str):
    user = get_user_model().objects.create_user(username, password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=["view_approvalrequest", "decide_approval"]))
    return user


def approve(approval: ApprovalRequest, user, note: str | None = None, edited_arguments=None) -> ApprovalRequest:
    return decide(approval, approved=True, note=note, by=user, door="admin", arguments=edited_arguments)


def reject(approval: ApprovalRequest, user, note: str | None = None) -> ApprovalRequest:
    return decide(approval, approved=False, note=note, by=user, door="admin")


def resumes() -> list[str]:
    return resumes_enqueued()


def resume(approval: ApprovalRequest) -> ApprovalRequest:
    resume_approval(str(approval.pk))
    approval.refresh_from_db()
    return approval


def test_the_first_approval_leaves_the_request_pending_as_1_of_2_and_nothing_runs(two_approvals):
    approval = approve(two_approvals, staff("grace"))

    approval.refresh_from_db()
    assert (approval.status, approval.progress, approval.decided_at) == ("pending", "1 of 2", None)
    assert resumes() == []


def test_the_second_approval_by_another_staff_member_decides_and_resumes_the_run(two_approvals):
    grace, alan = staff("grace"), staff("alan")
    approve(two_approvals, grace, note="Fine by me.")

    approval = approve(two_approvals, alan)

    assert (approval.status, approval.decided_by, approval.note) == ("approved", alan, "Fine by me.")
    assert resumes() == [str(approval.pk)]
    assert resume(approval).answer.startswith("Your message was recorded")
    assert [(s.username, s.via) for s in approval.signoffs.all()] == [("grace", "admin"), ("alan", "admin")]
    assert ContactMessage.objects.filter(approval=approval).count() == 1


def test_the_same_person_cannot_approve_twice(two_approvals):
    grace = staff("grace")
    approve(two_approvals, grace)

    with pytest.raises(SameApprover, match="You approved this already"):
        approve(two_approvals, grace)

    two_approvals.refresh_from_db()
    assert (two_approvals.status, two_approvals.progress) == ("pending", "1 of 2")


def test_a_rejection_by_anyone_ends_a_request_that_needs_two_approvals(two_approvals):
    approve(two_approvals, staff("grace"))

    approval = reject(two_approvals, staff("alan"), note="Not this one.")

    assert approval.status == "rejected" and resumes() == [str(approval.pk)]
    assert "Not this one." in resume(approval).answer
    assert not ContactMessage.objects.exists()
    with pytest.raises(ApprovalConflict):
        approve(approval, staff("edsger"))


def test_a_rejection_after_a_first_approval_with_edits_keeps_them_in_the_record_and_runs_nothing(two_approvals):
    edited = {**two_approvals.tool_calls[0]["input"], "message": "Edited by the first approver."}
    approve(two_approvals, staff("grace"), edited_arguments=[edited])

    approval = reject(two_approvals, staff("alan"))

    assert approval.edited_tool_calls == [{"name": "draft_contact_message", "input": edited}]
    assert approval.decision == {"approved": False, "note": None}
    assert "declined" in resume(approval).answer and not ContactMessage.objects.exists()


def test_the_admin_token_which_names_nobody_cannot_give_one_of_two_approvals(two_approvals):
    with pytest.raises(SameApprover, match="two named staff"):
        approve(two_approvals, None)


def test_the_second_approver_approves_the_arguments_the_first_approved_and_cannot_change_them(two_approvals):
    original = two_approvals.tool_calls[0]["input"]
    edited = {**original, "message": "Edited by the first approver."}
    approve(two_approvals, staff("grace"), edited_arguments=[edited])

    with pytest.raises(InvalidEdit, match="cannot be changed"):
        approve(two_approvals, staff("alan"), edited_arguments=[{**original, "message": "Changed again."}])
    approval = approve(two_approvals, staff("edsger"), edited_arguments=[edited])

    assert approval.edited_tool_calls == [{"name": "draft_contact_message", "input": edited}]
    assert ContactMessage.objects.get(approval=resume(approval)).input["message"] == "Edited by the first approver."


# --- the admin ---------------------------------------------------------------------------------


def test_the_queue_and_the_decision_page_show_1_of_2_and_who_gave_it(two_approvals, client):
    grace = staff("grace")
    approve(two_approvals, grace)
    client.force_login(staff("alan"))

    queue = client.get(reverse("admin:approvals_approvalrequest_changelist")).content.decode()
    page = client.get(reverse("admin:approvals_approvalrequest_change", args=[two_approvals.pk])).content.decode()

    assert '<strong class="progress">1 of 2</strong>' in queue
    assert "1 of 2 approvals · approved by grace" in page
    assert "<li>grace (the Django admin), " in page  # each approval in the record, with its door
    assert 'value="approve"' in page


def test_the_first_approver_is_told_in_the_admin_that_another_must_approve_and_is_refused_a_second_time(
    two_approvals, client
):
    grace = staff("grace")
    client.force_login(grace)
    decide = reverse("admin:approvals_approvalrequest_decide", args=[two_approvals.pk])

    first = client.post(decide, {"decision": "approve", "note": ""}, follow=True).content.decode()
    again = client.post(decide, {"decision": "approve", "note": ""}, follow=True).content.decode()

    assert "Approved 1 of 2: another member of staff must approve it too before it runs." in first
    assert "You gave the first approval" in first and 'value="approve"' not in first
    assert "You approved this already: another member of staff must give the second approval." in again
    assert two_approvals.signoffs.count() == 1


def test_bulk_approval_gives_one_of_two_approvals_and_reports_each_row_it_could_not_approve(two_approvals, client):
    client.force_login(staff("grace"))
    changelist = reverse("admin:approvals_approvalrequest_changelist")
    bulk = {"action": "approve_selected", "_selected_action": [str(two_approvals.pk)], "apply": "1", "note": ""}

    first = client.post(changelist, bulk, follow=True).content.decode()
    again = client.post(changelist, bulk, follow=True).content.decode()

    assert "approved 1 of 2; another member of staff must approve it too before it runs." in first
    assert "You approved this already" in again
    two_approvals.refresh_from_db()
    assert (two_approvals.status, two_approvals.progress) == ("pending", "1 of 2") and resumes() == []


# --- the REST API ------------------------------------------------------------------------------


@pytest.fixture
def api(client, settings):
    from knox.models import AuthToken

    settings.ADMIN_TOKEN = ADMIN_TOKEN
    settings.APPROVAL_WAIT_SECONDS = 0  # the resume is not run here: answer at once

    def post(ref, body, user=None):
        token = AuthToken.objects.create(user)[1] if user is not None else ADMIN_TOKEN
        return client.post(
            f"/api/admin/approvals/{ref}", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
        )

    return post


def test_the_api_answers_the_first_of_two_approvals_as_pending_1_of_2(two_approvals, api):
    response = api(two_approvals.pk, {"approved": True}, user=staff("grace"))

    assert response.status_code == 202
    body = response.json()
    assert (body["status"], body["progress"], body["approvals_given"], body["approvals_required"]) == (
        "pending",
        "1 of 2",
        1,
        2,
    )
    assert resumes() == []


def test_the_api_refuses_a_second_approval_by_the_same_person_with_403(two_approvals, api):
    grace = staff("grace")
    api(two_approvals.pk, {"approved": True}, user=grace)

    response = api(two_approvals.pk, {"approved": True}, user=grace)

    assert response.status_code == 403
    assert response.json() == {
        "detail": "You approved this already: another member of staff must give the second approval."
    }


def test_the_api_refuses_one_of_two_approvals_by_the_admin_token_with_403(two_approvals, api):
    response = api(two_approvals.pk, {"approved": True})

    assert response.status_code == 403 and "two named staff" in response.json()["detail"]


def test_the_audit_records_each_of_two_approvals_and_the_first_approvers_edit(two_approvals):
    edited = {**two_approvals.tool_calls[0]["input"], "message": "Shorter."}
    approve(two_approvals, staff("grace"), edited_arguments=[edited])
    approve(two_approvals, staff("alan"))

    two_approvals.refresh_from_db()
    events = AuditEvent.objects.filter(approval_id=two_approvals.pk)
    assert [(event.kind, event.actor) for event in events] == [
        ("requested", ""),
        ("edited", "grace"),
        ("signed_off", "grace"),
        ("decided", "alan"),
    ]
    # Both approved the same action: the edited one, with a digest of its own.
    assert events[2].data["digest"] == events[3].data["digest"] == two_approvals.approved_digest
    assert two_approvals.approved_digest != two_approvals.digest
