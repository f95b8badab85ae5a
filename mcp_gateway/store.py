"""The round's hot statements, in SQL through Django's connection: each one is a state change (or
the read) that every pause-and-resume round makes, written once by hand because the ORM spent
more CPU building them than PostgreSQL spent running them (0.25-0.75 ms of Python per statement,
and a round made 25). docs/performance.md says where a round's time goes.

Each statement says which change it makes and why it is safe; every one is the same conditional
change the models' methods make (models.py names the states), merged where PostgreSQL lets one
statement make several: a data-modifying WITH runs its parts on one snapshot, all or none, and a
conditional UPDATE that another transaction's UPDATE got to first waits for it, then matches
nothing, exactly as the ORM's did. On SQLite (the embedded default) the merged ones fall back to
the models' methods (`merged()` says which path runs); the plain ones run there as written.
"""

from __future__ import annotations

import enum
from datetime import datetime
from functools import cache
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection, models, transaction
from django.utils import timezone

from . import lifetimes
from .models import MCPToken, Outcome, Round, ToolCall


def merged() -> bool:
    """Whether this database takes the merged statements (data-modifying WITH, RETURNING)."""
    return connection.vendor == "postgresql"


# --- authentication -------------------------------------------------------------------------------


@cache
def _token_sql() -> str:
    users = get_user_model()._meta.db_table
    return (
        f"SELECT t.user_id FROM {MCPToken._meta.db_table} t JOIN {users} u ON u.id = t.user_id"
        " WHERE t.digest = %s AND t.revoked_at IS NULL AND u.is_active"
    )


def token_user_id(raw: str) -> Any:
    """Every request's read: the user of a bearer token while it authenticates. The conditions of
    MCPToken.usable (not revoked, its user active); digests are unique, so one row at most."""
    with connection.cursor() as cursor:
        cursor.execute(_token_sql(), [MCPToken.digest_of(raw)])
        row = cursor.fetchone()
    return None if row is None else row[0]


# --- rows as model instances ----------------------------------------------------------------------


def _columns(model: type[models.Model], alias: str) -> str:
    return ", ".join(f"{alias}.{f.column}" for f in model._meta.concrete_fields)


@cache
def _converters(model: type[models.Model], alias: str) -> tuple[list[str], list[tuple[Any, list[Any]]]]:
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
    attnames, converters = _converters(model, connection.alias)
    converted = []
    for (col, convert_all), value in zip(converters, values, strict=True):
        for convert in convert_all:
            value = convert(value, col, connection)
        converted.append(value)
    return model.from_db(connection.alias, attnames, converted)


def _insert(model: type[models.Model], obj: models.Model) -> tuple[str, list[Any]]:
    """`INSERT INTO <model> (...) VALUES (...)` of every column of `obj`, with its parameters."""
    fields = model._meta.concrete_fields
    columns = ", ".join(str(f.column) for f in fields)
    values = [f.get_db_prep_save(f.pre_save(obj, add=True), connection) for f in fields]
    return f"INSERT INTO {model._meta.db_table} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})", values


def _saved(obj: Any) -> Any:
    obj._state.adding, obj._state.db = False, connection.alias
    return obj


