"""`make run`'s set-up: the graphs and the data directory checked, the database, a demo staff login
and a demo visitor's MCP token, and what a new user needs to start: how to connect, the tools, the
admin login."""

import json
import os
import secrets
import textwrap

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from graph_runtime.registry import GraphsUnavailable, RegisteredGraph, verify
from hitl_project import embedded
from mcp_gateway.models import MCPToken


class Command(BaseCommand):
    help = "Create the demo staff login and the demo visitor's MCP token (once), then print how to connect."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="staff")
        parser.add_argument(
            "--visitor", default="visitor", help="the user, not staff, whose MCP token the clients call with"
        )
        parser.add_argument("--url", default="http://127.0.0.1:8000")
        parser.add_argument(
            "--migrate", action="store_true", help="migrate the database first (one Django start less for make run)"
        )

    def handle(self, *args, username, visitor, url, migrate, **options):
        try:
            graphs = verify().graphs
        except GraphsUnavailable as problems:
            raise CommandError(f"the graphs cannot be served.\n{problems}") from None
        if settings.CELERY_TASK_ALWAYS_EAGER:
            # Before anything is written: a second `make run` on this directory must change nothing.
            try:
                os.close(embedded.lock_data_directory(settings.VAR_DIR))
            except embedded.DataDirectoryInUse as in_use:
                raise CommandError(str(in_use)) from None
        if migrate:
            call_command("migrate", interactive=False, verbosity=0)
        # The embedded default keeps the demo password and token beside its SQLite file, so
        # `make run` prints the same login and token every time, and a client set up once keeps
        # working across restarts.
        password_file = settings.VAR_DIR / "demo_password"
        user, created = get_user_model().objects.get_or_create(
            username=username, defaults={"is_staff": True, "is_superuser": True}
        )
        if created or not password_file.exists():
            _write_private(password_file, secrets.token_urlsafe(12))
            user.set_password(password_file.read_text())
            user.save()
        # The clients call as a visitor, not as the staff login: staff may not approve their own
        # calls (docs/staff-approvals.md), and the printed login must be able to approve the demo's.
        caller, created = get_user_model().objects.get_or_create(username=visitor)
        if created:
            caller.set_unusable_password()  # it calls with its token, and never logs in
            caller.save()
        elif caller.is_staff or caller.pk == user.pk:
            raise CommandError(f"{visitor} is staff, and could not approve its own calls: name another with --visitor")
        token = _demo_token(caller, settings.VAR_DIR / "demo_token")
        url = url.rstrip("/")
        # The API always takes staff members' own tokens; ADMIN_TOKEN adds a shared one.
        tokens = f"a staff API token (made in the admin at {url}/admin/api-tokens/)" + (
            " or $ADMIN_TOKEN" if settings.ADMIN_TOKEN else "; no shared ADMIN_TOKEN is set"
        )
        api = f"on at {url}/api/admin/approvals (docs: {url}/api/docs/)\n             with {tokens}"
        self.stdout.write(
            f"\n  hitl-mcp: LangGraph graphs served as MCP tools. About this service: {url}/\n\n"
            f"  Admin:     {url}/admin/   login: {username} / {password_file.read_text()} (staff: approves the calls)\n"
            f"  MCP:       {url}/mcp/\n"
            f"  Connect:   for the clients' terminal (the README's examples read both); the token is\n"
            f"             {visitor}'s, who is not staff:\n\n"
            f"export MCP_URL={url}/mcp/\n"
            f"export MCP_TOKEN={token}\n\n"
            f"  REST API:  {api}\n"
            f"  Tools ({len(graphs)}, from {settings.GRAPHS_CONFIG}):\n{_tool_lines(graphs)}"
            f'  Try it:    .venv/bin/python -m demo_client "$MCP_URL" "$MCP_TOKEN"{_first_call(graphs)}\n'
            f"  {_older_clients()}\n"
            f"  {_answer_pages()}\n"
        )


def _older_clients() -> str:
    if settings.MCP_OLDER_CLIENTS == "answer":
        return "Older clients (2025 revisions): answer a tool's questions on the call's stream (MCP_OLDER_CLIENTS)."
    return (
        "Older clients (2025 revisions) get an error result when a tool asks; to let them answer:\n"
        "             MCP_OLDER_CLIENTS=answer make run"
    )


def _answer_pages() -> str:
    if settings.MCP_ANSWER_PAGES == "on":
        return (
            "Answer pages: a client that cannot ask a tool's questions gets a link to answer them in a\n"
            "             browser, and hitl_call_status (MCP_ANSWER_PAGES)."
        )
    return (
        "Clients that cannot ask a tool's questions get -32021; to answer them on a page instead:\n"
        "             MCP_ANSWER_PAGES=on make run"
    )


def _tool_lines(graphs: dict[str, RegisteredGraph]) -> str:
    width = max((len(name) for name in graphs), default=0)
    return "".join(
        f"    {name:<{width}}  {textwrap.shorten(graph.description, 100 - width)}\n" for name, graph in graphs.items()
    )


# A stand-in for each required argument of the tool "Try it" calls, by its JSON type, to replace.
PLACEHOLDERS = {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}


def _first_call(graphs: dict[str, RegisteredGraph]) -> str:
    """The first tool's name and, when it requires arguments, a JSON object of them to fill in:
    without them the demo client's call is refused before the graph runs."""
    graph = next(iter(graphs.values()), None)
    if graph is None:
        return ""
    properties = graph.input_schema.get("properties", {})
    required = [name for name in graph.input_schema.get("required", []) if name in properties]
    if not required:
        return f" {graph.name}"
    arguments = {name: PLACEHOLDERS.get(properties[name].get("type"), f"<{name}>") for name in required}
    return f" {graph.name} '{json.dumps(arguments)}'"


def _demo_token(user, token_file) -> str:
    """The token kept in token_file while it is still the user's and not revoked; else a new one
    (a data directory of an earlier version kept the staff login's)."""
    if token_file.exists():
        raw = token_file.read_text().strip()
        if MCPToken.usable(raw).filter(user=user).exists():
            return raw
    _, raw = MCPToken.issue(user, name="make run")
    _write_private(token_file, raw)
    return raw


def _write_private(path, text: str) -> None:
    """Readable by this user alone from the moment it exists: it holds a staff login or token."""
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as file:
        file.write(text)
