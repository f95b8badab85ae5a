"""ASGI entry point. The MCP view is async, so one process holds many waiting tool calls.

/mcp/ is served by a handler without the admin's middleware: the view authenticates by bearer
token, is CSRF-exempt and uses no session, and the sync-only middleware (WhiteNoise) would move
every request into a thread and back, one thread per waiting call. Everything else goes through
the full Django stack.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_project.settings")
django_application = get_asgi_application()

from django.core.handlers.asgi import ASGIHandler  # noqa: E402  (after django.setup())
from django.core.handlers.exception import convert_exception_to_response  # noqa: E402


class MiddlewareFreeHandler(ASGIHandler):
    def load_middleware(self, is_async=False):
        self._view_middleware = []
        self._template_response_middleware = []
        self._exception_middleware = []

        async def checked_host(request):
            # What CommonMiddleware would have checked: the Host header is one of ALLOWED_HOSTS
            # (DisallowedHost becomes a 400).
            request.get_host()
            return await self._get_response_async(request)

        self._middleware_chain = convert_exception_to_response(checked_host)


mcp_application = MiddlewareFreeHandler()


async def application(scope, receive, send):
    if scope["type"] == "http" and scope.get("path") == "/mcp/":
        return await mcp_application(scope, receive, send)
    return await django_application(scope, receive, send)
