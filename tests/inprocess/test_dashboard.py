"""The staff dashboard: what waits for a decision, and the last weeks' decisions, drawn."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.utils import timezone

from approvals.models import ApprovalRequest

DASHBOARD = "/admin/approvals/approvalrequest/dashboard/"


def approval(status: str, *, created_ago: timedelta, waited: timedelta | None = None) -> ApprovalRequest:
    now = timezone.now()
    row = ApprovalRequest.objects.create(
        thread_id=str(uuid.uuid4()),
        graph="digital_twin",
        interrupt_id=str(uuid.uuid4()),
        tool_calls=[{"name": "draft_contact_message", "input": {}}],
        status=status,
        expires_at=now + timedelta(days=7) - created_ago,
    )
    created = now - created_ago
    decided = created + waited if waited is not None else None
    ApprovalRequest.objects.filter(pk=row.pk).update(created_at=created, decided_at=decided)
    return row


@pytest.fixture
def staff_client(client):
    client.force_login(get_user_model().objects.create_superuser("root"))
    return client


def test_the_dashboard_counts_what_waits_and_draws_each_days_decisions(staff_client):
    approval("pending", created_ago=timedelta(hours=3))
    approval("approved", created_ago=timedelta(minutes=30), waited=timedelta(minutes=1))
    approval("approved", created_ago=timedelta(minutes=30), waited=timedelta(minutes=3))
    approval("rejected", created_ago=timedelta(minutes=30), waited=timedelta(minutes=2))
    approval("expired", created_ago=timedelta(days=8), waited=timedelta(days=7))

    page = staff_client.get(DASHBOARD).content.decode()

    tile = lambda name: re.search(rf'id="tile-{name}"><div class="value">([^<]*)<', page).group(1)  # noqa: E731
    assert tile("pending") == "1"
    assert tile("oldest").startswith("3") and "hour" in tile("oldest")
    assert tile("decided") == "3"
    assert tile("median") == "2 min"  # staff's decisions only: the expired one waited for nobody
    chart = page.split('id="decisions-chart"')[1].split("</svg>")[0]
    assert chart.count('class="approved"') == chart.count('class="rejected"') == chart.count('class="expired"') == 1
    assert '<polyline class="median"' in chart


def test_the_admin_home_page_links_the_dashboard_for_staff_who_see_approvals(client):
    user = get_user_model().objects.create_user("victor", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename="view_approvalrequest"))
    client.force_login(user)

    assert DASHBOARD in client.get("/admin/").content.decode()
    assert client.get(DASHBOARD).status_code == 200


def test_staff_who_may_not_see_approvals_neither_get_the_dashboard_nor_its_link(client):
    client.force_login(get_user_model().objects.create_user("mallory", is_staff=True))

    assert DASHBOARD not in client.get("/admin/").content.decode()
    assert client.get(DASHBOARD).status_code == 403
