"""When the process is full: a client is told at once to come back later (HTTP 503 with
Retry-After), never left hanging, never answered with a 500.

- `check_run_queue`: in the embedded default, a first call while EMBEDDED_RUN_QUEUE_MAX runs already
  wait for one of the web process's run threads is refused before anything is written; sending it
  again later is safe. An answer to a round is never refused for load: it resumes a call the
  process took on, and a person gave it. It is claimed and its resume queued past the bound, and
  its request waits for the run as any does, at most MCP_RUN_WAIT_SECONDS, then answers "still
  running" with the round's requestState (docs/performance.md, "The embedded default under load").
- `database_locked`: SQLite's "database is locked", raised when another process (a `manage.py`
  command, a backup) held the file's write lock past the busy timeout. Nothing was written (the
  transaction rolled back), nothing is broken: the same request later succeeds. The MCP view
  (views.py) and the staff views and API (hitl_project/middleware.py) answer it with
  `busy_error`'s 503.
"""

from __future__ import annotations

import sqlite3

from django.db import OperationalError

from graph_runtime import work
from mcp_gateway.protocol import INTERNAL_ERROR, RpcError

# Long enough for a few runs to end and give their threads, or for another process's write to end;
# short enough that a client trying again does not wait for nothing.
RETRY_AFTER_SECONDS = 2


def busy_error(message: str) -> RpcError:
    # -32603 with 503, as the process's cap of streams answers (streams/capacity.py): the process is
    # at capacity, not broken. The transport's status, for every revision.
    return RpcError(
        INTERNAL_ERROR,
        message,
        {"retryAfterSeconds": RETRY_AFTER_SECONDS},
        http_status=503,
        retry_after=RETRY_AFTER_SECONDS,
    )


def check_run_queue() -> None:
    """Raise the 503 when the process cannot take on another run (only the embedded default can be full)."""
    if work.run_queue_full():
        raise busy_error("Server busy: too many runs waiting; try again later")


def database_locked(error: BaseException) -> bool:
    """SQLite's busy timeout, through Django (django.db.OperationalError) or LangGraph's
    checkpointer (sqlite3's own); no other database error."""
    return isinstance(error, (OperationalError, sqlite3.OperationalError)) and "database is locked" in str(error)


def database_busy() -> RpcError:
    return busy_error("Server busy: the database is locked by another writer; try again later")
