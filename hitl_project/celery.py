"""The Celery app: reads CELERY_* Django settings and finds each app's tasks.py."""

import os

from celery import Celery
from celery.signals import task_prerun, worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_project.settings")

app = Celery("hitl_project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect(weak=False)
def _drop_stale_connections(**kwargs) -> None:
    # With CELERY_DB_REUSE_MAX the connection outlives a task: honour CONN_MAX_AGE and drop a
    # connection the database closed, as Django does at the start of a request.
    from django.db import close_old_connections

    close_old_connections()


@worker_init.connect(weak=False)
def _check_graphs(**kwargs) -> None:
    # Before the worker takes any task: a graph it cannot load would fail every run of it.
    from hitl_project.startup import graphs_or_exit

    graphs_or_exit()
