"""Django project: settings, URLs, the Celery app, and the graph runtime shared by both apps."""

from .celery import app as celery_app

__all__ = ("celery_app",)
