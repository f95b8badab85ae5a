"""Many paused calls, fast: clone the rows of a few real paused calls in bulk with SQL.

Creating 100,000 paused calls through HTTP takes hours on a 2-core machine, so the bench makes a
few real ones (through the MCP endpoint, the worker and LangGraph) and copies their rows: the
ToolCall, its Rounds, its LangGraph checkpoint rows (`checkpoints`, `checkpoint_blobs`,
`checkpoint_writes`) and any staff ApprovalRequest, each copy with a new call id and thread id.
Columns are read from the catalogue, so a column added later is copied as it is.

A copy's request_state_hash is random: nobody holds a requestState for it (the real seeds can still be
answered). created_at is spread over the past day so lists ordered by it look like real ones.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
from psycopg import sql

MAP = "bench_clone_map"


def _columns(conn: psycopg.Connection, table: str) -> list[str]:
    rows = conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = %s"
        " ORDER BY ordinal_position",
        (table,),
    ).fetchall()
    return [r[0] for r in rows]


def _exists(conn: psycopg.Connection, table: str) -> bool:
    return conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"public.{table}",)).fetchone()[0]


def _copy(conn: psycopg.Connection, table: str, join: str, replace: dict[str, str]) -> int:
    """INSERT INTO table SELECT (each column, or its replacement expression) FROM table JOIN map."""
    cols = _columns(conn, table)
    exprs = [sql.SQL(replace[c]) if c in replace else sql.SQL("t.{}").format(sql.Identifier(c)) for c in cols]
    query = sql.SQL("INSERT INTO {t} ({cols}) SELECT {exprs} FROM {t} t JOIN {map} m ON {join}").format(
        t=sql.Identifier(table),
        cols=sql.SQL(", ").join(map(sql.Identifier, cols)),
        exprs=sql.SQL(", ").join(exprs),
        map=sql.Identifier(MAP),
        join=sql.SQL(join),
    )
    return conn.execute(query).rowcount


SPREAD = "now() - (m.seq * interval '1 second') * (86400.0 / %(total)s)"


def clone_calls(dsn: str, seed_call_ids: list[Any], copies: int, *, batch: int = 10_000, offset: int = 0) -> dict:
    """Add `copies` clones of the seed calls (round-robin), `batch` per transaction."""
    if not seed_call_ids:
        raise ValueError("no seed calls to clone")
    t0 = time.perf_counter()
    rows: dict[str, int] = {}
    with psycopg.connect(dsn) as conn:
        approvals = _exists(conn, "approvals_approvalrequest")
        conn.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {MAP} (src_call uuid, src_thread text, new_call uuid,"
            " new_thread text, seq bigint)"
        )
        total = max(copies + offset, 1)
        done = 0
        while done < copies:
            n = min(batch, copies - done)
            with conn.transaction():
                conn.execute(f"TRUNCATE {MAP}")
                conn.execute(
                    f"""INSERT INTO {MAP}
                        SELECT c.id, c.thread_id, gen_random_uuid(), gen_random_uuid()::text, g
                        FROM generate_series(%(start)s::bigint, %(stop)s::bigint) g
                        JOIN unnest(%(seeds)s::uuid[]) WITH ORDINALITY s(id, ord)
                          ON s.ord = (g %% %(k)s::bigint) + 1
                        JOIN mcp_gateway_toolcall c ON c.id = s.id""",
                    {
                        "start": offset + done,
                        "stop": offset + done + n - 1,
                        "seeds": list(seed_call_ids),
                        "k": len(seed_call_ids),
                    },
                )
                spread = SPREAD.replace("%(total)s", str(total))
                steps = [
                    (
                        "mcp_gateway_toolcall",
                        "t.id = m.src_call",
                        {"id": "m.new_call", "thread_id": "m.new_thread", "created_at": spread, "updated_at": spread},
                    ),
                    (
                        "mcp_gateway_round",
                        "t.call_id = m.src_call",
                        {
                            "id": "gen_random_uuid()",
                            "call_id": "m.new_call",
                            "request_state_hash": "md5(random()::text) || md5(random()::text)",
                            "created_at": spread,
                        },
                    ),
                    ("checkpoints", "t.thread_id = m.src_thread", {"thread_id": "m.new_thread"}),
                    ("checkpoint_blobs", "t.thread_id = m.src_thread", {"thread_id": "m.new_thread"}),
                    ("checkpoint_writes", "t.thread_id = m.src_thread", {"thread_id": "m.new_thread"}),
                ]
                if approvals:
                    steps.append(
                        (
                            "approvals_approvalrequest",
                            "t.call_id = m.src_call",
                            {
                                "id": "gen_random_uuid()",
                                "call_id": "m.new_call",
                                "thread_id": "m.new_thread",
                                "created_at": spread,
                            },
                        )
                    )
                for table, join, replace in steps:
                    rows[table] = rows.get(table, 0) + _copy(conn, table, join, replace)
            done += n
        conn.execute(f"DROP TABLE IF EXISTS {MAP}")
    return {"copies": copies, "rows": rows, "seconds": round(time.perf_counter() - t0, 2)}


# The tables a clone writes into, for VACUUM ANALYZE and the counts.
CLONED_TABLES = (
    "mcp_gateway_toolcall",
    "mcp_gateway_round",
    "checkpoints",
    "checkpoint_blobs",
    "checkpoint_writes",
    "approvals_approvalrequest",
)


def analyze(dsn: str) -> float:
    """VACUUM ANALYZE the tables the clones went into (autovacuum would, a little later), then a
    CHECKPOINT: the copy's dirty pages are written now rather than while rounds are being timed
    (right after a copy of 100,000 calls, a round's p50 was 38 ms; once written, 28 ms)."""
    t0 = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in CLONED_TABLES:
            if _exists(conn, table):
                conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(table)))
        try:
            conn.execute("CHECKPOINT")
        except psycopg.errors.InsufficientPrivilege:
            pass  # a role that may not: the background writer gets there in its own time
    return time.perf_counter() - t0


def table_counts(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        counts = {}
        for table in CLONED_TABLES:
            if _exists(conn, table):
                counts[table] = conn.execute(
                    sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
                ).fetchone()[0]
        return counts


def database_size_mib(dsn: str) -> float:
    with psycopg.connect(dsn) as conn:
        return round(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0] / 2**20, 1)
