from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from mcp_gateway.models import MCPToken


class Command(BaseCommand):
    help = "Create an MCP bearer token for a user (created if missing). The raw token is the last line."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="a label for the token, shown in the admin")

    def handle(self, *args, username, name, **options):
        user, created = get_user_model().objects.get_or_create(username=username)
        if created:
            user.set_unusable_password()
            user.save()
            self.stdout.write(f"Created user {username}.")
        _, raw = MCPToken.issue(user, name=name)
        self.stdout.write(f"MCP token for {username} (shown once; only its hash is stored):")
        self.stdout.write(raw)
