"""The `celery worker` and `celery beat` programs (hitl_project/celery.py's app makes them its own):
Celery's, with LOG_FORMAT=json writing nothing but JSON lines (docs/operating.md, "Logs"), and beat
writing no metrics files."""

import logging

from celery import VERSION_BANNER
from celery.apps import beat as celery_beat
from celery.apps import worker as celery_worker
from django.conf import settings

logger = logging.getLogger(__name__)


def _log_format_json() -> bool:
    return settings.LOG_FORMAT == "json"


class Worker(celery_worker.Worker):
    """`celery worker`, which with LOG_FORMAT=json writes nothing but JSON lines (docs/operating.md,
    "Logs"). Celery prints its banner and its shutdown messages ("worker: Warm shutdown") straight to
    the process's stdout, past logging: here they are log lines."""

    def on_before_init(self, quiet=False, **kwargs):
        if _log_format_json():
            from hitl_project import logs

            # Before Celery's own checks: as root it warns (SecurityWarning) before its logging is
            # set up, and Django's is set up later still.
            logs.configure(settings.LOGGING)
            # Every message Celery's signal handlers write to the terminal goes through this one
            # function of its worker module (safe_say).
            celery_worker.safe_say = _say_in_the_log
        super().on_before_init(quiet=quiet, **kwargs)

    def emit_banner(self):
        if not _log_format_json():
            return super().emit_banner()
        queues = sorted(self.app.amqp.queues.consume_from)
        pool = (self.pool_cls if isinstance(self.pool_cls, str) else self.pool_cls.__module__).rsplit(".", 1)[-1]
        logger.info(
            "%s starting: celery %s, %d at once on the %s pool, queues %s",
            self.hostname,
            VERSION_BANNER,
            self.concurrency,
            pool,
            ", ".join(queues),
            extra={"hostname": self.hostname, "concurrency": self.concurrency, "pool": pool, "queues": queues},
        )


def _say_in_the_log(msg: str, f: object = None) -> None:
    logging.getLogger("celery.apps.worker").info(msg.strip())


class Beat(celery_beat.Beat):
    """`celery beat`, which counts nothing, and with LOG_FORMAT=json leaves out the banner Celery
    prints to stdout: its own "beat: Starting..." line says it started."""

    def __init__(self, *args, quiet: bool = False, **kwargs):
        from hitl_project import telemetry

        # Before Django loads the apps (in run()): beat only sends tasks, so it writes no metrics files.
        telemetry.counts_nothing()
        super().__init__(*args, quiet=quiet or _log_format_json(), **kwargs)
