"""WSGI entry point, for servers that speak only WSGI (the Procfile's web process is ASGI: see
asgi.py). Like every process, it refuses to start with graphs it cannot serve."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_project.settings")
application = get_wsgi_application()

from hitl_project.startup import graphs_or_exit  # noqa: E402  (after django.setup())

graphs_or_exit()
