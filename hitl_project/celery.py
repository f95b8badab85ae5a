"""The Celery app: reads CELERY_* Django settings and finds each app's tasks.py."""

import os

import psycopg
from celery import Celery
from celery.signals import task_prerun
from django.db import DatabaseError
from redis.exceptions import RedisError

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


# Task options for work that must not be lost when our own infrastructure (the database, the
# broker) fails for a moment: retried with backoff. An agent's own errors are not retried; they
# become the tool's result.
RETRY_ON_INFRASTRUCTURE = {
    # psycopg's own: LangGraph's checkpointer does not go through Django.
    "autoretry_for": (DatabaseError, RedisError, psycopg.OperationalError),
    "retry_backoff": 1,
    "retry_backoff_max": 30,
    "max_retries": 20,
}
