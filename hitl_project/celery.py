"""The Celery app: reads CELERY_* Django settings and finds each app's tasks.py."""

import os

from celery import Celery
from celery.signals import after_setup_logger, beat_init, task_prerun, worker_init
from kombu.utils.objects import cached_property

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_project.settings")


class App(Celery):
    """The `celery worker` and `celery beat` programs are this project's (celery_programs.py)."""

    @cached_property
    def Worker(self):
        return self.subclass_with_self("hitl_project.celery_programs:Worker")

    @cached_property
    def Beat(self):
        return self.subclass_with_self("hitl_project.celery_programs:Beat")


app = App("hitl_project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect(weak=False)
def _drop_stale_connections(**kwargs) -> None:
    # With CELERY_DB_REUSE_MAX the connection outlives a task: honour CONN_MAX_AGE and drop a
    # connection the database closed, as Django does at the start of a request.
    from django.db import close_old_connections

    from graph_runtime import log_context

    close_old_connections()
    # A pool thread ran another task before: its lines were about another call.
    log_context.clear()


@worker_init.connect(weak=False)
def _polled_connection_checks(**kwargs) -> None:
    # A task retries what a connection the poll missed fails; a web request could not.
    from hitl_project.postgresql.base import DatabaseWrapper

    DatabaseWrapper.polled_check = True


@worker_init.connect(weak=False)
def _worker_telemetry(**kwargs) -> None:
    from hitl_project import telemetry

    telemetry.setup("worker")


@beat_init.connect(weak=False)
def _beat_telemetry(**kwargs) -> None:
    from hitl_project import telemetry

    telemetry.setup("beat")


@after_setup_logger.connect(weak=False)
def _json_lines(**kwargs) -> None:
    """With LOG_FORMAT=json, the worker's and beat's lines are written by Django's LOGGING
    (hitl_project/settings.py), as the web's are, instead of by the handler Celery just set up:
    every line of every process is then one JSON object, naming the call it is about."""
    from django.conf import settings

    from hitl_project import logs

    if settings.LOG_FORMAT == "json":
        logs.configure(settings.LOGGING)


@worker_init.connect(weak=False)
def _check_graphs(**kwargs) -> None:
    # Before the worker takes any task: a graph it cannot load would fail every run of it.
    from hitl_project.startup import graphs_or_exit

    graphs_or_exit()
