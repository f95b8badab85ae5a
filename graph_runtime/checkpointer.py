"""LangGraph's own checkpointers, one per database: PostgresSaver beside Django's PostgreSQL
tables, or a SQLite file for the embedded default.

Each process opens its own pool lazily (a Celery prefork child must not inherit its parent's
sockets), and every caller gets a fresh PostgresSaver over that pool: the saver holds a
threading.Lock around each query, so one shared saver would serialise the whole process.

A leased run's saver is fenced (`fence`, leases.Held.fenced): each checkpoint write is made only
while the run holds its lease. On PostgreSQL the write's own pipeline (one transaction, one round
trip) starts with leases.FENCE, which locks the run's row FOR SHARE and fails unless the row holds
the run's lease: a takeover's UPDATE waits for the write and reads the thread after it, or the
write finds the takeover and nothing of it is made. The SQLite saver checks the lease by the
process's clock only, which the embedded default does not count (leases.py, `_taken_over_elsewhere`):
its one process runs every run, and nothing else can take one over.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import psycopg
from django.conf import settings
from django.db import connections
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from psycopg_pool import ConnectionPool

from graph_runtime.connections import spoke_while_idle
from graph_runtime.leases import REFUSED, LeaseLost

# A run's fence (leases.Held.fenced): entered around each checkpoint write.
Fence = Callable[[], AbstractContextManager[tuple[str, dict[str, Any]]]]

_lock = threading.Lock()
_pools: dict[tuple[int, str], Any] = {}


def uses_postgres(alias: str = "default") -> bool:
    return connections[alias].vendor == "postgresql"


def postgres_dsn(alias: str = "default") -> str:
    """The conninfo of Django's database (the test database during tests)."""
    s = connections[alias].settings_dict
    return _conninfo(
        s["NAME"],
        s.get("USER") or None,
        s.get("PASSWORD") or None,
        s.get("HOST") or None,
        str(s["PORT"]) if s.get("PORT") else None,
    )


@functools.lru_cache(maxsize=8)
def _conninfo(dbname, user, password, host, port) -> str:
    # Built once per database: parsed on every checkpointer() call, it showed in a worker's CPU
    # (docs/performance.md, "Measured choices").
    from psycopg.conninfo import make_conninfo

    return make_conninfo(dbname=dbname, user=user, password=password, host=host, port=port)


class CheckedPool(ConnectionPool):
    """A pool that hands out live connections only, and recovers from a restart at once.

    A connection PostgreSQL dropped (a restart) must not reach a run (which its task would
    retry), the web's thread deletes or the sweep. psycopg_pool's own `check=` callback
    does that, but tests one idle connection per attempt with a backoff of 1, 2, 4, 8, 16 s
    between attempts: after a restart a process with 6 pooled connections waited 28 s for its
    next one, and with 7 got a PoolTimeout. Here the first dead connection makes the pool test
    all its idle ones (`check()`, one round trip each) and the next taken is live.

    A connection is tested with a round trip only when its socket has something to read
    (`spoke_while_idle`, connections.py, which says why that finds a session the server ended): a
    round trip for every connection taken is a query each, and a round takes nine
    (docs/performance.md, "Measured choices").
    """

    def getconn(self, timeout: float | None = None) -> Any:
        conn = super().getconn(timeout)
        if not spoke_while_idle(conn):
            return conn
        try:
            self.check_connection(conn)
        except Exception:
            self.putconn(conn)  # broken: the pool closes it and opens another
            self.check()
            conn = super().getconn(timeout)
        return conn


def _postgres_pool(dsn: str) -> Any:
    from psycopg.rows import dict_row

    key = (os.getpid(), dsn)
    with _lock:
        pool = _pools.get(key)
        if pool is None:
            pool = CheckedPool(
                dsn,
                min_size=1,
                max_size=settings.CHECKPOINT_POOL_MAX_SIZE,
                open=True,
                # What PostgresSaver requires (autocommit, rows as dicts); its few statements run on
                # every step, each prepared as it first runs (DATABASE_PREPARED_STATEMENTS).
                kwargs={
                    "autocommit": True,
                    "prepare_threshold": 0 if settings.DATABASE_PREPARED_STATEMENTS else None,
                    "row_factory": dict_row,
                },
            )
            _pools[key] = pool
    return pool


