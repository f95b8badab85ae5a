"""The Django project: settings, URLs, the ASGI entry point, the Celery app, the embedded default's
wiring and the management commands that run both apps' jobs.

Two packages inside it are layers of their own: `graphs/`, the graph runtime both apps use (it
imports neither), and `agents/`, the example agents, user code that only langgraph.json names.
"""

from .celery import app as celery_app

__all__ = ("celery_app",)
