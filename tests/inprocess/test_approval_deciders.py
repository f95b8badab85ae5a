"""Who may decide a staff approval, what can be decided, and the audit of who did: staff with
approvals.decide_approval decide, staff without it only look, and anyone else neither; an approval
is decided once, and only while its thread is paused on it; each decision records who took it and
through which door, under a name that outlives their account. (The two-person rule is
test_two_person_rule.py.)"""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from approvals.models import ApprovalRequest
from tests.inprocess.driver import (
    ApprovalConflict,
    NothingPending,
    committing,
    decide,
    expire_approvals,
    forget_thread,
    paused_for_staff,
    run_resumes,
)
from tests.staff_approvals import HIRE_ME

PERMISSIONS = {
    "decider": ["view_approvalrequest", "decide_approval", "view_contactmessage"],
    "viewer": ["view_approvalrequest", "view_contactmessage"],
}


def user(username: str, *, staff: bool = True, permissions: list[str] = PERMISSIONS["decider"]):
    account = get_user_model().objects.create_user(username, password="correct horse battery", is_staff=staff)
    account.user_permissions.set(
        Permission.objects.filter(content_type__app_label="approvals", codename__in=permissions)
    )
    return account


def logged_in(account) -> Client:
    client = Client()
    client.force_login(account)
    return client


def paused() -> ApprovalRequest:
    return paused_for_staff("digital_twin", {"message": HIRE_ME})


def change_url(approval) -> str:
    return reverse("admin:approvals_approvalrequest_change", args=[approval.pk])


def decide_url(approval) -> str:
    return reverse("admin:approvals_approvalrequest_decide", args=[approval.pk])


# --- who may decide --------------------------------------------------------------------------------


def test_staff_without_the_decide_permission_can_look_but_not_decide(model_requests):
    approval = paused()
    client = logged_in(user("linus", permissions=PERMISSIONS["viewer"]))

    page = client.get(change_url(approval))
    with committing():
        refused = client.post(decide_url(approval), {"decision": "approve", "note": ""})

    assert page.status_code == 200 and HIRE_ME in page.content.decode()
    assert 'value="approve"' not in page.content.decode()
    assert refused.status_code == 403
    approval.refresh_from_db()
    assert approval.status == "pending" and approval.decided_at is None
    assert run_resumes() == [] and len(model_requests()) == 1


def test_a_stranger_can_neither_look_nor_decide(model_in_this_process):
    approval = paused()
    client = logged_in(user("mallory", staff=False, permissions=[]))

    with committing():
        responses = (client.get(change_url(approval)), client.post(decide_url(approval), {"decision": "approve"}))

    for response in responses:
        assert response.status_code == 302 and response["Location"].startswith(reverse("admin:login"))
    approval.refresh_from_db()
    assert approval.status == "pending"
    assert run_resumes() == []


# --- what can be decided --------------------------------------------------------------------------


def test_a_decided_approval_cannot_be_decided_again(paused_approval):
    decide(paused_approval, approved=True)

    with pytest.raises(ApprovalConflict, match=r"^This approval was already approved\.$"):
        decide(paused_approval, approved=False, note="Changed my mind.")

    paused_approval.refresh_from_db()
    assert (paused_approval.status, paused_approval.note) == ("approved", "")
    assert run_resumes() == [str(paused_approval.pk)]  # one resume


def test_only_a_thread_that_is_paused_can_be_decided(paused_approval):
    forget_thread(paused_approval.thread_id)  # the checkpoint no longer says the thread is paused

    with pytest.raises(NothingPending):
        decide(paused_approval, approved=True)

    paused_approval.refresh_from_db()
    assert paused_approval.status == "pending" and paused_approval.decided_at is None  # nothing recorded
    assert run_resumes() == []


# --- the audit of who decided ----------------------------------------------------------------------


def test_the_audit_names_who_decided_and_through_which_door(model_in_this_process):
    grace = user("grace")
    in_the_admin = decide(paused(), approved=True, by=grace, door="admin")
    with_a_staff_token = decide(paused(), approved=False, by=grace, door="api")
    with_the_admin_token = decide(paused(), approved=True)
    nobody = paused()
    with time_machine.travel(timezone.now() + timedelta(days=7, minutes=1)):
        expire_approvals()
    nobody.refresh_from_db()

    decided = [in_the_admin, with_a_staff_token, with_the_admin_token, nobody]
    assert [(a.decided_via, a.decided_by, a.decided_by_username) for a in decided] == [
        ("admin", grace, "grace"),
        ("api", grace, "grace"),
        ("api", None, ""),
        ("expired", None, ""),
    ]
    assert [a.decider for a in decided] == [
        "grace (in the Django admin)",
        "grace (through the REST API)",
        "the REST API (admin token)",
        "nobody: it expired",
    ]
    assert all(a.decided_at is not None for a in decided)


def test_the_audit_keeps_who_decided_after_their_account_is_deleted(model_in_this_process):
    decider, viewer = user("grace"), user("linus", permissions=PERMISSIONS["viewer"])
    approval = paused()
    with committing():
        logged_in(decider).post(decide_url(approval), {"decision": "approve", "note": "ok"})
    assert run_resumes() == [str(approval.pk)]

    decider.delete()  # the staff member leaves

    approval.refresh_from_db()
    assert (approval.decided_via, approval.decided_by, approval.decided_by_username) == ("admin", None, "grace")
    page = logged_in(viewer).get(change_url(approval)).content.decode()
    assert "grace (in the Django admin)" in page
