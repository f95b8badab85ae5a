"""The MCP bearer tokens in the admin: staff revoke the tokens they select, and a revoked token
authenticates nobody from then on. Tokens are issued as an operator issues them (`manage.py
mcp_token`), and checked as the endpoint checks a request's (the auth handler)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import RequestFactory

from mcp_gateway.auth import authenticate

TOKENS = "/admin/mcp_gateway/mcptoken/"


@pytest.fixture
def staff_client(client):
    client.force_login(get_user_model().objects.create_superuser("root"))
    return client


def issue(username: str, name: str) -> tuple[int, str]:
    """A token made with `manage.py mcp_token`: its id in the admin, and the raw token (the last line)."""
    out = StringIO()
    call_command("mcp_token", username, name=name, stdout=out)
    user = get_user_model().objects.get(username=username)
    return user.mcp_tokens.get(name=name).pk, out.getvalue().split()[-1]


def caller_of(raw: str) -> str | None:
    found = authenticate(RequestFactory().post("/mcp/", headers={"Authorization": f"Bearer {raw}"}))
    return None if found is None else found.identity


def test_staff_revoke_the_selected_tokens_in_the_admin_and_they_authenticate_nobody(staff_client):
    revoked, revoked_raw = issue("ada", "laptop")
    _, kept_raw = issue("ada", "server")
    assert caller_of(revoked_raw) is not None

    response = staff_client.post(TOKENS, {"action": "revoke", "_selected_action": [revoked]}, follow=True)

    assert "Revoked 1 token(s)." in response.content.decode()
    assert caller_of(revoked_raw) is None
    assert caller_of(kept_raw) == f"user:{get_user_model().objects.get(username='ada').pk}"


def test_a_token_revoked_already_is_not_counted_again(staff_client):
    token, _ = issue("ada", "laptop")
    staff_client.post(TOKENS, {"action": "revoke", "_selected_action": [token]})

    response = staff_client.post(TOKENS, {"action": "revoke", "_selected_action": [token]}, follow=True)

    assert "Revoked 0 token(s)." in response.content.decode()
