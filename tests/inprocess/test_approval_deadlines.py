"""Staff approvals' deadline: a call handed to staff waits seven days; past its deadline an
approval leaves the queue and cannot be decided, and the sweep (beat's, or the `sweep` command
from cron) declines it fail closed, as `expired`, and resumes the agent with the decline."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from approvals.models import ContactMessage
from mcp_gateway.models import ToolCall
from tests.inprocess.driver import (
    ApprovalConflict,
    decide,
    expire_approvals,
    run_resumes,
    sweep_command,
    waiting_for_staff,
)


def test_the_paused_call_waits_for_staff_for_seven_days(paused_approval):
    call = ToolCall.objects.get(thread_id=paused_approval.thread_id)
    assert call.status == ToolCall.Status.AWAITING_STAFF
    assert paused_approval.call_id == call.pk and paused_approval.status == "pending"
    week = timezone.now() + timedelta(days=7)
    assert abs(call.expires_at - week) < timedelta(minutes=1)
    assert abs(paused_approval.expires_at - week) < timedelta(minutes=1)


def test_past_its_deadline_an_approval_leaves_the_queue_before_the_sweep_marks_it_expired(paused_approval):
    assert waiting_for_staff() == [paused_approval]

    with time_machine.travel(paused_approval.expires_at + timedelta(seconds=1)):
        assert waiting_for_staff() == []


def test_a_decision_past_the_deadline_is_refused_before_the_sweep_marks_it_expired(paused_approval, model_requests):
    with time_machine.travel(paused_approval.expires_at + timedelta(seconds=1)):
        with pytest.raises(ApprovalConflict, match=r"^This approval has expired\.$"):
            decide(paused_approval, approved=True)

    paused_approval.refresh_from_db()
    assert paused_approval.status == "pending" and paused_approval.decided_at is None  # the sweep will decline it
    assert run_resumes() == [] and model_requests() == []


def test_an_approval_nobody_decides_within_seven_days_expires_fail_closed_and_the_agent_is_told(paused_approval):
    approval = paused_approval

    with time_machine.travel(timezone.now() + timedelta(days=7, minutes=1)):
        assert expire_approvals() == 1
        with pytest.raises(ApprovalConflict, match="expired"):
            decide(approval, approved=True)
        assert waiting_for_staff() == []

    # The agent is resumed with the decline, so its thread ends honestly; nothing was sent.
    assert run_resumes() == [str(approval.pk)]
    approval.refresh_from_db()
    assert (approval.status, approval.decided_via, approval.decided_by) == ("expired", "expired", None)
    assert "declined" in approval.answer
    assert not ContactMessage.objects.filter(approval=approval).exists()
    assert ToolCall.objects.get(thread_id=approval.thread_id).status == ToolCall.Status.FINISHED


# Committed, as cron's command runs: each job it runs as a Celery task starts by dropping a
# connection that is inside a transaction (hitl_project/celery.py), as the test's own would be.
@pytest.mark.django_db(transaction=True)
def test_without_beat_the_cron_command_expires_approvals_nobody_decided_as_beat_does(paused_approval):
    with time_machine.travel(timezone.now() + timedelta(days=7, minutes=1)):
        out = sweep_command()

    assert "approvals_expired: 1" in out
    assert "resumes_nudged: 0" in out and "rounds_nudged: 0" in out
    assert run_resumes() == [str(paused_approval.pk)]
    paused_approval.refresh_from_db()
    assert (paused_approval.status, paused_approval.decided_via) == ("expired", "expired")
    assert "declined" in paused_approval.answer
