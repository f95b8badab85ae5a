from django.core.management.base import BaseCommand
from django.db.models import Count, Q
from django.utils import timezone

from mcp_gateway.models import ToolCall


class Command(BaseCommand):
    help = "Counts of tool calls: paused (waiting for the client), awaiting staff, expired, finished."

    def handle(self, *args, **options):
        now = timezone.now()
        live = Q(expires_at__gt=now)
        counts = ToolCall.objects.aggregate(
            running=Count("pk", filter=live & Q(status=ToolCall.Status.RUNNING)),
            paused=Count("pk", filter=live & Q(status=ToolCall.Status.PAUSED)),
            awaiting_staff=Count("pk", filter=live & Q(status=ToolCall.Status.AWAITING_STAFF)),
            finished=Count("pk", filter=live & Q(status=ToolCall.Status.FINISHED)),
            expired=Count("pk", filter=~live),
        )
        width = max(map(len, counts))
        for name, value in counts.items():
            self.stdout.write(f"{name.replace('_', ' '):{width}}  {value}")
