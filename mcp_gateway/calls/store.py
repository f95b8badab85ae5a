"""The round's hot state changes and reads, in SQL: each change that every pause-and-resume round
makes is defined here once, as named statements with named parameters, and nowhere else (the ORM
spent more CPU building them than the database spent running them: docs/performance.md). One module,
longer than most, so that each statement reads beside the parameters it takes, the rows it returns
and the two databases' ways of running it.

A change of several rows is a `Change`: its parts, each a statement named as the table of rows it
returns, and a last statement that may read them. On PostgreSQL they run as one statement, a
data-modifying WITH: its parts run on one snapshot, all or none, and a conditional UPDATE that
another transaction's UPDATE got to first waits for it, then matches nothing. On SQLite (the
embedded default), which has no data-modifying WITH, they run one after the other in one
transaction, each part's rows handed to the next as a WITH of their values; the transaction takes
the database's write lock as it begins (settings.py), so nothing else changes a row in between, and
a part that locks its rows (a `Locking`: FOR UPDATE on PostgreSQL) has no row lock to take.
Either way a part that matched nothing leaves the parts after it nothing to match: every later part
is conditional on the rows of the one before.

models.py names the states; tests/inprocess/test_store_parity.py runs every change on both
databases and compares the rows.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from django.db import connection, models, transaction
from django.utils import timezone

from graph_runtime import leases
from mcp_gateway import lifetimes
from mcp_gateway.models import Lease, Outcome, Round, ToolCall

CALLS, ROUNDS = ToolCall._meta.db_table, Round._meta.db_table


def _columns(model: type[models.Model], alias: str) -> str:
    return ", ".join(f"{alias}.{f.column}" for f in model._meta.concrete_fields)


def _insert(model: type[models.Model], prefix: str) -> tuple[str, str]:
    """The column list of `model` and the named parameters of a new row of it, `prefix` first."""
    columns = [str(f.column) for f in model._meta.concrete_fields]
    return ", ".join(columns), ", ".join(f"%({prefix}{c})s" for c in columns)


@dataclass(frozen=True)
class Locking:
    """A SELECT whose rows its transaction locks, where the database has row locks (PostgreSQL's
    FOR UPDATE). SQLite has none and needs none: its transaction holds the whole file's write lock
    from its start (settings.py)."""

    sql: str

    def text(self, row_locks: bool) -> str:
        return f"{self.sql} FOR UPDATE" if row_locks else self.sql


Statement = str | Locking


def _text(statement: Statement, row_locks: bool) -> str:
    """`statement` as the database runs it: with the row lock a Locking takes where there is one."""
    return statement.text(row_locks) if isinstance(statement, Locking) else statement


@dataclass(frozen=True)
class Change:
    """Statements that make one change together: `parts`, (name, statement) each, whose rows the
    parts after it and `last` read as a table of that name; `last` says what the change returns."""

    parts: tuple[tuple[str, Statement], ...]
    last: Statement


# --- the statements -------------------------------------------------------------------------------

ROUND_WITH_CALL = f"""
SELECT {_columns(Round, "r")}, {_columns(ToolCall, "c")}
FROM {ROUNDS} r JOIN {CALLS} c ON c.id = r.call_id WHERE r.id = %(round_id)s
"""

# A round never leased (RUNNING, leased_until NULL): leased until `until`. take_lease tells the
# other cases apart (a lease run out, held, no longer running).
TAKE_FIRST_LEASE = f"""
UPDATE {ROUNDS} SET leased_until = %(until)s WHERE id = %(round_id)s AND state = 'running' AND leased_until IS NULL
RETURNING *
"""

# The leased round with its call, read after the lease: the call's cancel flag is the one the run
# must start with.
LEASED_WITH_CALL = f"""
SELECT {_columns(Round, "leased")}, {_columns(ToolCall, "c")}
FROM leased JOIN {CALLS} c ON c.id = leased.call_id
"""

# The call's row is locked first, before the round's is written: the cancel flag the round's
# record is conditional on is the latest one, and a cancel (ToolCall.request_cancel) waits for it.
LOCK_CALL = Locking(f"SELECT cancel_requested_at IS NOT NULL AS cancelled FROM {CALLS} WHERE id = %(call_id)s")

# A run's end: RUNNING → ASKING or FINISHED, only under the lease this run holds (leased_until as it
# last wrote it) and with the requestState flag it knows, and, `unless_cancelled`, only if the
# call's task was not cancelled.
RECORD_ROUND = f"""
UPDATE {ROUNDS} SET state = %(state)s, outcome = %(outcome)s, finished_at = %(now)s
WHERE id = %(round_id)s AND state = 'running' AND with_request_state = %(with_request_state)s
  AND leased_until IS NOT DISTINCT FROM %(leased_until)s
  AND NOT (%(unless_cancelled)s AND (SELECT cancelled FROM locked))