_sqlite_savers: dict[tuple[int, str], SqliteSaver] = {}


def _sqlite_saver(path: str) -> SqliteSaver:
    key = (os.getpid(), path)
    with _lock:
        saver = _sqlite_savers.get(key)
        if saver is None:
            # SqliteSaver serialises access with its own lock, so one connection per process is safe.
            conn = sqlite3.connect(path, check_same_thread=False, timeout=20)
            conn.execute("PRAGMA journal_mode=WAL")
            saver = SqliteSaver(conn)
            saver.setup()
            _sqlite_savers[key] = saver
    return saver


def checkpointer(alias: str = "default", *, fence: Fence | None = None) -> BaseCheckpointSaver:
    """A saver for one run; `fence`: its writes are made only while the run holds its lease."""
    if uses_postgres(alias):
        pool = _postgres_pool(postgres_dsn(alias))
        return PostgresSaver(pool) if fence is None else FencedPostgresSaver(pool, fence)
    saver = _sqlite_saver(str(settings.CHECKPOINT_SQLITE_PATH))
    return saver if fence is None else FencedSqliteSaver(saver, fence)


class FencedPostgresSaver(PostgresSaver):
    """PostgresSaver whose writes are fenced on a run's lease."""

    def __init__(self, conn: Any, fence: Fence) -> None:
        super().__init__(conn)
        self.fence = fence

    # PostgresSaver makes its writes (put, put_writes) in `_cursor(pipeline=True)`: one pipeline,
    # which PostgreSQL runs as one transaction (a transaction block where psycopg has no pipeline
    # mode). The fence goes first in it; reads are left alone.
    @contextmanager
    def _cursor(self, *, pipeline: bool = False) -> Iterator[Any]:
        if not pipeline:
            with super()._cursor() as cur:
                yield cur
            return
        with self.fence() as (sql, params):
            try:
                with super()._cursor(pipeline=True) as cur:
                    cur.execute(sql, params)
                    yield cur
            except psycopg.errors.InvalidTextRepresentation as exc:
                if REFUSED not in str(exc):
                    raise
                raise LeaseLost(str(exc)) from exc


class FencedSqliteSaver(SqliteSaver):
    """The process's SqliteSaver, its writes fenced on a run's lease (by the clock: the module's
    docstring says why). Its connection and lock are the shared saver's, so the writes of all
    runs stay one at a time."""

    def __init__(self, shared: SqliteSaver, fence: Fence) -> None:
        super().__init__(shared.conn, serde=shared.serde)
        self.lock, self.is_setup, self.fence = shared.lock, True, fence

    # Every write commits in `cursor(transaction=True)`.
    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[Any]:
        if not transaction:
            with super().cursor(transaction=False) as cur:
                yield cur
            return
        with self.fence(), super().cursor() as cur:
            yield cur


def check_fence(fence: Fence) -> None:
    """Raise LeaseLost unless the run still holds its lease now: by the process's clock, then (on
    PostgreSQL) by its row, one statement on the pool, as a fenced write asks it."""
    with fence() as (sql, params):
        if not uses_postgres():
            return
        with _postgres_pool(postgres_dsn()).connection() as conn:
            try:
                conn.execute(sql, params)
            except psycopg.errors.InvalidTextRepresentation as exc:
                if REFUSED not in str(exc):
                    raise
                raise LeaseLost(str(exc)) from exc


def setup_checkpointer(alias: str = "default") -> None:
    """Create the checkpointer's own tables with its own migrations (run from a Django migration)."""
    if uses_postgres(alias):
        from psycopg.rows import dict_row

        # setup() runs CREATE INDEX CONCURRENTLY, which needs autocommit, so not Django's connection.
        with psycopg.connect(postgres_dsn(alias), autocommit=True, row_factory=dict_row) as conn:
            PostgresSaver(conn).setup()
    else:
        _sqlite_saver(str(settings.CHECKPOINT_SQLITE_PATH))


def close_pools() -> None:
    with _lock:
        for pool in _pools.values():
            pool.close()
        _pools.clear()