def round_with_call(round_id: Any) -> Round | None:
    """The read an answer starts with (request_state.verified_round): the round its requestState
    names, with its call; None when it is gone."""
    sql = (
        f"SELECT {_columns(Round, 'r')}, {_columns(ToolCall, 'c')} FROM {Round._meta.db_table} r"
        f" JOIN {ToolCall._meta.db_table} c ON c.id = r.call_id WHERE r.id = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [_pk(Round, round_id)])
        row = cursor.fetchone()
    return None if row is None else _round_and_call(row)


def _round_and_call(row: tuple[Any, ...]) -> Round:
    n = len(Round._meta.concrete_fields)
    round_ = _instance(Round, row[:n])
    round_.call = _instance(ToolCall, row[n:])
    return round_


# --- the worker's side ----------------------------------------------------------------------------


# Evaluated with the row a statement returns: that statement's transaction commits without waiting
# for the disk. Only in an autocommitted statement, whose transaction ends with it.
UNFLUSHED = "set_config('synchronous_commit', 'off', true)"


def lease_first(round_id: Any) -> Round | None:
    """Round.take_lease's first attempt and the read of the round with its call that follows it,
    in one statement: RUNNING and never leased → leased for RUN_LEASE_SECONDS. Safe as the ORM's
    UPDATE is: of two workers with copies of one task, the second waits on the row, then matches
    nothing (None: Round.take_lease tells the other cases apart). The call's row is read after the
    lease, so its cancel flag is the one the run must start with.

    Autocommitted, as a worker runs it, the lease does not wait for its WAL to reach the disk
    (synchronous_commit off for this statement's own transaction, about 0.1 ms): a lease is
    nobody's acknowledgement. What depends on it comes later and is flushed (the run's
    checkpoints; its record, conditional on this lease), and a flush writes the log up to its own
    point, this lease's commit with it. A PostgreSQL crash before then loses the lease with the
    run that held it: the task is retried, or its message redelivered, and leases the round
    again. Inside a caller's transaction the setting would outlive the statement: not there."""
    until = Round.lease_end()
    if not merged():
        never_leased = Round.objects.filter(pk=round_id, state=Round.State.RUNNING, leased_until__isnull=True)
        if not never_leased.update(leased_until=until):
            return None
        return Round.objects.select_related("call").get(pk=round_id)
    sql = (
        f"WITH leased AS (UPDATE {Round._meta.db_table} SET leased_until = %s"
        " WHERE id = %s AND state = %s AND leased_until IS NULL RETURNING *)"
        f" SELECT {'NULL' if connection.in_atomic_block else UNFLUSHED}, {_columns(Round, 'leased')},"
        f" {_columns(ToolCall, 'c')}"
        f" FROM leased JOIN {ToolCall._meta.db_table} c ON c.id = leased.call_id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [until, round_id, Round.State.RUNNING])
        row = cursor.fetchone()
    return None if row is None else _round_and_call(row[1:])


class Recorded(enum.Enum):
    """What recording a run's end did."""

    RECORDED = "recorded"
    LOST = "lost"  # another run recorded the round
    CANCELLED = "cancelled"  # not recorded: the call's task was cancelled (unless_cancelled)


def record_with_call(round_: Round, state: str, outcome: Outcome, *, unless_cancelled: bool = False) -> Recorded:
    """A run's end, recorded: Round.record (RUNNING → ASKING with its questions, or FINISHED) and
    with it the call's new state, ToolCall.pause or ToolCall.finish (kept 10 minutes, a task for
    its ttl, if a requestState reached the round; else its thread deleted once this commits), in
    one statement (its own transaction, unless the caller's is open). Round.record makes it under
    the lease's lock and with the same conditions as its own UPDATE (still RUNNING, the lease and
    the requestState flag this run holds), and the call changes only if the round matched.

    `unless_cancelled` (a pause): nothing is recorded if the call's task was cancelled, read under
    the call's row lock in the same statement, as ToolCall.lock_if_cancelled reads it. A cancel
    (ToolCall.request_cancel's UPDATE) either committed first, and the pause is not recorded
    (CANCELLED: the caller ends the call cancelled instead), or waits for this statement, and then
    finds the call paused and ends that."""
    call = round_.call
    asking = state == Round.State.ASKING
    if not merged():
        with transaction.atomic():
            if unless_cancelled and ToolCall.lock_if_cancelled(call.pk):
                return Recorded.CANCELLED
            if not round_.record(state, outcome):
                return Recorded.LOST
            if asking:
                call.pause()
            else:
                call.finish(keep=round_.with_request_state)
        return Recorded.RECORDED
    status = ToolCall.Status.PAUSED if asking else ToolCall.Status.FINISHED
    stored_outcome = Round._meta.get_field("outcome").get_db_prep_save(outcome, connection)
    calls, rounds = ToolCall._meta.db_table, Round._meta.db_table
    # The call's row is locked first (the UPDATE of it below would lock it too, but only after the
    # round's was written): the cancel flag the round's UPDATE is conditional on is the latest one.
    sql = (
        f"WITH locked AS (SELECT cancel_requested_at IS NOT NULL AS cancelled FROM {calls} WHERE id = %s FOR UPDATE),"
        f" recorded AS (UPDATE {rounds} SET state = %s, outcome = %s, finished_at = %s"
        " WHERE id = %s AND state = %s AND with_request_state = %s AND leased_until IS NOT DISTINCT FROM %s"
        " AND NOT (%s AND (SELECT cancelled FROM locked)) RETURNING call_id),"
        f" changed AS (UPDATE {calls} SET status = %s, updated_at = %s,"
        " expires_at = CASE WHEN task_hash IS NOT NULL THEN %s ELSE %s END"
        " WHERE id IN (SELECT call_id FROM recorded) RETURNING expires_at)"
        " SELECT (SELECT cancelled FROM locked), (SELECT expires_at FROM changed)"
    )
    cancelled = False

    def write(finished: datetime) -> int:
        nonlocal cancelled
        # The expiry ToolCall.pause and ToolCall.finish set; a task's is read from the row, as
        # ToolCall._kept_finished does (the call may have become a task during the run).
        if asking:
            as_task = otherwise = lifetimes.paused_until(finished)
        elif round_.with_request_state:
            as_task, otherwise = lifetimes.task_finished_until(finished), lifetimes.finished_until(finished)
        else:
            as_task = otherwise = call.unkept_until(finished)
        params = [_pk(ToolCall, call.pk), state, stored_outcome, finished, round_.pk, Round.State.RUNNING]
        params += [
            round_.with_request_state,
            round_.leased_until,
            unless_cancelled,
            status,
            finished,
            as_task,
            otherwise,
        ]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            was_cancelled, expires_at = cursor.fetchone()
        cancelled = bool(was_cancelled) and unless_cancelled
        if expires_at is None:
            return 0
        call.status, call.updated_at, call.expires_at = status, finished, expires_at
        return 1

    if not round_.record(state, outcome, write=write):
        return Recorded.CANCELLED if cancelled else Recorded.LOST
    if not asking and not round_.with_request_state:
        call.delete_thread_on_commit()
    return Recorded.RECORDED


def report_progress(call_id: Any, message: str) -> bool:
    """The write a run makes as each step starts: the step's name or what
    the graph reported, for a task's statusMessage. Unconditional: only the run writes it. Whether
    the call is a task by now (a run may become one while it runs), so that its listeners are told."""
    field, task = ToolCall._meta.get_field("progress"), ToolCall._meta.get_field("task_hash")
    sql = (
        f"UPDATE {ToolCall._meta.db_table} SET {field.column} = %s, updated_at = %s WHERE id = %s"
        f" RETURNING {task.column} IS NOT NULL"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [message[: field.max_length], _now(), _pk(ToolCall, call_id)])
        row = cursor.fetchone()
    return bool(row and row[0])


def cancel_requested(call_id: Any) -> bool:
    """The read a run makes after each step: whether its task's client asked to cancel it."""
    sql = f"SELECT 1 FROM {ToolCall._meta.db_table} WHERE id = %s AND cancel_requested_at IS NOT NULL"
    with connection.cursor() as cursor:
        cursor.execute(sql, [_pk(ToolCall, call_id)])
        return cursor.fetchone() is not None


def _pk(model: type[models.Model], value: Any) -> Any:
    pk = model._meta.pk
    assert pk is not None
    return pk.get_db_prep_value(value, connection)


def _now() -> Any:
    return ToolCall._meta.get_field("updated_at").get_db_prep_value(timezone.now(), connection)


# --- the request's side ---------------------------------------------------------------------------


def start(call: ToolCall, first: Round) -> None:
    """A first call: the call and its round 0 (RUNNING) created in one statement, one commit. An
    idempotency key sent twice at once fails the second on the unique constraint, as before."""
    if not merged():
        with transaction.atomic():
            call.save(force_insert=True)
            first.save(force_insert=True)
        return
    call_sql, call_params = _insert(ToolCall, call)
    round_sql, round_params = _insert(Round, first)
    with connection.cursor() as cursor:
        cursor.execute(f"WITH call AS ({call_sql} RETURNING id) {round_sql}", call_params + round_params)
    _saved(call)
    _saved(first)


def claim_and_resume(answered: Round, responses: dict[str, Any], following: Round) -> bool:
    """An answer: Round.claim_answer (ASKING → ANSWERED), ToolCall.resume (the call RUNNING again)
    and the next round created RUNNING, in one statement. Each part runs only if the claim
    matched: however many requests answer at once, the others wait on the round's row, then match
    nothing and change nothing (False)."""
    call = answered.call
    if not merged():
        with transaction.atomic():
            if not answered.claim_answer(responses):
                return False
            call.resume()
            following.save(force_insert=True)
        return True
    now = timezone.now()
    expires_at = lifetimes.paused_until(now)  # ToolCall.resume's
    answers = Round._meta.get_field("answers").get_db_prep_save(responses, connection)
    round_sql, round_params = _insert(Round, following)
    columns = round_sql[round_sql.index("(") : round_sql.index(")") + 1]
    values = ", ".join(["%s"] * len(round_params))
    sql = (
        f"WITH claimed AS (UPDATE {Round._meta.db_table} SET state = %s, answers = %s, first_call_answers = NULL"
        " WHERE id = %s AND state = %s RETURNING call_id),"
        f" resumed AS (UPDATE {ToolCall._meta.db_table} SET status = %s, updated_at = %s, expires_at = %s"
        " WHERE id IN (SELECT call_id FROM claimed) RETURNING id)"
        f" INSERT INTO {Round._meta.db_table} {columns} SELECT {values} FROM resumed RETURNING id"
    )
    params = [Round.State.ANSWERED, answers, answered.pk, Round.State.ASKING]
    params += [ToolCall.Status.RUNNING, now, expires_at, *round_params]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        claimed = cursor.fetchone() is not None
    if claimed:
        answered.state, answered.answers, answered.first_call_answers = Round.State.ANSWERED, responses, None
        call.status, call.updated_at, call.expires_at = ToolCall.Status.RUNNING, now, expires_at
        _saved(following)
    return claimed
