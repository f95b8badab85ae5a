"""`make run`'s set-up: a demo staff user and a fresh MCP token, and how to connect."""

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from mcp_gateway.models import MCPToken


class Command(BaseCommand):
    help = "Create the demo staff user (once) and a new MCP token, then print how to connect."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="staff")
        parser.add_argument("--url", default="http://127.0.0.1:8000")

    def handle(self, *args, username, url, **options):
        # The embedded default keeps the demo password beside its SQLite file, so `make run`
        # can print the same login every time.
        password_file = settings.VAR_DIR / "demo_password"
        user, created = get_user_model().objects.get_or_create(
            username=username, defaults={"is_staff": True, "is_superuser": True}
        )
        if created or not password_file.exists():
            password_file.write_text(secrets.token_urlsafe(12))
            password_file.chmod(0o600)
            user.set_password(password_file.read_text())
            user.save()
        _, token = MCPToken.issue(user, name="make run")
        url = url.rstrip("/")
        self.stdout.write(
            f"\n  Admin:      {url}/admin/   login: {username} / {password_file.read_text()}\n"
            f"  MCP:        {url}/mcp/\n"
            f"  Header:     Authorization: Bearer {token}\n"
            f"  Try it:     .venv/bin/python -m mcp_gateway.demo {url}/mcp/ {token}\n"
        )
