from django.core.management.base import BaseCommand

from approvals.tasks import expire_approvals
from mcp_gateway.tasks import remove_expired_calls


class Command(BaseCommand):
    help = (
        "Celery beat's periodic jobs, for cron: remove expired tool calls and their LangGraph threads, "
        "expire approvals nobody decided, and enqueue again stalled rounds and lost staff resumes."
    )

    def handle(self, *args, **options):
        # Without beat this command is all there is, so it runs both of beat's jobs
        # (CELERY_BEAT_SCHEDULE), not only the cleanup: otherwise an approval past its deadline
        # would stay pending with its thread paused for ever, and a lost run or resume never go on.
        counts = {**remove_expired_calls(), **expire_approvals()}
        self.stdout.write(", ".join(f"{k}: {v}" for k, v in counts.items()))
