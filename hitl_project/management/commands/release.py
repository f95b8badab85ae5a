"""The release step (the Procfile's `release`, the compose file's and Kubernetes' release job): run
once per deploy, before the new web, worker and beat processes start."""

import logging
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.utils import OperationalError

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = (
        "Wait for the database, migrate it, and empty METRICS_DIR of the counts of processes that have "
        "stopped. Run once per deploy, before the new processes start."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--wait", type=float, default=60.0, help="seconds to wait for the database to accept connections"
        )

    def handle(self, *args, wait, **options):
        self._wait_for_the_database(wait)
        executor = MigrationExecutor(connection)
        to_apply = len(executor.migration_plan(executor.loader.graph.leaf_nodes()))
        # Quiet, and said in one log line instead: under LOG_FORMAT=json every line is JSON.
        call_command("migrate", interactive=False, verbosity=0)
        removed = self._empty_metrics_dir()
        logger.info(
            "release: %d migration(s) applied; %d metrics file(s) of earlier processes removed", to_apply, removed
        )

    def _wait_for_the_database(self, wait: float) -> None:
        # Started together with its database (a compose file, a Kubernetes job beside a new
        # PostgreSQL), the release step would otherwise fail the deploy while PostgreSQL starts.
        deadline = time.monotonic() + wait
        while True:
            try:
                connection.ensure_connection()
                return
            except OperationalError as error:
                if time.monotonic() >= deadline:
                    raise CommandError(f"the database did not answer within {wait:g} s: {error}") from None
                time.sleep(1)

    def _empty_metrics_dir(self) -> int:
        """prometheus_client's multiprocess mode keeps one set of files per process that ever ran,
        and /metrics adds them all up: they would accumulate with every restart. The release step
        runs while the host's web and worker processes are stopped or about to be replaced, so the
        counters start again from zero, which Prometheus reads as a counter reset."""
        directory = settings.METRICS_DIR
        if not directory.is_dir():
            return 0
        files = list(directory.glob("*.db"))
        for file in files:
            file.unlink(missing_ok=True)
        return len(files)