RETURNING call_id
"""

# An answer: ASKING → ANSWERED with its responses. However many requests answer at once, one
# claims the round: the others wait on its row, then match nothing.
CLAIM_ANSWER = f"""
UPDATE {ROUNDS} SET state = 'answered', answers = %(answers)s, first_call_answers = NULL
WHERE id = %(round_id)s AND state = 'asking'
RETURNING call_id
"""

# A cancelled task's round that no worker has taken yet never runs: RUNNING → FINISHED.
CANCEL_BEFORE_START = f"""
UPDATE {ROUNDS} SET state = 'finished', outcome = %(outcome)s, finished_at = %(now)s
WHERE id = %(round_id)s AND state = 'running' AND leased_until IS NULL
RETURNING call_id
"""

# The call of the round changed: its new status and when it expires (lifetimes.py,
# `_call_change`), a task's read from the row: the call may have become one since this process
# loaded it. It returns the task's hash itself, not whether there is one: SQLite 3.40 answers
# `task_hash IS NOT NULL` wrongly in a RETURNING (true for a NULL of this UNIQUE column).
CHANGE_CALL = f"""
UPDATE {CALLS} SET status = %(status)s, updated_at = %(now)s,
  expires_at = CASE WHEN task_hash IS NOT NULL THEN %(expires_as_task)s ELSE %(expires)s END
WHERE id IN (SELECT call_id FROM round_changed)
RETURNING id, task_hash
"""

_call_columns, _call_values = _insert(ToolCall, "call_")
INSERT_CALL = f"INSERT INTO {CALLS} ({_call_columns}) VALUES ({_call_values}) RETURNING id, task_hash"

# The next round, created only if its call changed.
_round_columns, _round_values = _insert(Round, "next_")
INSERT_NEXT_ROUND = f"INSERT INTO {ROUNDS} ({_round_columns}) SELECT {_round_values} FROM call_changed RETURNING id"

# A step's name or what the graph reported, for a task's statusMessage; whether the call is a
# task by now (a run may become one while it runs), so that its listeners are told.
REPORT_PROGRESS = f"""
UPDATE {CALLS} SET progress = %(progress)s, progress_numbers = %(numbers)s, updated_at = %(now)s
WHERE id = %(call_id)s RETURNING task_hash
"""

CANCEL_REQUESTED = f"SELECT 1 FROM {CALLS} WHERE id = %(call_id)s AND cancel_requested_at IS NOT NULL"

# The task of the call that got a new round, if it is one.
ROUND_CREATED = "SELECT task_hash FROM call_changed WHERE EXISTS (SELECT 1 FROM round_created)"

# The changes, from the parts above.
LOCK = Change((), LOCK_CALL)
LEASE_FIRST = Change((("leased", TAKE_FIRST_LEASE),), LEASED_WITH_CALL)
START = Change((("call_changed", INSERT_CALL), ("round_created", INSERT_NEXT_ROUND)), ROUND_CREATED)
RECORD = Change(
    (("locked", LOCK_CALL), ("round_changed", RECORD_ROUND)),
    "SELECT (SELECT cancelled FROM locked), (SELECT call_id FROM round_changed), NULL",
)
RECORD_WITH_CALL = Change(
    (("locked", LOCK_CALL), ("round_changed", RECORD_ROUND), ("call_changed", CHANGE_CALL)),
    "SELECT (SELECT cancelled FROM locked), (SELECT id FROM call_changed), (SELECT task_hash FROM call_changed)",
)
ANSWER = Change(
    (("round_changed", CLAIM_ANSWER), ("call_changed", CHANGE_CALL), ("round_created", INSERT_NEXT_ROUND)),
    ROUND_CREATED,
)
CANCEL_UNSTARTED = Change(
    (("round_changed", CANCEL_BEFORE_START), ("call_changed", CHANGE_CALL)), "SELECT task_hash FROM call_changed"
)

# Evaluated with the row a statement returns: that statement's transaction commits without waiting
# for the disk. Only in an autocommitted statement, whose transaction ends with it.
UNFLUSHED = "set_config('synchronous_commit', 'off', true)"


def _run(change: Change, params: dict[str, Any], *, unflushed: bool = False) -> list[tuple[Any, ...]]:
    """The rows `change.last` returns, its parts made first (the module's docstring says how)."""
    row_locks = connection.features.has_select_for_update
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_one_statement(change, unflushed, row_locks), params)
            rows = cursor.fetchall()
        return [row[1:] for row in rows] if unflushed else rows
    made: list[tuple[str, list[str], list[tuple[Any, ...]]]] = []
    with transaction.atomic():
        for name, part in change.parts:
            columns, rows = _execute_after(made, _text(part, row_locks), params)
            made.append((name, columns, rows))
        return _execute_after(made, _text(change.last, row_locks), params)[1]


