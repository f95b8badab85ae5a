from django.core.management.base import BaseCommand

from mcp_gateway.cleanup import remove_expired_calls


class Command(BaseCommand):
    help = "Remove expired tool calls and their LangGraph threads (the Celery beat job, for cron)."

    def handle(self, *args, **options):
        counts = remove_expired_calls()
        self.stdout.write(", ".join(f"{k}: {v}" for k, v in counts.items()))
