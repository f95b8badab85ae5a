"""The Celery app: reads CELERY_* Django settings and finds each app's tasks.py."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_project.settings")

app = Celery("hitl_project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
