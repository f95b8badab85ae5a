"""Each change mcp_gateway/calls/store.py defines makes the same rows on PostgreSQL, where it is one
statement, and on SQLite (the embedded default), where its parts run one after the other: the
same calls driven through every change, and the losing side of every race, on both databases at
one frozen instant, then their rows and what each change answered compared."""

from __future__ import annotations

import contextlib
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.db import connection, connections
from django.db.utils import ConnectionHandler

from mcp_gateway.calls import store
from mcp_gateway.models import Lease, Round, ToolCall

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
QUESTIONS = {"kind": "questions", "requests": {"q": {"method": "elicitation/create"}}, "interrupts": []}
RESULT = {"kind": "result", "result": {"content": [], "isError": False}}
RECORDED, LOST, CANCELLED = store.Recording.RECORDED, store.Recording.LOST, store.Recording.CANCELLED


def _id(n: int) -> uuid.UUID:
    return uuid.UUID(int=n)


def _new_call(n: int, **fields: Any) -> Round:
    """A first call: the call `n` and its round 0, running."""
    call = ToolCall(
        id=_id(n),
        thread_id=f"parity-{n}",
        graph="parity",
        tool_name="parity",
        arguments_digest="-",
        caller="user:1",
        expires_at=NOW + timedelta(hours=24),
        **fields,
    )
    first = Round(id=_id(100 + n), call=call, number=0, request_state_hash="-", graph_input={"n": n})
    store.start(call, first)
    return first


def _next(answered: Round, n: int, **fields: Any) -> Round:
    return Round(id=_id(n), call=answered.call, number=answered.number + 1, request_state_hash="-", **fields)


def _paused(n: int, **fields: Any) -> Round:
    """Call `n`, its round 0 run and asking, as an answer reads it."""
    leased = store.lease_first(_new_call(n, **fields).pk)
    assert leased is not None
    assert store.record_round(leased, Round.State.ASKING, QUESTIONS, unless_cancelled=True) is RECORDED
    answered = store.round_with_call(_id(100 + n))
    assert answered is not None
    return answered


def _seen(round_: Round) -> tuple[Any, ...]:
    """What a change left in the instances it was given."""
    call = round_.call
    return round_.state, round_.with_request_state, round_.finished_at, call.status, call.expires_at