@cache
def _one_statement(change: Change, unflushed: bool, row_locks: bool) -> str:
    """`change` as one statement of PostgreSQL's."""
    parts = ", ".join(f"{name} AS ({_text(part, row_locks)})" for name, part in change.parts)
    last = _text(change.last, row_locks)
    sql = f"WITH {parts} " if change.parts else ""
    return sql + (f"SELECT {UNFLUSHED}, q.* FROM ({last}) q" if unflushed else last)


def _execute_after(
    made: list[tuple[str, list[str], list[tuple[Any, ...]]]], sql: str, params: dict[str, Any]
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """`sql` run with the rows of the parts `made` before it as WITH tables of their values."""
    tables, bound = [], dict(params)
    for name, columns, rows in made:
        values = []
        for i, row in enumerate(rows):
            keys = [f"{name}_{i}_{j}" for j in range(len(row))]
            bound.update(zip(keys, row, strict=True))
            values.append("(" + ", ".join(f"%({key})s" for key in keys) + ")")
        body = "VALUES " + ", ".join(values) if values else "SELECT " + ", ".join(["NULL"] * len(columns)) + " WHERE 0"
        tables.append(f"{name}({', '.join(columns)}) AS ({body})")
    with connection.cursor() as cursor:
        cursor.execute(("WITH " + ", ".join(tables) + " " if tables else "") + sql, bound)
        if cursor.description is None:
            return [], []
        return [d[0] for d in cursor.description], cursor.fetchall()


def _one(sql: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


# --- parameters and rows --------------------------------------------------------------------------


def _db(model: type[models.Model], field: str, value: Any) -> Any:
    """`value` as the database stores `model.field`."""
    stored = model._meta.get_field(field)
    assert isinstance(stored, models.Field)
    return stored.get_db_prep_save(value, connection)


def _row(model: type[models.Model], obj: models.Model, prefix: str) -> dict[str, Any]:
    """The named parameters of a new row of `obj` (`_insert`'s)."""
    return {
        f"{prefix}{f.column}": f.get_db_prep_save(f.pre_save(obj, add=True), connection)
        for f in model._meta.concrete_fields
    }


@cache
def _converters(model: type[models.Model], alias: str, vendor: str) -> tuple[list[str], list[tuple[Any, list[Any]]]]:
    """The attnames of `model` and each column's converters, as the ORM finds them for a query. The
    same for every connection of one alias (they are the backend's and the fields' own, and read
    only the alias's settings); working them out for every row cost as much as the statement."""
    fields = model._meta.concrete_fields
    cols = [f.get_col(model._meta.db_table) for f in fields]
    converters = [
        (col, connection.ops.get_db_converters(col) + f.get_db_converters(connection))
        for f, col in zip(fields, cols, strict=True)
    ]
    return [f.attname for f in fields], converters


def _instance(model: type[models.Model], values: tuple[Any, ...]) -> Any:
    """A model instance from a row of `_columns(model)`, converted as the ORM converts it."""
    attnames, converters = _converters(model, connection.alias, connection.vendor)
    converted = []
    for (col, convert_all), value in zip(converters, values, strict=True):
        for convert in convert_all:
            value = convert(value, col, connection)
        converted.append(value)
    return model.from_db(connection.alias, attnames, converted)


def _round_and_call(row: tuple[Any, ...]) -> Round:
    n = len(Round._meta.concrete_fields)
    round_ = _instance(Round, row[:n])
    round_.call = _instance(ToolCall, row[n:])
    return round_


def _saved(obj: Any) -> Any:
    obj._state.adding, obj._state.db = False, connection.alias
    return obj


def _call_change(call: ToolCall, status: str, *, keep: bool, now: datetime) -> dict[str, Any]:
    """CHANGE_CALL's parameters: the call `status` from `now`, expiring as lifetimes.py says. A
    finished call is kept for a client that holds a handle to it (`keep`: a requestState or a task
    id reached it), a task's as its ttl says; without one it expires at once (unkept_until)."""
    if status != ToolCall.Status.FINISHED:
        as_task = otherwise = lifetimes.paused_until(now)
    elif keep:
        as_task, otherwise = lifetimes.task_finished_until(now), lifetimes.finished_until(now)
    else:
        as_task = otherwise = call.unkept_until(now)
    return {
        "status": status,
        "now": now,
        "expires_as_task": as_task,
        "expires": otherwise,
    }


def _prepared(params: dict[str, Any]) -> dict[str, Any]:
    """Dates and ids as the database stores them (SQLite keeps them as text of Django's own form)."""
    prepared = {}
    for name, value in params.items():
        if isinstance(value, datetime):
            value = _db(ToolCall, "updated_at", value)
        prepared[name] = value
    return prepared


def _changed(call: ToolCall, change: dict[str, Any], task_hash: str | None) -> None:
    """`call` brought to where CHANGE_CALL left its row, which returned its `task_hash`."""
    call.status, call.updated_at = change["status"], change["now"]
    call.expires_at = change["expires_as_task"] if task_hash is not None else change["expires"]


# --- the request's side ---------------------------------------------------------------------------


def round_with_call(round_id: Any) -> Round | None:
    """The read an answer starts with (request_state.verified_round): the round its requestState
    names, with its call; None when it is gone."""
    row = _one(ROUND_WITH_CALL, {"round_id": _db(Round, "id", round_id)})
    return None if row is None else _round_and_call(row)


def start(call: ToolCall, first: Round) -> None:
    """A first call: the call and its round 0 (RUNNING) created together, one commit. An idempotency
    key sent twice at once fails the second on the unique constraint."""
    _run(START, {**_row(ToolCall, call, "call_"), **_row(Round, first, "next_")})
    _saved(call)
    _saved(first)


def claim_and_resume(answered: Round, responses: dict[str, Any], following: Round) -> bool:
    """An answer: the round claimed (CLAIM_ANSWER), its call RUNNING again (kept as long as a
    paused call would be, until the run ends and sets the next expiry) and the next round created
    RUNNING. False when another request claimed the round first: nothing changed."""
    return _claim(answered, responses, following, ToolCall.Status.RUNNING)


def claim_and_end(answered: Round, responses: dict[str, Any], ended: Round, *, keep: bool) -> bool:
    """An answer that ends the call (a decline or cancel of a text question, a cancelled task): the
    round claimed, the next one created FINISHED with its result, and the call finished (`keep`:
    its client holds a handle to it). False when another request claimed the round first."""
    if not _claim(answered, responses, ended, ToolCall.Status.FINISHED, keep=keep):
        return False
    if not keep:
        answered.call.delete_thread_on_commit()
    return True


def _claim(answered: Round, responses: dict[str, Any], following: Round, status: str, *, keep: bool = True) -> bool:
    call = answered.call
    change = _call_change(call, status, keep=keep, now=timezone.now())
    params = {
        **_prepared(change),
        "round_id": _db(Round, "id", answered.pk),
        "answers": _db(Round, "answers", responses),
        **_row(Round, following, "next_"),
    }
    rows = _run(ANSWER, params)
    if not rows:
        return False
    answered.state, answered.answers, answered.first_call_answers = Round.State.ANSWERED, responses, None
    _changed(call, change, rows[0][0])
    _saved(following)
    return True


def cancel_unstarted(round_: Round, outcome: Outcome) -> bool:
    """A cancelled task's round that no worker has taken yet: finished with `outcome`, and its call
    with it (kept for the task's client). False once a worker holds it (the run then stops at its
    next step, runs.py)."""
    call, now = round_.call, timezone.now()
    change = _call_change(call, ToolCall.Status.FINISHED, keep=True, now=now)
    params = {**_prepared(change), "round_id": _db(Round, "id", round_.pk), "outcome": _db(Round, "outcome", outcome)}
    rows = _run(CANCEL_UNSTARTED, params)
    if not rows:
        return False
    round_.state, round_.outcome, round_.finished_at = Round.State.FINISHED, outcome, now
    _changed(call, change, rows[0][0])
    return True


# --- the worker's side ----------------------------------------------------------------------------


def take_lease(round_id: Any) -> tuple[Lease, Round | None]:
    """Lease a RUNNING round to this worker (renewed by its heartbeat while the run goes on:
    Round.lease), and the round with its call once leased. A round never leased is a first attempt
    (lease_first); one whose lease has run out was attempted before (its worker died, or the
    attempt failed on our side) and may have left a checkpoint."""
    round_ = lease_first(round_id)
    if round_ is not None:
        return Lease.FIRST, round_
    now = timezone.now()
    running = Round.objects.filter(pk=round_id, state=Round.State.RUNNING)
    if leases.take(running.filter(leased_until__lte=now), "leased_until", now):
        return Lease.AGAIN, Round.objects.select_related("call").get(pk=round_id)
    return Lease.HELD if running.exists() else Lease.GONE, None


def lease_first(round_id: Any) -> Round | None:
    """A round never leased, leased to this worker (leases.py: until lease_end()), and read with its
    call, in one statement on PostgreSQL. None when it did not match (take_lease).

    Autocommitted, as a worker runs it, on PostgreSQL the lease does not wait for its WAL to reach
    the disk (synchronous_commit off for this statement's own transaction): a lease is nobody's
    acknowledgement. What depends on it comes later and is flushed (the run's checkpoints; its
    record, conditional on this lease), and a flush writes the log up to its own point, this
    lease's commit with it. A crash before then loses the lease with the run that held it: the task
    is retried, or its message redelivered, and leases the round again. Inside a caller's
    transaction the setting would outlive the statement: not there."""
    params = {"round_id": _db(Round, "id", round_id), "until": _db(Round, "leased_until", leases.lease_end())}
    rows = _run(LEASE_FIRST, params, unflushed=not connection.in_atomic_block)
    return _round_and_call(rows[0]) if rows else None


class Recording(enum.Enum):
    """What recording a run's end did."""

    RECORDED = "recorded"
    LOST = "lost"  # another run recorded the round, or the lease is another worker's
    CANCELLED = "cancelled"  # not recorded: the call's task was cancelled (unless_cancelled)


def lock_if_cancelled(call_id: Any) -> bool:
    """In the transaction that records a pause: lock the call's row, then read the cancel flag
    (LOCK_CALL). A cancel either committed before, and the run ends cancelled, or waits for this
    transaction, and then finds the call paused or handed over, and ends that."""
    rows = _run(LOCK, {"call_id": _db(ToolCall, "id", call_id)})
    return bool(rows and rows[0][0])


def record_round(
    round_: Round, state: str, outcome: Outcome, *, with_call: bool = True, unless_cancelled: bool = False
) -> Recording:
    """A run's end, recorded under the lease this run holds: the round RUNNING → ASKING (with its
    questions) or FINISHED, and, `with_call`, the call → PAUSED or FINISHED with it (kept 10
    minutes, a task for its ttl, if a requestState reached the round; else its thread deleted once
    this commits). Without `with_call` the caller changes the call in its own transaction (a
    hand-over). One statement on PostgreSQL: its own transaction, unless the caller's is open.

    A request that timed out waiting may have handed out a requestState for the round meanwhile
    (Round.promise_request_state): the record matches only the flag this run knows, and on a miss
    the flag is brought up to date first, so what follows (keep the call or delete it) agrees with
    the row.

    `unless_cancelled` (a pause): nothing is recorded if the call's task was cancelled, read under
    the call's row lock. A cancel (ToolCall.request_cancel) either committed first, and the pause
    is not recorded (CANCELLED: the caller ends the call cancelled instead), or waits for this,
    and then finds the call paused and ends that."""
    call, now = round_.call, timezone.now()
    status = ToolCall.Status.PAUSED if state == Round.State.ASKING else ToolCall.Status.FINISHED
    cancelled = False
    change: dict[str, Any] = {}

    def record() -> tuple[bool, str | None]:
        nonlocal cancelled, change
        params = {
            "call_id": _db(ToolCall, "id", call.pk),
            "round_id": _db(Round, "id", round_.pk),
            "state": state,
            "outcome": _db(Round, "outcome", outcome),
            "now": now,
            "with_request_state": round_.with_request_state,
            "leased_until": round_.lease.until,
            "unless_cancelled": unless_cancelled,
        }
        if with_call:
            change = _call_change(call, status, keep=round_.with_request_state, now=now)
            params.update(change)
        was_cancelled, matched, task_hash = _run(RECORD_WITH_CALL if with_call else RECORD, _prepared(params))[0]
        cancelled = bool(was_cancelled) and unless_cancelled
        return matched is not None, task_hash

    with round_.lease.lock:
        if round_.lease.lost():
            # Run out by this process's clock: another worker may hold the round by now, and the
            # value this record matches on may still be the row's (nobody took it yet).
            return Recording.LOST
        recorded, task_hash = record()
        if not recorded and not round_.with_request_state:
            round_.with_request_state = True
            recorded, task_hash = record()
            round_.with_request_state = recorded  # a miss again: another run recorded the round
    if not recorded:
        return Recording.CANCELLED if cancelled else Recording.LOST
    round_.state, round_.outcome, round_.finished_at = state, outcome, now
    if with_call:
        _changed(call, change, task_hash)
        if status == ToolCall.Status.FINISHED and not round_.with_request_state:
            call.delete_thread_on_commit()
    return Recording.RECORDED


def report_progress(call_id: Any, message: str, numbers: dict[str, float] | None = None) -> bool:
    """The write a run makes as each step starts (REPORT_PROGRESS). Unconditional: only the run
    writes it. Whether the call is a task by now."""
    field = ToolCall._meta.get_field("progress")
    params = {
        "progress": message[: field.max_length],
        "numbers": _db(ToolCall, "progress_numbers", numbers),
        "now": _db(ToolCall, "updated_at", timezone.now()),
        "call_id": _db(ToolCall, "id", call_id),
    }
    row = _one(REPORT_PROGRESS, params)
    return row is not None and row[0] is not None


def cancel_requested(call_id: Any) -> bool:
    """The read a run makes after each step: whether its task's client asked to cancel it."""
    return _one(CANCEL_REQUESTED, {"call_id": _db(ToolCall, "id", call_id)}) is not None
