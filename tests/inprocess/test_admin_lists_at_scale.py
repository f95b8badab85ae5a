"""The admin's lists and /metrics with many calls stored: a long list shows the planner's estimate
instead of counting its rows, a short one its exact count; the filters read no table to offer their
choices and still filter; the oldest pause is found from the index of asking rounds."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.models import ApprovalRequest
from graph_runtime import admin_paginator
from hitl_project.metrics import WaitingNow
from mcp_gateway.models import Round, ToolCall
from tests.inprocess.driver import asked, call, call_of, caller
from tests.inprocess.test_approval_metrics import pending_approval

TOOL_CALLS = "/admin/mcp_gateway/toolcall/"
APPROVALS = "/admin/approvals/approvalrequest/"


@pytest.fixture
def staff_client(client):
    client.force_login(get_user_model().objects.create_superuser("root"))
    return client


def shown_count(page: str) -> int:
    paginator = re.search(r'<p class="paginator">(.*?)</p>', page, re.S)
    assert paginator is not None
    return int(re.search(r"(\d+) tool call", paginator.group(1)).group(1))


def counts(queries) -> list[str]:
    return [q["sql"] for q in queries if "COUNT(" in q["sql"].upper()]


def test_a_short_tool_call_list_shows_its_exact_count(staff_client):
    for _ in range(3):
        call("choose_region", by=caller("user:1"))

    page = staff_client.get(TOOL_CALLS).content.decode()

    assert shown_count(page) == 3


def test_a_long_tool_call_list_shows_the_planners_estimate_instead_of_counting_its_rows(staff_client, monkeypatch):
    for _ in range(3):
        call("choose_region", by=caller("user:1"))
    monkeypatch.setattr(admin_paginator, "ESTIMATE_ABOVE", 0)
    estimate = admin_paginator.planner_rows(ToolCall.objects.all())

    with CaptureQueriesContext(connection) as queries:
        page = staff_client.get(TOOL_CALLS).content.decode()

    assert counts(queries) == []
    assert shown_count(page) == estimate


def test_the_tool_name_filter_offers_the_served_tools_and_filters_by_one(staff_client):
    call("choose_region", by=caller("user:1"))
    call("greeter", by=caller("user:1"))

    with CaptureQueriesContext(connection) as queries:
        page = staff_client.get(TOOL_CALLS, {"tool_name": "greeter"}).content.decode()

    assert "?tool_name=choose_region" in page and "?tool_name=slow_task" in page
    assert not [q for q in queries if "DISTINCT" in q["sql"].upper()]
    listed = re.findall(r'<td class="field-tool_name[^"]*">([^<]+)</td>', page) or re.findall(
        r'<th class="field-tool_name"><a [^>]*>([^<]+)</a></th>', page
    )
    assert listed == ["greeter"]


def test_the_approvals_tool_filter_finds_the_approvals_that_ask_for_the_tool(staff_client):
    asking = pending_approval()
    other = pending_approval()
    ApprovalRequest.objects.filter(pk=other.pk).update(tool_calls=[{"name": "another_tool", "input": {}}])

    page = staff_client.get(APPROVALS, {"tool": "draft_contact_message"}).content.decode()

    assert f"{asking.pk}/change/" in page and f"{other.pk}/change/" not in page


def test_the_approvals_tool_filter_filters_by_a_tool_its_choices_read_a_minute_ago_do_not_have_yet(staff_client):
    from django.core.cache import cache

    cache.set("approvals:admin-choices:tools", [], 60)  # read before any approval asked for the tool
    asking = pending_approval()
    other = pending_approval()
    ApprovalRequest.objects.filter(pk=other.pk).update(tool_calls=[{"name": "another_tool", "input": {}}])

    page = staff_client.get(APPROVALS, {"tool": "draft_contact_message"}).content.decode()

    assert f"{asking.pk}/change/" in page and f"{other.pk}/change/" not in page
    cache.delete("approvals:admin-choices:tools")


def test_the_paused_call_age_gauge_reads_the_longest_waiting_live_paused_call(db):
    now = timezone.now()
    oldest, newer, expired = (call_of(asked("choose_region")["requestState"]) for _ in range(3))
    for paused, asked_at in ((oldest, now - timedelta(hours=2)), (newer, now - timedelta(hours=1))):
        Round.objects.filter(call=paused, state=Round.State.ASKING).update(finished_at=asked_at)
    Round.objects.filter(call=expired, state=Round.State.ASKING).update(finished_at=now - timedelta(hours=3))
    ToolCall.objects.filter(pk=expired.pk).update(expires_at=now - timedelta(seconds=1))

    gauges = {m.name: m.samples for m in WaitingNow().collect()}

    assert 7190 < gauges["hitl_paused_call_age_seconds"][0].value < 7300


def test_the_approvals_filters_read_their_choices_from_the_table_once_a_minute_not_on_every_load(staff_client):
    from django.core.cache import cache

    cache.delete_many(["approvals:admin-choices:tools", "approvals:admin-choices:policies"])
    pending_approval()
    staff_client.get(APPROVALS)

    with CaptureQueriesContext(connection) as queries:
        page = staff_client.get(APPROVALS).content.decode()

    assert not [q for q in queries if "DISTINCT" in q["sql"].upper()]
    assert "?tool=draft_contact_message" in page
