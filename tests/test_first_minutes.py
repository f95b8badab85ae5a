"""What a new user meets first: the page at the service's address, and what `make run`'s set-up
prints (its run as `make run` runs it is in tests/e2e/test_embedded.py)."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command

from tests.processes import ROOT


def test_the_front_page_says_what_the_service_is_and_links_the_admin_the_api_docs_the_health_check(client):
    page = client.get("/")

    assert page.status_code == 200
    html = " ".join(page.content.decode().split())
    assert "serves LangGraph agents as MCP tools" in html
    for link in ('href="/admin/"', 'href="/api/docs/"', 'href="/api/schema/"', 'href="/health/"'):
        assert link in html
    assert "<code>http://testserver/mcp/</code>" in html
    # Staff members' own API tokens open the API with or without the shared ADMIN_TOKEN.
    assert "a staff member's own API token, made in the admin." in html


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("admin_token", "said"),
    [
        ("", "a staff API token (admin: Knox > Auth tokens > Add); no shared ADMIN_TOKEN is set"),
        ("s3cret", "a staff API token (admin: Knox > Auth tokens > Add) or $ADMIN_TOKEN"),
    ],
)
def test_make_run_prints_the_token_to_export_the_login_the_tools_and_which_tokens_the_rest_api_takes(
    tmp_path, settings, capsys, admin_token, said
):
    settings.VAR_DIR, settings.ADMIN_TOKEN = tmp_path, admin_token

    call_command("demo_setup", "--url", "http://127.0.0.1:8000")

    printed = capsys.readouterr().out
    assert re.search(r"^export MCP_TOKEN=hitl_\S+$", printed, re.M)
    assert re.search(r"Admin: +http://127.0.0.1:8000/admin/ +login: staff / \S+", printed)
    api = "http://127.0.0.1:8000/api"
    assert f"REST API:  on at {api}/admin/approvals (docs: {api}/docs/)\n             with {said}\n" in printed
    assert re.search(r"^    greeter +Relays an MCP elicitation request", printed, re.M)
    assert re.search(r"^    digital_twin +", printed, re.M)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("graphs", "called"),
    [
        ("langgraph.json", '"$MCP_TOKEN" greeter\n'),
        # The guide's first example requires its party size: the call printed gives it one to change.
        ("example_agents/guide/langgraph.json", """"$MCP_TOKEN" booking '{"party_size": 1}'\n"""),
    ],
)
def test_make_runs_first_call_to_try_gives_the_arguments_the_first_tool_requires(
    tmp_path, settings, capsys, graphs, called
):
    settings.VAR_DIR, settings.GRAPHS_CONFIG = tmp_path, ROOT / graphs

    call_command("demo_setup", "--url", "http://127.0.0.1:8000")

    assert f"Try it:    .venv/bin/python -m demo_client http://127.0.0.1:8000/mcp/ {called}" in capsys.readouterr().out
