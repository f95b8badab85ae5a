from django.core.management.base import BaseCommand
from django.utils import timezone

from mcp_gateway.selectors import calls_by_status


class Command(BaseCommand):
    help = "Counts of tool calls: paused (waiting for the client), awaiting staff, expired, finished."

    def handle(self, *args, **options):
        counts = calls_by_status(timezone.now())
        width = max(map(len, counts))
        for name, value in counts.items():
            self.stdout.write(f"{name.replace('_', ' '):{width}}  {value}")
