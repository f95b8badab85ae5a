"""`make run`'s set-up: the database, a demo staff user and its MCP token, and how to connect."""

import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

from mcp_gateway.models import MCPToken


class Command(BaseCommand):
    help = "Create the demo staff user and its MCP token (once), then print how to connect."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="staff")
        parser.add_argument("--url", default="http://127.0.0.1:8000")
        parser.add_argument(
            "--migrate", action="store_true", help="migrate the database first (one Django start less for make run)"
        )

    def handle(self, *args, username, url, migrate, **options):
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
        token = _demo_token(user, settings.VAR_DIR / "demo_token")
        url = url.rstrip("/")
        self.stdout.write(
            f"\n  Admin:      {url}/admin/   login: {username} / {password_file.read_text()}\n"
            f"  MCP:        {url}/mcp/\n"
            f"  Header:     Authorization: Bearer {token}\n"
            f"  Try it:     .venv/bin/python -m mcp_gateway.demo {url}/mcp/ {token}\n"
        )


def _demo_token(user, token_file) -> str:
    """The token kept in token_file while it is still the user's and not revoked; else a new one."""
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
