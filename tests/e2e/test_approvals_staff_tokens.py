"""The staff API with each staff member's own token: created, named and revoked on their API
tokens page, shown once, stored as a digest, sent with the Bearer or knox's Token scheme, holding
its owner's permissions, and named in the audit; each refusal saying what was wrong; approvals
addressed by approval_id as well as thread_id, and read one at a time; the API's docs served
locally, saying how to get and send a token."""

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


def logged_in(client, user):
    client.force_login(user)
    return client


def create_token(client, name: str, expires: str = "") -> str:
    """Create a token on the API tokens page; the token the page shows, once."""
    page = client.post(TOKENS_PAGE, {"name": name, "expires": expires}, follow=True)
    assert page.status_code == 200, page.content
    return re.search(r'id="new-token-value" type="text" value="(staff_\w+)"', page.content.decode()).group(1)


TOKENS_PAGE = "/admin/api-tokens/"


@pytest.mark.django_db
def test_staff_create_a_named_token_on_their_tokens_page_shown_once_with_a_copy_button_and_a_warning(client):
    from knox.models import AuthToken

    grace = staff_member("grace", "view_approvalrequest")
    logged_in(client, grace)

    page = client.post(TOKENS_PAGE, {"name": "nightly report script", "expires": "30"}, follow=True).content.decode()

    raw = re.search(r'id="new-token-value" type="text" value="(staff_\w+)"', page).group(1)
    assert "Copy it now: it is shown only this once" in page and 'id="copy-token"' in page
    stored = AuthToken.objects.get(user=grace)
    assert stored.staff_name.name == "nightly report script" and stored.expiry is not None
    assert raw not in stored.digest and stored.digest != raw
    assert client.get("/api/admin/approvals", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200
    # Never again: the list names it and shows how it starts, not the token.
    listed = client.get(TOKENS_PAGE).content.decode()
    assert "nightly report script" in listed and stored.token_key in listed and raw not in listed


@pytest.mark.django_db
def test_the_tokens_page_lists_and_revokes_only_ones_own_tokens(client):
    grace = staff_member("grace", "view_approvalrequest")
    alan = staff_member("alan", "view_approvalrequest")
    alans = create_token(logged_in(client, alan), "alan's script")
    logged_in(client, grace)
    graces = create_token(client, "grace's script")
    from knox.models import AuthToken

    page = client.get(TOKENS_PAGE).content.decode()
    assert "grace&#x27;s script" in page and "alan&#x27;s script" not in page
    # Revoking someone else's token by its digest deletes nothing.
    client.post(TOKENS_PAGE, {"revoke": AuthToken.objects.get(user=alan).digest})
    assert client.post(TOKENS_PAGE, {"revoke": "\x00"}).status_code == 302  # nothing revoked, no 500
    client.post(TOKENS_PAGE, {"revoke": AuthToken.objects.get(user=grace).digest})

    assert client.get("/api/admin/approvals", HTTP_AUTHORIZATION=f"Bearer {graces}").status_code == 401
    assert client.get("/api/admin/approvals", HTTP_AUTHORIZATION=f"Bearer {alans}").status_code == 200
    assert "You have no API tokens yet." in client.get(TOKENS_PAGE).content.decode()


@pytest.mark.django_db
def test_the_tokens_page_needs_a_staff_login_and_knox_admin_makes_no_tokens_for_others(client):
    from django.contrib.auth import get_user_model

    assert client.get(TOKENS_PAGE).status_code == 302  # to the login page
    root = get_user_model().objects.create_superuser("root", password="pw")
    logged_in(client, root)

    assert client.get("/admin/knox/authtoken/add/").status_code == 403
    assert TOKENS_PAGE in client.get("/admin/").content.decode()
    create_token(client, "root's script")
    # Knox's list names each token by its owner and name, for revoking anyone's.
    assert "root&#x27;s script" in client.get("/admin/knox/authtoken/").content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("scheme", ["Bearer", "Token", "token"])
def test_a_staff_token_is_taken_with_the_bearer_scheme_and_with_knoxs_token_scheme(client, settings, scheme):
    settings.ADMIN_TOKEN = ""
    raw = token_for(staff_member("grace", "view_approvalrequest"))

    assert client.get("/api/admin/approvals", HTTP_AUTHORIZATION=f"{scheme} {raw}").status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("admin_token", ["the-shared-admin-token", ""], ids=["admin-token-set", "no-admin-token"])
def test_each_refusal_of_the_staff_api_says_what_was_wrong(client, settings, admin_token):
    from django.contrib.auth import get_user_model

    settings.ADMIN_TOKEN = admin_token
    viewer = token_for(staff_member("victor", "view_approvalrequest"))
    outsider = token_for(get_user_model().objects.create_user("visitor"))
    retired = get_user_model().objects.create_user("retired", is_staff=True, is_active=True)
    retired_token = token_for(retired)
    retired.is_active = False
    retired.save()

    def refusal(header: str | None, method: str = "get") -> tuple[int, str]:
        headers = {"HTTP_AUTHORIZATION": header} if header is not None else {}
        send = getattr(client, method)
        response = send("/api/admin/approvals/a-thread", {"approved": True}, content_type="application/json", **headers)
        return response.status_code, response.json()["detail"]

    assert refusal(None) == (401, "No Authorization header. " + HOW_TO_SEND)
    assert refusal("Basic YWRtaW46YWRtaW4=") == (401, "The Authorization header's scheme is 'Basic'. " + HOW_TO_SEND)
    assert refusal("Bearer ") == (401, "The Authorization header has no token after its scheme. " + HOW_TO_SEND)
    assert refusal("Bearer two words")[0] == 401 and "contains a space" in refusal("Bearer two words")[1]
    status, unknown = refusal("Token staff_not-a-token")
    assert status == 401 and "not a valid staff API token: it was revoked, it expired or it never existed" in unknown
    assert ("no ADMIN_TOKEN is configured" in unknown) == (not admin_token)
    assert refusal(f"Token {retired_token}") == (401, "This staff API token's account is deactivated.")
    assert refusal(f"Token {outsider}") == (
        403,
        "This staff API token belongs to visitor, who is not a member of staff.",
    )
    assert refusal(f"Token {viewer}", "post") == (
        403,
        "This staff API token's account, victor, lacks the permission approvals.decide_approval.",
    )


HOW_TO_SEND = (
    "Send Authorization: Bearer <token>, with your staff API token (create one at /admin/api-tokens/) "
    "or the ADMIN_TOKEN."
)


def test_the_api_docs_say_how_to_get_a_token_and_how_to_send_it(live_server):
    schema = httpx.get(f"{live_server.url}/api/schema/", headers={"Accept": "application/json"}).json()

    assert "/admin/api-tokens/" in schema["info"]["description"]
    assert "Authorization: Bearer staff_" in schema["info"]["description"]
    schemes = schema["components"]["securitySchemes"]
    assert "/admin/api-tokens/" in schemes["staffToken"]["description"]
    assert "Token <token>" in schemes["staffToken"]["description"]


def test_the_api_docs_are_served_from_the_packages_own_static_files(live_server):
    for page in ("/api/docs/", "/api/redoc/"):
        response = httpx.get(f"{live_server.url}{page}")
        assert response.status_code == 200, page
        assert "drf_spectacular_sidecar" in response.text and "cdn" not in response.text.lower(), page


@pytest.mark.parametrize("admin_token", ["the-shared-admin-token", ""], ids=["admin-token-set", "no-admin-token"])
def test_a_token_that_is_not_utf_8_is_refused_like_any_unknown_token(live_server, settings, admin_token):
    settings.ADMIN_TOKEN = admin_token

    response = httpx.get(f"{live_server.url}/api/admin/approvals", headers={"Authorization": b"Bearer \xff\xfe"})

    assert response.status_code == 401, response.text
    assert set(response.json()) == {"detail"}


def test_the_staff_member_whose_mcp_token_made_the_call_cannot_approve_it_over_the_api(
    live_server, mcp_url, make_token, no_admin_token
):
    # The caller's identity crosses the MCP endpoint and the worker's run into the approval.
    ada = staff_member("ada", "view_approvalrequest", "decide_approval")
    approval, _ = paused_thread(mcp_url, make_token("ada"))

    refused = AdminAPI(live_server.url, token_for(ada)).decide(str(approval.pk), approved=True)
    approved = AdminAPI(live_server.url, token_for(staff_member("grace", "decide_approval"))).decide(
        str(approval.pk), approved=True
    )

    assert refused.status_code == 403
    assert refused.json()["detail"].startswith(
        "Nobody may approve their own call: this one was made with your MCP token."
    )
    assert approved.status_code in (200, 202), approved.text
    approval.refresh_from_db()
    assert (approval.requested_by, approval.status, approval.decided_by.username) == (ada, "approved", "grace")
