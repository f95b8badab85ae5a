from celery import current_app
from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = (
        "Run Celery beat's periodic jobs once, for cron or by hand: remove expired tool calls with their "
        "LangGraph threads, decline approvals nobody decided in time, enqueue again stalled rounds and "
        "lost staff resumes, and escalate approvals pending too long."
    )

    def handle(self, *args, **options):
        # Without beat this command is all there is, so it runs every job of CELERY_BEAT_SCHEDULE,
        # found by name: otherwise an approval past its deadline would stay pending with its thread
        # paused for ever, and a lost run or resume never go on.
        counts: dict[str, int] = {}
        for entry in settings.CELERY_BEAT_SCHEDULE.values():
            counts.update(current_app.tasks[entry["task"]].apply(throw=True).get())
        self.stdout.write(", ".join(f"{k}: {v}" for k, v in counts.items()))