def every_change() -> dict[str, Any]:
    """Every change of store.py and its answers; then the rows."""
    seen: list[Any] = []

    # A call paused, answered (twice at once: one claims), resumed, and finished for its requestState.
    first = _new_call(1)
    leased = store.lease_first(first.pk)
    assert leased is not None
    seen += [store.lease_first(first.pk), leased.leased_until, leased.call.thread_id]  # a second copy: None
    seen += [store.record_round(leased, Round.State.ASKING, QUESTIONS, unless_cancelled=True), _seen(leased)]
    answered = store.round_with_call(first.pk)
    assert answered is not None
    following = _next(answered, 201, resume={"i": "yes"}, with_request_state=True)
    seen += [store.claim_and_resume(answered, {"q": {"action": "accept"}}, following), _seen(answered)]
    seen += [store.claim_and_resume(answered, {"q": {"action": "decline"}}, _next(answered, 202)), _seen(answered)]
    resumed = store.lease_first(following.pk)
    assert resumed is not None
    seen += [store.report_progress(resumed.call_id, "step"), store.cancel_requested(resumed.call_id)]
    seen += [store.record_round(resumed, Round.State.FINISHED, RESULT), _seen(resumed)]

    # A first call's run whose requestState was handed out while it ran: kept, found on a retry.
    leased = store.lease_first(_new_call(2, first_call_key="k").pk)
    assert leased is not None
    Round.objects.get(pk=leased.pk).promise_request_state(None)
    seen += [store.record_round(leased, Round.State.FINISHED, RESULT), _seen(leased)]

    # A first call's run that nobody holds a handle to: over at once (its rows until the sweep), and
    # one started with an idempotency key, kept for that key's window.
    for n, fields in ((3, {}), (4, {"first_call_key": "k4"})):
        leased = store.lease_first(_new_call(n, **fields).pk)
        assert leased is not None
        seen += [store.record_round(leased, Round.State.FINISHED, RESULT), _seen(leased)]

    # A task cancelled while its run paused: the pause is not recorded; the run ends cancelled.
    leased = store.lease_first(_new_call(5).pk)
    assert leased is not None
    ToolCall.objects.get(pk=leased.call_id).request_cancel()
    seen += [store.record_round(leased, Round.State.ASKING, QUESTIONS, unless_cancelled=True), _seen(leased)]
    seen += [store.lock_if_cancelled(leased.call_id), store.lock_if_cancelled(_id(1))]
    seen += [store.record_round(leased, Round.State.FINISHED, RESULT), _seen(leased)]

    # A run whose lease another worker took over records nothing; a hand-over records the round only.
    leased = store.lease_first(_new_call(6).pk)
    assert leased is not None
    Round.objects.filter(pk=leased.pk).update(leased_until=NOW + timedelta(hours=1))
    seen += [store.record_round(leased, Round.State.FINISHED, RESULT, with_call=False), _seen(leased)]
    seen += [store.take_lease(leased.pk)[0]]  # held by the other worker
    leased = store.lease_first(_new_call(7).pk)
    assert leased is not None
    seen += [store.record_round(leased, Round.State.FINISHED, RESULT, with_call=False), _seen(leased)]
    seen += [store.take_lease(leased.pk)[0]]  # gone: no longer running

    # Answers that end the call: a first call's (not kept) and a task's (kept for its ttl).
    answered = _paused(8)
    ended = _next(answered, 208, state=Round.State.FINISHED, outcome=RESULT)
    seen += [store.claim_and_end(answered, {"q": {"action": "decline"}}, ended, keep=False), _seen(answered)]
    seen += [store.claim_and_end(answered, {}, _next(answered, 209, state=Round.State.FINISHED), keep=True)]
    answered = _paused(9)
    answered.call.become_task("task-9")
    ended = _next(answered, 210, state=Round.State.FINISHED, outcome=RESULT, with_request_state=True)
    seen += [store.claim_and_end(answered, {}, ended, keep=True), _seen(answered)]

    # A cancelled task's round: finished before a worker takes it; not once one holds it.
    unstarted = _new_call(10, task_hash="task-10")
    unstarted.call = ToolCall.objects.get(pk=unstarted.call_id)
    seen += [store.cancel_unstarted(unstarted, RESULT), _seen(unstarted)]
    leased = store.lease_first(_new_call(11).pk)
    assert leased is not None
    seen += [store.cancel_unstarted(leased, RESULT), _seen(leased)]
    Round.objects.filter(pk=leased.pk).update(leased_until=NOW - timedelta(seconds=1))  # its worker died
    lease, taken_over = store.take_lease(leased.pk)
    assert taken_over is not None
    seen += [lease, _seen(taken_over), taken_over.leased_until]
    seen += [store.round_with_call(_id(999))]

    return {
        "seen": seen,
        "calls": list(ToolCall.objects.order_by("id").values()),
        "rounds": list(Round.objects.order_by("id").values()),
    }


@pytest.fixture
def sqlite(tmp_path):
    """A database of the embedded default's kind, with the gateway's two tables."""
    handler = ConnectionHandler(
        {
            "default": {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": str(tmp_path / "db.sqlite3"),
                # As settings.py has it: a transaction takes the write lock as it begins.
                "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 20},
            }
        }
    )
    database = handler["default"]
    with database.schema_editor() as editor:
        editor.create_model(ToolCall)
        editor.create_model(Round)
    yield database
    database.close()


@contextlib.contextmanager
def _on(database: Any):
    """The default database is `database` for the ORM and store.py alike."""
    default = connections["default"]
    connections["default"] = database
    try:
        yield
    finally:
        connections["default"] = default


def test_every_change_makes_the_same_rows_on_postgresql_and_on_sqlite(sqlite):
    with time_machine.travel(NOW, tick=False):
        assert connection.vendor == "postgresql"
        on_postgresql = every_change()
        with _on(sqlite):
            assert connection.vendor == "sqlite"
            on_sqlite = every_change()

    assert on_sqlite["seen"] == on_postgresql["seen"]
    assert on_sqlite["calls"] == on_postgresql["calls"]
    assert on_sqlite["rounds"] == on_postgresql["rounds"]
    # And they are the changes meant: every race has its winner and its loser.
    recorded = [s for s in on_postgresql["seen"] if isinstance(s, store.Recording)]
    assert recorded == [RECORDED, RECORDED, RECORDED, RECORDED, RECORDED, CANCELLED, RECORDED, LOST, RECORDED]
    leases = [s for s in on_postgresql["seen"] if isinstance(s, Lease)]
    assert leases == [Lease.HELD, Lease.GONE, Lease.AGAIN]
    assert len(on_postgresql["calls"]) == 11 and len(on_postgresql["rounds"]) == 14
