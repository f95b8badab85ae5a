"""The staff side's metrics: each way an approval leaves the queue is counted by its outcome, and
/metrics reads what waits now from the table."""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.test import TestCase
from django.utils import timezone
from prometheus_client import REGISTRY

from approvals.models import ApprovalRequest
from approvals.services import approval_withdraw, approvals_expire
from hitl_project.metrics import WaitingNow
from mcp_gateway.models import ToolCall


def counted(outcome: str) -> float:
    return REGISTRY.get_sample_value("hitl_approvals_total", {"outcome": outcome}) or 0.0


def pending_approval(*, expires_in: timedelta = timedelta(days=7)) -> ApprovalRequest:
    call = ToolCall.objects.create(
        thread_id=str(uuid.uuid4()),
        graph="digital_twin",
        tool_name="digital_twin",
        arguments_digest="-",
        caller="user:1",
        status=ToolCall.Status.AWAITING_STAFF,
        expires_at=timezone.now() + expires_in,
    )
    return ApprovalRequest.objects.create(
        call=call,
        thread_id=call.thread_id,
        graph="digital_twin",
        interrupt_id=str(uuid.uuid4()),
        tool_calls=[{"name": "draft_contact_message", "input": {}}],
        expires_at=timezone.now() + expires_in,
    )


def test_an_approval_its_client_withdrew_is_counted_as_withdrawn(db):
    approval = pending_approval()
    before = counted("withdrawn")

    with TestCase.captureOnCommitCallbacks(execute=True):
        assert approval_withdraw(call_id=approval.call_id)

    assert counted("withdrawn") == before + 1


def test_approvals_nobody_decided_in_time_are_counted_as_expired(db):
    pending_approval(expires_in=timedelta(seconds=-1))
    pending_approval(expires_in=timedelta(seconds=-1))
    before = counted("expired")

    with TestCase.captureOnCommitCallbacks(execute=True):
        assert approvals_expire() == 2

    assert counted("expired") == before + 2


def test_metrics_read_the_approvals_waiting_now_and_how_long_the_oldest_has_waited(db):
    oldest = pending_approval()
    pending_approval()
    ApprovalRequest.objects.filter(pk=oldest.pk).update(created_at=timezone.now() - timedelta(hours=2))

    gauges = {family.name: family.samples for family in WaitingNow().collect()}

    assert gauges["hitl_approvals_pending"][0].value == 2
    assert 7190 < gauges["hitl_approval_oldest_pending_seconds"][0].value < 7300
