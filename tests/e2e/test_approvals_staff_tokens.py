"""The staff API with each staff member's own token: created and revoked in the admin, stored as a
digest, holding its owner's permissions, and named in the audit; approvals addressed by
approval_id as well as thread_id, and read one at a time; the API's docs served locally."""

from __future__ import annotations

import re

import httpx
import pytest
from django.contrib.auth.models import Permission

from tests.e2e.approvals import AdminAPI, paused_thread


def staff_member(username: str, *codenames: str):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username, password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="approvals", codename__in=codenames))
    return user


def token_for(user) -> str:
    from knox.models import AuthToken

    return AuthToken.objects.create(user)[1]


@pytest.fixture
def no_admin_token(settings):
    # Staff tokens work on their own: the shared ADMIN_TOKEN is not needed for them.
    settings.ADMIN_TOKEN = ""


def test_a_staff_token_decides_as_its_owner_and_the_audit_names_them(live_server, mcp_url, token, no_admin_token):
    grace = staff_member("grace", "view_approvalrequest", "decide_approval")
    approval, thread_id = paused_thread(mcp_url, token)

    response = AdminAPI(live_server.url, token_for(grace)).decide(str(approval.pk), approved=True, note="Fine.")

    assert response.status_code in (200, 202), response.text
    assert (response.json()["approval_id"], response.json()["thread_id"]) == (str(approval.pk), thread_id)
    approval.refresh_from_db()
    assert (approval.status, approval.decided_via, approval.decided_by) == ("approved", "api", grace)
    assert approval.decider == "grace (through the REST API)"


def test_a_staff_token_whose_owner_may_not_decide_reads_the_queue_but_cannot_decide(
    live_server, mcp_url, token, no_admin_token
):
    viewer = staff_member("victor", "view_approvalrequest")
    approval, thread_id = paused_thread(mcp_url, token)
    api = AdminAPI(live_server.url, token_for(viewer))

    assert [a["id"] for a in api.pending().json()] == [str(approval.pk)]
    refused = api.decide(thread_id, approved=True)

    assert refused.status_code == 403 and "approvals.decide_approval" in refused.json()["detail"]
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_a_staff_token_of_an_account_that_is_not_staff_is_refused(live_server, no_admin_token):
    from django.contrib.auth import get_user_model

    visitor = get_user_model().objects.create_user("visitor")

    assert AdminAPI(live_server.url, token_for(visitor)).pending().status_code == 403


def test_a_revoked_staff_token_no_longer_authenticates(live_server, settings):
    from knox.models import AuthToken

    settings.ADMIN_TOKEN = "the-shared-admin-token"
    grace = staff_member("grace", "view_approvalrequest")
    raw = token_for(grace)
    api = AdminAPI(live_server.url, raw)
    assert api.pending().status_code == 200

    AuthToken.objects.filter(user=grace).delete()  # what the admin's delete does

    assert api.pending().status_code == 401


def test_one_approval_is_read_by_its_approval_id_or_its_thread_id(live_server, mcp_url, token, admin_api):
    approval, thread_id = paused_thread(mcp_url, token)

    by_id = admin_api.http.get(f"{admin_api.base_url}/{approval.pk}")
    by_thread = admin_api.http.get(f"{admin_api.base_url}/{thread_id}")
    unknown = admin_api.http.get(f"{admin_api.base_url}/00000000-0000-0000-0000-000000000000")

    assert by_id.status_code == by_thread.status_code == 200
    assert by_id.json() == by_thread.json()
    assert by_id.json()["status"] == "pending" and by_id.json()["tool_calls"][0]["name"] == "draft_contact_message"
    assert unknown.status_code == 404 and unknown.json() == {"error": "No approval with this approval_id or thread_id."}


def test_a_staff_token_is_created_in_the_admin_shown_once_and_stored_as_a_digest(live_server, no_admin_token):
    from django.contrib.auth import get_user_model
    from knox.models import AuthToken

    get_user_model().objects.create_superuser("root", password="pw")
    grace = staff_member("grace", "view_approvalrequest")
    admin = httpx.Client(base_url=live_server.url, follow_redirects=True)
    login = admin.get("/admin/login/")
    admin.post(
        "/admin/login/",
        data={"username": "root", "password": "pw", "csrfmiddlewaretoken": login.cookies["csrftoken"]},
        headers={"Referer": f"{live_server.url}/admin/login/"},
    )

    added = admin.post(
        "/admin/knox/authtoken/add/",
        data={"user": grace.pk, "csrfmiddlewaretoken": admin.cookies["csrftoken"]},
        headers={"Referer": f"{live_server.url}/admin/knox/authtoken/add/"},
    )

    raw = re.search(r"TOKEN (staff_\w+)", added.text).group(1)
    stored = AuthToken.objects.get(user=grace)
    assert raw not in stored.digest and stored.digest != raw
    assert AdminAPI(live_server.url, raw).pending().status_code == 200


def test_the_api_docs_are_served_from_the_packages_own_static_files(live_server):
    for page in ("/api/docs/", "/api/redoc/"):
        response = httpx.get(f"{live_server.url}{page}")
        assert response.status_code == 200, page
        assert "drf_spectacular_sidecar" in response.text and "cdn" not in response.text.lower(), page


@pytest.mark.parametrize("admin_token", ["the-shared-admin-token", ""], ids=["admin-token-set", "no-admin-token"])
def test_a_token_that_is_not_utf_8_is_refused_like_any_unknown_token(live_server, settings, admin_token):
    settings.ADMIN_TOKEN = admin_token

    response = httpx.get(f"{live_server.url}/api/admin/approvals", headers={"Authorization": b"Bearer \xff\xfe"})

    assert response.status_code == (401 if admin_token else 403), response.text
    assert set(response.json()) == {"detail"}
