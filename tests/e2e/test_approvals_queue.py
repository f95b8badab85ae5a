"""The staff queue in the admin: filters by tool and by how long approvals have waited, the time
left in a warning colour near the deadline, and bulk decisions with one note, each its own
decision."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.test import Client
from django.utils import timezone

from tests.e2e.approvals import paused_thread

QUEUE = "/admin/approvals/approvalrequest/"


@pytest.fixture
def decider(transactional_db):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user("grace", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=["view_approvalrequest", "decide_approval"]))
    client = Client()
    client.force_login(user)
    return client


def test_bulk_approval_asks_for_one_note_then_decides_each_and_names_those_it_could_not(mcp_url, token, decider):
    from approvals.models import ApprovalRequest
    from approvals.resumes import approval_wait_for_answer

    first, _ = paused_thread(mcp_url, token)
    second, _ = paused_thread(mcp_url, token)
    selected = {"action": "approve_selected", ACTION_CHECKBOX_NAME: [str(first.pk), str(second.pk)]}
    everything = f"{QUEUE}?queue=all"

    confirm = decider.post(everything, selected)
    assert confirm.status_code == 200 and "Approve all" in confirm.content.decode()
    first.refresh_from_db()
    assert first.status == "pending"  # nothing is decided before the note is given
    # Meanwhile somebody else rejects the second one.
    ApprovalRequest.objects.filter(pk=second.pk).update(status="rejected", decided_at=timezone.now())

    done = decider.post(everything, {**selected, "apply": "1", "note": "All fine."}, follow=True)

    page = done.content.decode()
    assert "Approved 1 approval(s)" in page and "This approval was already rejected." in page
    first = approval_wait_for_answer(approval_id=first.pk, timeout=60)
    assert (first.status, first.note, first.decided_by_username) == ("approved", "All fine.", "grace")
    assert first.answered_at is not None


def test_the_queue_filters_by_tool_and_by_how_long_an_approval_has_waited(mcp_url, token, decider):
    approval, _ = paused_thread(mcp_url, token)

    by_tool = decider.get(QUEUE, {"tool": "draft_contact_message"}).content.decode()
    other_tool = decider.get(QUEUE, {"tool": "another_tool"}).content.decode()
    assert str(approval.pk) in by_tool and str(approval.pk) not in other_tool
    assert str(approval.pk) not in decider.get(QUEUE, {"waiting": "1h"}).content.decode()
    with time_machine.travel(timezone.now() + timedelta(hours=2)):
        assert str(approval.pk) in decider.get(QUEUE, {"waiting": "1h"}).content.decode()


def test_the_time_left_turns_to_a_warning_within_a_day_of_the_deadline(mcp_url, token, decider):
    approval, _ = paused_thread(mcp_url, token)

    assert "expires-soon" not in decider.get(QUEUE).content.decode()
    with time_machine.travel(approval.expires_at - timedelta(hours=3)):
        assert "expires-soon" in decider.get(QUEUE).content.decode()


def test_a_rejection_ignores_arguments_that_are_not_json_and_deeply_nested_ones_are_refused_not_a_500(
    mcp_url, token, decider
):
    first, _ = paused_thread(mcp_url, token)
    second, _ = paused_thread(mcp_url, token)
    decide = "/admin/approvals/approvalrequest/{}/decide/"

    deep = decider.post(decide.format(first.pk), {"decision": "approve", "arguments": "[" * 100_000}, follow=True)
    assert deep.status_code == 400 and "not valid JSON" in deep.content.decode()
    rejected = decider.post(decide.format(second.pk), {"decision": "reject", "arguments": "{oops"}, follow=True)

    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, second.status) == ("pending", "rejected"), rejected.content.decode()[:300]


def test_a_bulk_note_the_database_cannot_store_decides_nothing(mcp_url, token, decider):
    approval, _ = paused_thread(mcp_url, token)
    selected = {"action": "reject_selected", ACTION_CHECKBOX_NAME: [str(approval.pk)]}

    done = decider.post(QUEUE, {**selected, "apply": "1", "note": "nul\x00here"}, follow=True)

    assert done.status_code == 200 and "Nothing was decided" in done.content.decode()
    approval.refresh_from_db()
    assert approval.status == "pending"
