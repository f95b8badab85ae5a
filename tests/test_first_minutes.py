"""What a new user meets first: the page at the service's address, and what `make run`'s set-up
prints (its run as `make run` runs it is in tests/e2e/test_embedded.py)."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command


def test_the_front_page_says_what_the_service_is_and_links_the_admin_the_api_schema_the_health_check(client):
    page = client.get("/")

    assert page.status_code == 200
    html = page.content.decode()
    assert "serves LangGraph agents as MCP tools" in html
    for link in ('href="/admin/"', 'href="/api/schema/"', 'href="/health/"'):
        assert link in html
    assert "<code>http://testserver/mcp/</code>" in html
    assert "off until <code>ADMIN_TOKEN</code> is set" in html


@pytest.mark.django_db
@pytest.mark.parametrize(("admin_token", "said"), [("", "off; set ADMIN_TOKEN to turn it on"), ("s3cret", "on at ")])
def test_make_run_prints_the_token_to_export_the_login_the_tools_and_whether_the_rest_api_is_on(
    tmp_path, settings, capsys, admin_token, said
):
    settings.VAR_DIR, settings.ADMIN_TOKEN = tmp_path, admin_token

    call_command("demo_setup", "--url", "http://127.0.0.1:8000")

    printed = capsys.readouterr().out
    assert re.search(r"^export MCP_TOKEN=hitl_\S+$", printed, re.M)
    assert re.search(r"Admin: +http://127.0.0.1:8000/admin/ +login: staff / \S+", printed)
    assert f"REST API:  {said}" in printed
    assert re.search(r"^    greeter +Relays an MCP elicitation request", printed, re.M)
    assert re.search(r"^    digital_twin +", printed, re.M)
