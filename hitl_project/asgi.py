"""ASGI entry point: the MCP view is async, so one process holds many waiting tool calls."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_project.settings")
application = get_asgi_application()
