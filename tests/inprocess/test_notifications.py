"""Staff are told where they are: an e-mail and a signed, Slack-compatible webhook for each
approval queued, each with a link to its decision page, and again, to the escalation address,
for an approval still pending after APPROVAL_ESCALATE_AFTER."""

from __future__ import annotations

import json
import time
import uuid
from datetime import timedelta

import pytest
from django.core import mail
from django.test import TestCase
from django.utils import timezone

from approvals import notifications
from approvals.models import ApprovalRequest
from approvals.services import approvals_escalate
from tests.inprocess.driver import ENQUEUED

SECRET = "shared-webhook-secret"


def approval(*, queued_ago: timedelta) -> ApprovalRequest:
    row = ApprovalRequest.objects.create(
        thread_id=str(uuid.uuid4()),
        graph="digital_twin",
        interrupt_id=str(uuid.uuid4()),
        tool_calls=[{"name": "draft_contact_message", "input": {"message": "Hire me?"}}],
        visitor_message="Please pass this on.",
        expires_at=timezone.now() + timedelta(days=7) - queued_ago,
    )
    ApprovalRequest.objects.filter(pk=row.pk).update(created_at=timezone.now() - queued_ago)
    return row


@pytest.fixture
def escalation(settings):
    settings.SITE_URL = "https://hitl.example.com"
    settings.APPROVAL_ESCALATE_AFTER = timedelta(hours=1)
    settings.APPROVAL_NOTIFY_EMAIL = "owner@example.com"
    settings.APPROVAL_ESCALATION_EMAIL = "lead@example.com"
    settings.APPROVAL_WEBHOOK_URL = "https://hooks.example.com/staff"
    settings.APPROVAL_ESCALATION_WEBHOOK_URL = ""


def test_an_approval_pending_past_the_escalation_time_is_marked_and_staff_are_told_again_with_a_link(db, escalation):
    overdue = approval(queued_ago=timedelta(hours=2))
    recent = approval(queued_ago=timedelta(minutes=5))

    with TestCase.captureOnCommitCallbacks(execute=True):
        assert approvals_escalate() == 1

    overdue.refresh_from_db()
    recent.refresh_from_db()
    assert overdue.escalated_at is not None and recent.escalated_at is None
    (email,) = mail.outbox
    link = f"https://hitl.example.com/admin/approvals/approvalrequest/{overdue.pk}/change/"
    assert email.to == ["lead@example.com"] and email.subject.startswith("Still waiting for a decision")
    assert link in email.body
    ((task, (url, body), _),) = ENQUEUED
    assert (task, url) == (notifications.SEND_WEBHOOK, "https://hooks.example.com/staff")
    sent = json.loads(body)
    assert sent["event"] == "approval_escalated" and sent["url"] == link and link in sent["text"]


def test_an_escalated_approval_is_not_escalated_twice(db, escalation):
    approval(queued_ago=timedelta(hours=2))
    with TestCase.captureOnCommitCallbacks(execute=True):
        assert approvals_escalate() == 1

    with TestCase.captureOnCommitCallbacks(execute=True):
        assert approvals_escalate() == 0
    assert len(mail.outbox) == 1


def test_only_an_approval_staff_can_still_decide_is_escalated(db, escalation):
    decided = approval(queued_ago=timedelta(hours=2))
    ApprovalRequest.objects.filter(pk=decided.pk).update(status=ApprovalRequest.Status.APPROVED)
    withdrawn = approval(queued_ago=timedelta(hours=2))
    ApprovalRequest.objects.filter(pk=withdrawn.pk).update(status=ApprovalRequest.Status.WITHDRAWN)
    past_its_deadline = approval(queued_ago=timedelta(days=7, hours=1))  # the sweep will expire it

    with TestCase.captureOnCommitCallbacks(execute=True):
        assert approvals_escalate() == 0

    assert not ApprovalRequest.objects.filter(escalated_at__isnull=False).exists()
    assert mail.outbox == [] and ENQUEUED == []
    assert past_its_deadline.expires_at < timezone.now()


def test_escalation_set_to_zero_escalates_nothing(db, escalation, settings):
    settings.APPROVAL_ESCALATE_AFTER = timedelta(0)
    approval(queued_ago=timedelta(days=3))

    assert approvals_escalate() == 0


def test_the_webhook_is_a_post_signed_with_the_shared_secret_over_its_timestamp_and_body(
    db, escalation, settings, receiver
):
    settings.APPROVAL_WEBHOOK_SECRET = SECRET
    queued = approval(queued_ago=timedelta(0))
    body = json.dumps(notifications.webhook_body(queued, escalated=False))

    notifications.post_webhook(f"http://127.0.0.1:{receiver.server_port}/hook", body)

    ((headers, received),) = receiver.received
    timestamp = headers.get(notifications.TIMESTAMP_HEADER)
    assert abs(int(timestamp) - time.time()) < 60
    assert headers.get(notifications.SIGNATURE_HEADER) == notifications.signature(SECRET, timestamp, received)
    sent = json.loads(received)
    assert sent["text"].startswith("Approval needed: draft_contact_message")
    assert f"/admin/approvals/approvalrequest/{queued.pk}/change/" in sent["text"]


def test_a_webhook_the_receiver_refuses_raises_so_that_its_task_retries(db, escalation, receiver):
    receiver.status = 503

    with pytest.raises(notifications.WebhookRefused):
        notifications.post_webhook(f"http://127.0.0.1:{receiver.server_port}/hook", "{}")


def test_staff_are_told_which_policy_required_an_approval_and_that_it_needs_two_approvals(db, escalation):
    queued = approval(queued_ago=timedelta(0))
    ApprovalRequest.objects.filter(pk=queued.pk).update(policy_name="Messages to the owner", approvals_required=2)

    with TestCase.captureOnCommitCallbacks(execute=True):
        notifications.approval_requested(approval_id=queued.pk)

    (email,) = mail.outbox
    assert 'Required by the policy "Messages to the owner": it needs two approvals, by two different staff.' in (
        email.body
    )
    ((_, (_, body), _),) = ENQUEUED
    sent = json.loads(body)
    assert (sent["required_by"], sent["approvals_required"]) == ("Messages to the owner", 2)
