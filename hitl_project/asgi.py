"""ASGI entry point. The MCP view is async, so one process holds many waiting tool calls.

The MCP endpoint (/mcp/) is served by a handler without the admin's middleware: the view
authenticates by bearer token, is CSRF-exempt and uses no session, and the sync-only middleware
(WhiteNoise) would move every request into a thread and back, one thread per waiting call.
Everything else goes through the full Django stack.
"""

import os

import django
from django.core.handlers.asgi import ASGIHandler

from hitl_project import telemetry

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_project.settings")
# What django.core.asgi.get_asgi_application does, with the telemetry in between: after
# django.setup(), which configures logging (so the telemetry's own line, where traces go, is
# written), and before Django's handler is built (the Django instrumentation adds a middleware to it).
django.setup(set_prefix=False)
telemetry.setup("web")
django_application = ASGIHandler()

from django.conf import settings  # noqa: E402  (after django.setup())
from django.core.handlers.exception import convert_exception_to_response  # noqa: E402
from django.urls import reverse  # noqa: E402

from hitl_project import embedded  # noqa: E402
from hitl_project.startup import graphs_or_exit  # noqa: E402

graphs_or_exit()

# The path urls.py gives the MCP view ("/mcp/").
MCP_PATH = reverse("mcp")

if settings.CELERY_TASK_ALWAYS_EAGER:
    # The embedded default: no worker or beat process, so this process does their part.
    embedded.start()


class MiddlewareFreeHandler(ASGIHandler):
    async def __call__(self, scope, receive, send):
        # Without ThreadSensitiveContext: Django gives each request a thread of its own for the
        # sync code it may run (sync middleware and views; here only the request_started and
        # request_finished receivers), started and stopped per request. /mcp/ has neither, so
        # those receivers share asgiref's one thread instead.
        await self.handle(scope, receive, send)

    def load_middleware(self, is_async=False):
        self._view_middleware = []
        self._template_response_middleware = []
        self._exception_middleware = []

        async def checked_host(request):
            # What CommonMiddleware would have checked: the Host header is one of ALLOWED_HOSTS
            # (DisallowedHost becomes a 400).
            request.get_host()
            return await self._get_response_async(request)  # type: ignore[attr-defined]  # not in django-stubs

        self._middleware_chain = convert_exception_to_response(checked_host)


mcp_application = MiddlewareFreeHandler()


def bounded(scope, receive):
    """`receive` for /mcp/ that stops the body at MCP_MAX_BODY_BYTES + 1 bytes. Django's handler
    spools a whole body to disk before any view runs, so the view's 413 came only after the upload:
    now a Content-Length over the limit is not read at all (the view answers 413 from the header),
    and a longer body without one is cut short, which the view sees as too large. What is left of
    the body is drained, never stored."""
    from django.conf import settings

    limit = settings.MCP_MAX_BODY_BYTES
    declared = dict(scope.get("headers", [])).get(b"content-length", b"")
    state = {"size": 0, "cut": declared.isdigit() and int(declared) > limit, "done": False}

    async def receive_bounded():
        if state["done"]:
            while True:  # after the body Django only waits for http.disconnect
                message = await receive()
                if message["type"] != "http.request":
                    return message
        if state["cut"]:
            state["done"] = True
            return {"type": "http.request", "body": b"", "more_body": False}
        message = await receive()
        if message["type"] != "http.request":
            return message
        state["size"] += len(message.get("body", b""))
        if not message.get("more_body", False) or state["size"] > limit:
            state["done"] = True
            return {**message, "more_body": False}
        return message

    return receive_bounded


async def nothing_to_start_or_stop(scope, receive, send) -> None:
    """The lifespan protocol answered for the production web, which has nothing to start or stop:
    Django's handler refuses the scope, and uvicorn then logged "ASGI 'lifespan' protocol appears
    unsupported." in every one of its processes, a line outside the configured log format."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def application(scope, receive, send):
    if scope["type"] == "http" and scope.get("path") == MCP_PATH:
        return await mcp_application(scope, bounded(scope, receive), send)
    if scope["type"] == "lifespan":
        if settings.CELERY_TASK_ALWAYS_EAGER:
            return await embedded.lifespan(scope, receive, send)
        return await nothing_to_start_or_stop(scope, receive, send)
    return await django_application(scope, receive, send)
