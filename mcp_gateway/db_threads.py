"""Where the async MCP view does its (synchronous) database work: one bounded pool per process.

Not the event loop's default executor: a server that runs each request in a loop of its own
(Django's WSGI adapter does) would get a new pool per request, and every pool thread keeps a
database connection of its own. One shared pool bounds the connections a web process opens at
MCP_DB_THREADS, however many calls wait.
"""

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections


@cache
def _executor() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=settings.MCP_DB_THREADS, thread_name_prefix="mcp-db")


def in_db_thread(func: Callable[..., Any]) -> Callable[..., Any]:
    """`func` as a coroutine function that runs in the pool."""

    def fresh(*args: Any, **kwargs: Any) -> Any:
        # What Django does at the start of each request: no request cycle runs in these threads,
        # so drop a connection past CONN_MAX_AGE or one that failed before using it again.
        close_old_connections()
        return func(*args, **kwargs)

    async def run(*args: Any, **kwargs: Any) -> Any:
        return await sync_to_async(fresh, thread_sensitive=False, executor=_executor())(*args, **kwargs)

    return run
