"""Proposed changes to the service, applied from outside for a what-if run (`bench/run.py --what-if`).

No file of the service is edited: each shim is a small subclass or wrapper started in place of the
production entry point, so the bench can show what a proposal would gain before anyone makes it.
Each names the file the real change belongs in.

  nodelay  uvicorn --workers N (N > 1, as in the Procfile) binds the listening socket itself with
           socket.socket(family) (proto 0), and asyncio only sets TCP_NODELAY on accepted sockets
           whose proto is IPPROTO_TCP. Responses are written in two segments (headers, body), so
           Nagle's algorithm holds the body until the client's delayed ACK (~40 ms on Linux).
           Real change: an `--http` protocol class like the one below (or uvloop, which sets
           TCP_NODELAY itself), named in the Procfile.
  dbreuse  Celery's Django fix-up closes every database connection before and after every task
           unless CELERY_DB_REUSE_MAX is set, so each run_round opens a new PostgreSQL connection
           (a backend fork and authentication) and the checkpointer pool's connection is
           re-validated. Real change: hitl_project/settings.py CELERY_DB_REUSE_MAX, and a
           task_prerun handler calling django.db.close_old_connections() in hitl_project/celery.py
           so CONN_MAX_AGE and broken connections are still honoured.
  mcpasync /mcp/ goes through the admin's whole middleware chain, and WhiteNoiseMiddleware is
           sync-only: Django runs the chain above it in a thread and the rest (the view, which waits
           for the worker) through async_to_sync, and every MiddlewareMixin hook below it is another
           sync_to_async hop. The shim routes /mcp/ to a Django ASGIHandler with no middleware.
           Real change: hitl_project/asgi.py (route /mcp/ to such a handler; the view sets its own
           security headers), or serve static files without a sync middleware (e.g. ServeStatic).
  waiter   mcp_gateway/waiter.py opens a Redis connection per waiting call and re-reads the row
           every second for every waiting call. The shim keeps one pattern subscription per process
           and wakes the waiting call's future; the row is read once after subscribing and then
           only every 10 s as a safety net. Real change: mcp_gateway/waiter.py.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time
import uuid

from uvicorn.protocols.http.h11_impl import H11Protocol

# --- nodelay: the web process --------------------------------------------------------------------------


class NoDelayH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with TCP_NODELAY on every accepted connection."""

    def connection_made(self, transport):  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)


# --- waiter: one Redis subscription per web process -------------------------------------------------------


class SharedWaiter:
    """One PSUBSCRIBE hitl:round:* connection per process; each waiting call waits on a future."""

    SAFETY_POLL = 10.0

    def __init__(self, url: str):
        self.url = url
        self.futures: dict[str, set[asyncio.Future]] = {}
        self.ready: asyncio.Future | None = None
        self.task: asyncio.Task | None = None

    async def _listen(self) -> None:
        import redis.asyncio as aioredis

        while True:
            client = aioredis.Redis.from_url(self.url)
            try:
                async with client.pubsub() as pubsub:
                    await pubsub.psubscribe("hitl:round:*")
                    if self.ready is not None and not self.ready.done():
                        self.ready.set_result(True)
                    async for message in pubsub.listen():
                        if message.get("type") != "pmessage":
                            continue
                        round_id = message["channel"].decode().rpartition(":")[2]
                        for future in self.futures.pop(round_id, ()):
                            if not future.done():
                                future.set_result(True)
            except Exception:  # reconnect; waiters fall back on their safety poll meanwhile
                await asyncio.sleep(0.5)
            finally:
                await client.aclose()

    async def _ensure(self) -> None:
        if self.task is None or self.task.done():
            self.ready = asyncio.get_running_loop().create_future()
            self.task = asyncio.create_task(self._listen())
        await asyncio.wait_for(asyncio.shield(self.ready), 5)

    async def wait_for(self, round_id: uuid.UUID, timeout: float) -> bool:
        from mcp_gateway import waiter

        key = str(round_id)
        deadline = time.monotonic() + timeout
        await self._ensure()
        while True:
            future = asyncio.get_running_loop().create_future()
            self.futures.setdefault(key, set()).add(future)
            try:
                # Subscribed before looking, so no notification is missed.
                if not await waiter._running(round_id):
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                try:
                    await asyncio.wait_for(future, min(self.SAFETY_POLL, remaining))
                    return True
                except TimeoutError:
                    continue
            finally:
                waiting = self.futures.get(key)
                if waiting is not None:
                    waiting.discard(future)
                    if not waiting:
                        self.futures.pop(key, None)


def install_waiter() -> None:
    from django.conf import settings

    from mcp_gateway import waiter

    if settings.REDIS_URL:
        shared = SharedWaiter(settings.REDIS_URL)
        waiter.wait_for = shared.wait_for  # server.py calls it through the module


# --- mcpasync: /mcp/ without the admin's middleware -------------------------------------------------------


def _handler_with(middleware: list[str]):
    """A Django ASGIHandler whose middleware chain is `middleware` instead of settings.MIDDLEWARE."""
    from django.conf import settings
    from django.core.handlers.asgi import ASGIHandler

    saved = settings.MIDDLEWARE
    settings.MIDDLEWARE = middleware
    try:
        return ASGIHandler()
    finally:
        settings.MIDDLEWARE = saved


def mcp_router(application, mcp_application):
    async def router(scope, receive, send):
        if scope["type"] == "http" and scope.get("path") == "/mcp/":
            return await mcp_application(scope, receive, send)
        return await application(scope, receive, send)

    return router


def application_factory():
    """The ASGI app with the shims named in BENCH_WHATIF (comma-separated)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_project.settings")
    from hitl_project.asgi import application

    shims = os.environ.get("BENCH_WHATIF", "")
    if "waiter" in shims:
        install_waiter()
    if "mcpasync" in shims:
        # The MCP view needs none of the admin's middleware (sessions, CSRF, auth, messages, static
        # files); WhiteNoise is sync-only, so in the full chain every request crosses into a thread
        # and back (async_to_sync) and each MiddlewareMixin hook is another sync_to_async hop.
        application = mcp_router(application, _handler_with([]))
    return application


# --- dbreuse: the worker process ---------------------------------------------------------------------------


def worker_main(argv: list[str]) -> None:
    """`celery -A hitl_project worker ...` with the dbreuse shim."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_project.settings")
    if "dbreuse" in os.environ.get("BENCH_WHATIF", ""):
        from celery.signals import task_prerun
        from django.conf import settings
        from django.db import close_old_connections

        settings.CELERY_DB_REUSE_MAX = 1_000_000  # the fix-up then closes connections only this rarely
        task_prerun.connect(lambda **kwargs: close_old_connections(), weak=False, dispatch_uid="bench-whatif")
    from hitl_project.celery import app

    app.worker_main(["worker", *argv])


if __name__ == "__main__":
    worker_main(sys.argv[1:])
