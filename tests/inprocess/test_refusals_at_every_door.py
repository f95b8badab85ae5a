"""One refusal, one answer: whichever door a refused decision came through (the admin's decision
page, the REST API, an e-mail link's confirmation page, a Slack button), it is answered with the
refusal's one HTTP status and says the same thing (Slack, which shows no status, says it in its
message), and nothing is decided."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from knox.models import AuthToken

from approvals.models import ApprovalPolicy, ApprovalRequest, Outcome
from tests.inprocess.driver import committing, decide, email_link, forget_thread, resumes_enqueued
from tests.inprocess.test_decisions_from_slack_and_email import (
    last_slack_message,
    logged_in,
    path_of,
    paused,
    press,
    staff,
)

SECRET = "slack-test-signing-secret"

# The rule must be committed for the graph's thread to read it.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def slack_app(settings):
    settings.SLACK_SIGNING_SECRET = SECRET
    settings.SITE_URL = "https://hitl.example.com"
    settings.APPROVAL_WAIT_SECONDS = 0


def through(door: str, approval: ApprovalRequest, user) -> tuple[int | None, str]:
    """An approval of `approval` by `user` through `door`: the answer's status (None for Slack,
    which reads none) and what it said."""
    with committing():
        if door == "admin":
            page = logged_in(user).post(
                reverse("admin:approvals_approvalrequest_decide", args=[approval.pk]), {"decision": "approve"}
            )
            return page.status_code, page.content.decode()
        if door == "api":
            answer = logged_in(user).post(
                f"/api/admin/approvals/{approval.pk}",
                json.dumps({"approved": True}),
                content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {AuthToken.objects.create(user)[1]}",
            )
            return answer.status_code, json.dumps(answer.json(), ensure_ascii=False)
        if door == "email":
            page = logged_in(user).post(path_of(email_link(approval)), {"note": ""})
            return page.status_code, page.content.decode()
        press(approval, slack_user=f"U0{user.get_username().upper()}")
    return None, last_slack_message()["text"]


def already_decided(ada, grace) -> tuple[ApprovalRequest, Any]:
    approval = paused()
    decide(approval, approved=True, by=grace, door="admin")
    return approval, "approved"


def already_decided_under_a_policy_requiring_step_up(ada, grace) -> tuple[ApprovalRequest, Any]:
    policy = ApprovalPolicy.objects.create(
        name="Messages to the owner", tool_pattern="draft_contact_message", outcome=Outcome.APPROVE
    )
    approval = paused()
    decide(approval, approved=True, by=grace, door="admin")
    # Step-up required now: the second decision, which brings no proof, is still told it came too late.
    ApprovalPolicy.objects.filter(pk=policy.pk).update(requires_step_up=True)
    return approval, "approved"


def approved_once_already(ada, grace) -> tuple[ApprovalRequest, Any]:
    ApprovalPolicy.objects.create(
        name="Messages to the owner", tool_pattern="draft_contact_message", outcome=Outcome.TWO_APPROVALS
    )
    approval = paused()
    decide(approval, approved=True, by=ada, door="admin")
    return approval, "pending"


def without_the_permission_to_decide(ada, grace) -> tuple[ApprovalRequest, Any]:
    ada.user_permissions.remove(Permission.objects.get(codename="decide_approval"))
    return paused(), "pending"


def not_paused_any_more(ada, grace) -> tuple[ApprovalRequest, Any]:
    approval = paused()
    forget_thread(approval.thread_id)  # the checkpoint no longer says the thread is paused
    return approval, "pending"


def without_step_up(ada, grace) -> tuple[ApprovalRequest, Any]:
    ApprovalPolicy.objects.create(
        name="Messages to the owner",
        tool_pattern="draft_contact_message",
        outcome=Outcome.APPROVE,
        requires_step_up=True,
    )
    return paused(), "pending"


@pytest.mark.parametrize(
    ("refused", "status", "says"),
    [
        (already_decided, 409, "This approval was already approved."),
        (already_decided_under_a_policy_requiring_step_up, 409, "This approval was already approved."),
        (without_the_permission_to_decide, 403, "the permission approvals.decide_approval"),
        (not_paused_any_more, 404, "No pending approval for this thread."),
        (approved_once_already, 403, "You approved this already: another member of staff must give the second"),
        (without_step_up, 403, "requires step-up"),
    ],
    ids=[
        "AlreadyDecided",
        "AlreadyDecided-before-step-up",
        "NotAllowed",
        "NothingPending",
        "SameApprover",
        "StepUpRequired",
    ],
)
def test_every_door_answers_the_same_refusal_with_the_same_status(refused, status, says):
    ada, grace = staff("ada", slack_id="U0ADA"), staff("grace")
    approval, before = refused(ada, grace)
    decided_before = resumes_enqueued()

    answers = {door: through(door, approval, ada) for door in ["admin", "api", "email", "slack"]}

    assert {door: answered for door, (answered, _) in answers.items()} == {
        "admin": status,
        "api": status,
        "email": status,
        "slack": None,
    }
    assert [door for door, (_, said) in answers.items() if says not in said] == []
    approval.refresh_from_db()
    assert approval.status == before and resumes_enqueued() == decided_before
