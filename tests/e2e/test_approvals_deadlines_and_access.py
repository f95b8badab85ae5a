"""Staff approvals through the REST admin API: past its deadline an approval leaves the API's list
and a decision gets 409; the API answers only its token, with the article's errors. (The sweep
that declines an approval nobody decided is tests/inprocess/test_approval_deadlines.py.)"""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.e2e.approvals import AdminAPI, paused_thread


def test_the_api_lists_no_approval_past_its_deadline(mcp_url, token, admin_api):
    import time_machine

    approval, _ = paused_thread(mcp_url, token)

    with time_machine.travel(approval.expires_at + timedelta(seconds=1)):
        listing = admin_api.pending()

    assert listing.status_code == 200 and listing.json() == []


def test_the_api_refuses_a_decision_past_the_deadline_with_409(mcp_url, token, admin_api, model_requests):
    import time_machine

    approval, thread_id = paused_thread(mcp_url, token)

    with time_machine.travel(approval.expires_at + timedelta(seconds=1)):
        response = admin_api.decide(thread_id, approved=True)

    assert response.status_code == 409
    assert response.json()["detail"] == "This approval has expired."
    approval.refresh_from_db()
    assert approval.status == "pending" and approval.decided_at is None  # the sweep will decline it
    assert len(model_requests()) == 1


def test_the_admin_api_needs_the_admin_token(mcp_url, token, admin_api, live_server):
    _, thread_id = paused_thread(mcp_url, token)

    for api in (AdminAPI(live_server.url, None), AdminAPI(live_server.url, "not-the-admin-token")):
        listing, decision = api.pending(), api.decide(thread_id, approved=True)
        assert listing.status_code == decision.status_code == 401
        assert listing.headers["WWW-Authenticate"] == 'Bearer realm="admin"'
    assert admin_api.pending().status_code == 200


def test_a_thread_with_nothing_pending_gets_404_with_the_articles_error(mcp_url, token, admin_api):
    response = admin_api.decide("no-such-thread", approved=True)

    assert response.status_code == 404
    assert response.json() == {"error": "No pending approval for this thread."}


def test_the_404_is_keyed_on_the_checkpoint_not_on_the_queue(mcp_url, token, admin_api, model_requests):
    from graph_runtime import runner

    approval, thread_id = paused_thread(mcp_url, token)
    runner.delete_thread(thread_id)  # the checkpoint no longer says the thread is paused

    response = admin_api.decide(thread_id, approved=True)

    assert response.status_code == 404
    assert response.json() == {"error": "No pending approval for this thread."}
    approval.refresh_from_db()
    assert approval.status == "pending"  # still queued, but nothing was resumed
    assert len(model_requests()) == 1


def test_without_an_admin_token_configured_the_api_takes_staff_tokens_only(mcp_url, token, settings, live_server):
    _, thread_id = paused_thread(mcp_url, token)
    settings.ADMIN_TOKEN = ""

    anything = AdminAPI(live_server.url, "anything")
    assert anything.pending().status_code == anything.decide(thread_id, approved=True).status_code == 401
    assert "no ADMIN_TOKEN is configured" in anything.pending().json()["detail"]
    nothing = AdminAPI(live_server.url, None)
    assert nothing.pending().status_code == nothing.decide(thread_id, approved=True).status_code == 401


def test_a_decision_without_approved_is_rejected_with_400(mcp_url, token, admin_api):
    _, thread_id = paused_thread(mcp_url, token)

    response = admin_api.decide(thread_id, note="no verdict")

    assert response.status_code == 400
    assert "approved" in response.json()


def test_the_api_takes_only_a_json_boolean_as_the_decision(mcp_url, token, admin_api, model_requests):
    approval, thread_id = paused_thread(mcp_url, token)

    for approved in ("true", "yes", "on", 1, "false", 0):
        response = admin_api.decide(thread_id, approved=approved)
        assert response.status_code == 400, approved
        assert response.json() == {"approved": ["Must be a valid boolean."]}

    approval.refresh_from_db()
    assert approval.status == "pending"
    assert len(model_requests()) == 1


def test_the_openapi_schema_describes_the_admin_api(client):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/json")

    assert response.status_code == 200
    schema = response.json()
    assert {"/api/admin/approvals", "/api/admin/approvals/{ref}"} <= set(schema["paths"])
    assert set(schema["paths"]["/api/admin/approvals/{ref}"]) == {"get", "post"}
    for name in ("adminToken", "staffToken"):
        assert schema["components"]["securitySchemes"][name].items() >= {"type": "http", "scheme": "bearer"}.items()


def test_a_path_under_the_admin_api_that_names_nothing_gets_a_json_404(client, settings):
    settings.ADMIN_TOKEN = "t"
    for path in ("/api/admin/approvals/..%2F..%2Fetc", "/api/admin/nothing", "/api/admin/approvals/a/b"):
        response = client.post(path, data={}, content_type="application/json", HTTP_AUTHORIZATION="Bearer t")
        assert response.status_code == 404, path
        assert response.headers["Content-Type"] == "application/json"
        assert response.json() == {"detail": "Not found."}


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        ('{"approved": true}'.encode("utf-16"), "application/json; charset=utf-16"),
        ('{"approved": true}'.encode("utf-16"), "application/json"),
        (b"\xef\xbb\xbf" + b'{"approved": true}', "application/json"),
    ],
    ids=["utf-16-declared", "utf-16", "utf-8-bom"],
)
def test_a_decision_body_that_is_not_utf_8_json_without_a_byte_order_mark_gets_400(
    client, settings, body, content_type
):
    settings.ADMIN_TOKEN = "t"
    # generic(): post() would re-encode the bytes to the declared charset.
    response = client.generic(
        "POST", "/api/admin/approvals/some-thread", body, content_type=content_type, HTTP_AUTHORIZATION="Bearer t"
    )
    assert response.status_code == 400
    assert "JSON parse error" in response.json()["detail"]
