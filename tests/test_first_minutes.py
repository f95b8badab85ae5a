"""What a new user meets first: the page at the service's address, and what `make run`'s set-up
prints (its run as `make run` runs it is in tests/e2e/test_embedded.py)."""

from __future__ import annotations

import importlib.util
import re
from urllib.parse import urlsplit

import pytest
from django.core.management import call_command
from django.urls import reverse

from tests.processes import ROOT

ADMIN_TOKEN = "first-minutes-admin-token"


def test_the_front_page_says_what_the_service_is_and_links_the_admin_the_api_docs_the_health_check(client):
    page = client.get("/")

    assert page.status_code == 200
    html = " ".join(page.content.decode().split())
    assert "serves LangGraph agents as MCP tools" in html
    for link in ('href="/admin/"', 'href="/api/docs/"', 'href="/api/schema/"', 'href="/health/"'):
        assert link in html
    assert "<code>http://testserver/mcp/</code>" in html
    # Staff members' own API tokens open the API with or without the shared ADMIN_TOKEN.
    assert (
        """a staff member's own API token, made in the admin on <a href="/admin/api-tokens/">Your API tokens</a>."""
        in html
    )


def printed_paths(text: str, base: str) -> set[str]:
    return {urlsplit(url).path for url in re.findall(re.escape(base) + r"/[^\s\"'<>)]*", text)}


def printed_modules(text: str) -> set[str]:
    return set(re.findall(r"python -m ([\w.]+)", text))


def assert_each_exists(paths: set[str], modules: set[str], client, settings) -> None:
    """Each page answers a member of staff (the API with a token), and each `python -m` module
    named can be run."""
    from django.contrib.auth import get_user_model

    settings.ADMIN_TOKEN = ADMIN_TOKEN
    staff = get_user_model().objects.create_superuser("first-minutes-staff", password="x")
    client.force_login(staff)
    assert paths and modules
    for path in paths - {reverse("mcp")}:
        response = client.get(path, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert response.status_code == 200, f"{path}: {response.status_code}"
    for module in modules:
        assert importlib.util.find_spec(module) is not None, module


@pytest.mark.django_db
def test_every_page_and_command_the_front_page_names_exists(client, settings):
    html = client.get("/").content.decode()

    paths = set(re.findall(r'href="(/[^"]*)"', html)) | printed_paths(html, "http://testserver")
    assert_each_exists(paths, printed_modules(html), client, settings)


@pytest.mark.django_db
def test_every_page_and_command_make_run_prints_exists(tmp_path, settings, capsys, client):
    settings.VAR_DIR = tmp_path
    call_command("demo_setup", "--url", "http://testserver")

    printed = capsys.readouterr().out
    assert_each_exists(printed_paths(printed, "http://testserver"), printed_modules(printed), client, settings)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("admin_token", "said"),
    [
        ("", "a staff API token (made in the admin at {api}/admin/api-tokens/); no shared ADMIN_TOKEN is set"),
        ("s3cret", "a staff API token (made in the admin at {api}/admin/api-tokens/) or $ADMIN_TOKEN"),
    ],
)
def test_make_run_prints_the_token_to_export_the_login_the_tools_and_which_tokens_the_rest_api_takes(
    tmp_path, settings, capsys, admin_token, said
):
    settings.VAR_DIR, settings.ADMIN_TOKEN = tmp_path, admin_token

    call_command("demo_setup", "--url", "http://127.0.0.1:8000")

    printed = capsys.readouterr().out
    assert re.search(r"^export MCP_TOKEN=hitl_\S+$", printed, re.M)
    assert re.search(r"^export MCP_URL=http://127.0.0.1:8000/mcp/$", printed, re.M)
    assert re.search(r"Admin: +http://127.0.0.1:8000/admin/ +login: staff / \S+", printed)
    api = "http://127.0.0.1:8000/api"
    said = said.format(api="http://127.0.0.1:8000")
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

    assert f'Try it:    .venv/bin/python -m demo_client "$MCP_URL" {called}' in capsys.readouterr().out


@pytest.mark.django_db
def test_make_runs_token_is_a_visitors_who_is_not_staff_so_the_printed_login_may_approve_its_calls(
    tmp_path, settings, capsys
):
    from mcp_gateway.models import MCPToken

    settings.VAR_DIR = tmp_path
    call_command("demo_setup", "--url", "http://127.0.0.1:8000")

    printed = capsys.readouterr().out
    token = re.search(r"^export MCP_TOKEN=(\S+)$", printed, re.M).group(1)
    login = re.search(r"login: (\S+) / ", printed).group(1)
    caller = MCPToken.usable(token).get().user
    assert caller.username != login
    assert not caller.is_staff and not caller.is_superuser and not caller.has_usable_password()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("on", "printed"),
    [("off", "MCP_ANSWER_PAGES=on make run"), ("on", "gets a link to answer them in a\n")],
)
def test_make_run_says_how_to_turn_answer_pages_on_and_when_they_are(tmp_path, settings, capsys, on, printed):
    settings.VAR_DIR, settings.MCP_ANSWER_PAGES = tmp_path, on

    call_command("demo_setup", "--url", "http://127.0.0.1:8000")

    assert printed in capsys.readouterr().out
