"""The worker side of the paused-call state machine: run a round's graph under a lease and record
where it stopped (questions, a result, a hand-over to another app, a breakpoint). One module: the
lease, the run and the record are one attempt, each step of which decides what the next may do (a
run that lost its lease records nothing, a cancelled one stops at its next step).

Safe to run twice: a round that is no longer RUNNING is left alone, and a round another worker
holds is not run again (Lease.HELD: try later). The process's heartbeat renews the lease while the
run goes on (graph_runtime/heartbeat.py); a round whose worker died is taken over once its
lease has run out, and LangGraph resumes it from the last checkpoint. A run that lost its lease
(taken over, or run out by its process's clock: the process was stopped past it) records nothing,
writes no checkpoint (runner.run's `fence`) and starts no step more.

A cancelled task (mcp_task_methods.py) stops here: the flag ToolCall.cancel_requested_at is read
with the round once the lease is taken, after every step that does not pause (runner.run's `stop`,
LangGraph's cooperative drain), and under the call's lock where a pause is recorded, so a running
graph stops at its next step and its round ends cancelled. The steps the run
is on, and what the graph reports through its custom stream writer, become the task's
statusMessage (ToolCall.progress).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.utils import timezone
from langgraph.errors import is_invalid_resume
from pydantic import ValidationError

from graph_runtime import heartbeat, leases, runner
from graph_runtime.registry import RegisteredGraph, get_graph
from mcp_gateway import observe
from mcp_gateway.calls import handover, questions, results, store, waiter
from mcp_gateway.calls.form_schemas import Unaskable
from mcp_gateway.calls.round_queue import enqueue_round
from mcp_gateway.models import Lease, Outcome, Rejected, Round, ToolCall

logger = logging.getLogger(__name__)

CANT_RESUME = "This tool paused to ask for human input, and this call can't be resumed."
TOO_MANY_ROUNDS = "This tool asked for input more than {limit} times, the most one call may ask."
TOOL_FAILED = "The tool failed."
CANCELLED = "The task was cancelled by its client."
# How often a run's progress is written to its call's row, at most.
PROGRESS_EVERY_SECONDS = 0.5
# MCP's log levels, lowest first, each with the Python level it starts at (Python has no notice,
# alert or emergency: a notice is above info, and only lines Python calls critical reach the two
# highest, as critical ones).
LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": (logging.INFO + logging.WARNING) // 2,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}
# A log line's text is cut at this length: a line is no place for a payload.
LOG_LINE_CHARS = 2000


def cancelled_outcome() -> Outcome:
    return {"kind": "result", "result": results.error(CANCELLED), "cancelled": True}


def run_round(round_id: uuid.UUID | str) -> Lease:
    """Run the graph for a RUNNING round and record where it stopped; what the lease got."""
    if heartbeat.stopping():
        # This worker is stopping: the round goes to another one (after this process has exited).
        enqueue_round(round_id, countdown=heartbeat.HAND_BACK_COUNTDOWN)
        return Lease.HANDED_BACK
    lease, round_ = store.take_lease(round_id)
    if round_ is None:
        return lease
    with observe.running_round(round_, first_attempt=lease == Lease.FIRST):
        try:
            with heartbeat.holding(
                f"round {round_.number} of call {round_.call_id}",
                renew=round_.lease.renew,
                hand_back=lambda: hand_back(round_),
            ):
                # Lost once a renewal fails (the heartbeat) or the lease ran out by this
                # process's clock, whichever this run sees first.
                run_leased(round_, attempted_before=lease == Lease.AGAIN, lease_lost=round_.lease.lost)
        except BaseException:
            # Not the agent's failure (that is recorded as the tool's result) but ours, such as a
            # lost database: the lease ends now, so the next attempt has the round at once.
            round_.lease.end()
            raise
    return lease


def hand_back(round_: Round) -> None:
    """The worker stops with this round still running: another worker carries it on from its last
    checkpoint, at once."""
    round_.lease.end()
    enqueue_round(round_.id, countdown=heartbeat.HAND_BACK_COUNTDOWN)


def run_leased(
    round_: Round, *, attempted_before: bool = False, lease_lost: Callable[[], bool] = lambda: False
) -> None:
    call = round_.call
    registered = get_graph(call.graph)
    # Each line about a run names the tool and the call, so a worker's log can be read by either.
    logger.info("tool %s, call %s: round %s running", call.graph, call.id, round_.number)
    if call.cancel_requested_at is not None:
        # Cancelled after a worker took the round, before it ran: it never starts. (The call was
        # read with the round, once the lease was taken.)
        _finish(round_, cancelled_outcome())
        return
    progress = _ProgressWriter(call.pk, task=call.is_task, lost=lease_lost)
    log_lines = _LogWriter(call.pk, lost=lease_lost) if round_.log_level else None
    try:
        if registered is None:
            raise LookupError(f"the graph {call.graph!r} is no longer registered")
        # A round 0 attempted before may have left a checkpoint (its worker died after LangGraph
        # saved it): it carries on from there, so nodes that finished do not run again. A later
        # round's resume is safe to repeat as is.
        started = attempted_before and round_.number == 0 and runner.has_checkpoint(call.thread_id)
        run = runner.run(
            registered,
            call.thread_id,
            arguments=round_.graph_input if round_.number == 0 else None,
            resume=round_.resume,
            context=round_.context,
            carry_on=started,
            progress=progress,
            # Between two steps: a lease another worker took over (this one could not renew it), or
            # a cancelled task.
            stop=lambda: lease_lost() or store.cancel_requested(call.pk),
            log=log_lines,
            log_level=LOG_LEVELS.get(round_.log_level, logging.INFO),
            fence=round_.lease.fenced,
        )
    except leases.LeaseLost:
        _lost(round_)  # a checkpoint write refused
        return
    except (*runner.INFRASTRUCTURE_ERRORS, DatabaseError):
        # Ours, not the agent's: LangGraph's connections, or Django's (the cancel check and the
        # progress writer run inside the run). Retried by the task (RETRY_ON_INFRASTRUCTURE).
        raise
    except Exception as exc:  # the agent's own failure becomes the tool's error result
        if registered is not None and round_.resume is not None and is_invalid_resume(exc):
            _rejected(round_, registered, exc)
            return
        logger.exception("tool %s, call %s: round %s failed", call.graph, call.id, round_.number)
        if log_lines is not None:
            log_lines.close()  # before the result: a stream sends the lines first
        # The exception's text can carry internal detail (paths, hosts, queries): sent only when
        # MCP_TOOL_ERROR_DETAIL allows it; the log has it either way.
        text = f"The tool failed: {type(exc).__name__}: {exc}" if settings.MCP_TOOL_ERROR_DETAIL else TOOL_FAILED
        _finish(round_, {"kind": "result", "result": results.error(text)})
        return
    finally:
        progress.close()
    if log_lines is not None:
        log_lines.close()
    if lease_lost():
        _lost(round_)
        return
    if run.stopped:
        # Stopped between two steps for a cancelled task: the client asked for nothing more.
        _finish(round_, cancelled_outcome())
    elif run.interrupts:
        # Paused after its task was cancelled: _paused reads the flag under the call's lock, in
        # the statement (or transaction) that records the pause, so nothing is asked, nor handed
        # to staff.
        _paused(round_, registered, run)
    elif run.at_breakpoint:
        # docs/rules.md, "Lifetime": like any end of the call, kept 10 minutes when reached by a request
        # with a requestState, so resending it gets the same result.
        _finish(round_, {"kind": "breakpoint", "values": results.jsonable(registered.output(run.values))})
    else:
        _finish(round_, {"kind": "result", "result": results.success(registered.output(run.values))})


def _lost(round_: Round) -> None:
    # Another worker took the round over (or may, its lease having run out) while this one could
    # not renew it: that run records the round; this one stopped and leaves it.
    call = round_.call
    logger.warning(
        "tool %s, call %s: round %s lost its lease; this run stops and records nothing",
        call.graph,
        call.id,
        round_.number,
    )


def _rejected(round_: Round, registered: RegisteredGraph, exc: Exception) -> None:
    """docs/rules.md, "Invalid answers", for an answer that fits the form but not the
    response_schema type (a Pydantic validator the form cannot carry): LangGraph saved nothing for
    it, so the request that sent it gets -32602 and the same questions stay open, or, after a first
    call, the thread is deleted."""
    detail = "; ".join(e["msg"] for e in exc.errors()) if isinstance(exc, ValidationError) else str(exc)
    rejected: Rejected = {"message": questions.INVALID_CONTENT, "data": {"detail": detail}}
    pending = runner.pending_interrupts(registered, round_.call.thread_id)
    if not round_.with_request_state or not pending:
        result = results.error(f"{questions.INVALID_CONTENT}: {detail}")
        _finish(round_, {"kind": "result", "result": result, "rejected": rejected})
        return
    _paused(round_, registered, runner.RunResult(values={}, interrupts=pending), rejected=rejected)


def _paused(
    round_: Round, registered: RegisteredGraph, run: runner.RunResult, *, rejected: Rejected | None = None
) -> None:
    call = round_.call
    if (handler := handover.handler_for(run.interrupts)) is not None:
        with transaction.atomic():
            if store.lock_if_cancelled(call.pk):
                _finish(round_, cancelled_outcome())
                return
            # In the transaction that records the round: the other app's rows and the call's new
            # status commit together.
            handed = handler(
                handover.PausedCall(call.id, call.thread_id, call.graph, run.interrupts, run.values, call.caller)
            )
            result = {
                "content": [{"type": "text", "text": handed.text}],
                "structuredContent": handed.structured,
                "isError": False,
            }
            notice: Outcome = {"kind": "result", "result": result, "handed_over": True}
            if _record(round_, Round.State.FINISHED, notice, with_call=False) is store.Recording.RECORDED:
                call.hand_over(until=timezone.now() + handed.keep_for)
            else:
                # The lease was lost (or another run recorded the round): the other app's rows go.
                transaction.set_rollback(True)
        return
    if not call.resumable:
        # Kept only if a requestState was handed out while it ran (Round.promise_request_state).
        _finish_paused(round_, {"kind": "result", "result": results.error(CANT_RESUME)})
        return
    if round_.number >= settings.MCP_MAX_ROUNDS:
        # Round n's run asks the (n+1)th round of questions: a call that keeps asking ends here.
        text = TOO_MANY_ROUNDS.format(limit=settings.MCP_MAX_ROUNDS)
        _finish_paused(round_, {"kind": "result", "result": results.error(text)})
        return
    try:
        asked = questions.build_round(run.interrupts)
    except Unaskable as exc:
        # Kept like any other end of the call (docs/rules.md, "Lifetime"), so a resent answer gets
        # this result.
        _finish_paused(round_, {"kind": "result", "result": results.error(f"{questions.UNASKABLE}: {exc}.")})
        return
    except Exception:
        # A question kind that breaks on what an agent wrote must not leave the round RUNNING for
        # ever (the worker would fail it again on every retry): the call ends unaskable.
        logger.exception(
            "tool %s, call %s: could not build the questions of round %s", call.graph, call.id, round_.number
        )
        _finish_paused(round_, {"kind": "result", "result": results.error(f"{questions.UNASKABLE}.")})
        return
    asked["interrupts"] = [
        {"id": i.id, "value": results.jsonable(i.value), "response_schema": results.jsonable(i.response_schema)}
        for i in run.interrupts
    ]
    # Stored as JSON: what an agent wrote (a message with U+0000, a NaN) must not fail the write.
    questions_outcome: dict[str, Any] = {"kind": "questions", **results.jsonable(asked)}
    if rejected is not None:
        questions_outcome["rejected"] = rejected
    outcome: Outcome = questions_outcome  # type: ignore[assignment]  # built as JSON above
    # Not recorded if the call's task was cancelled meanwhile (read under the call's lock in the
    # statement that records the pause): then nothing is asked, and the call ends cancelled.
    if _record(round_, Round.State.ASKING, outcome, unless_cancelled=True) is store.Recording.CANCELLED:
        _finish(round_, cancelled_outcome())


class _ProgressWriter:
    """Writes what the run reports to its call's row when it changes, for its task's statusMessage
    (the only reader of ToolCall.progress). For a task: each step as it starts, at once; what the
    graph reports at most every PROGRESS_EVERY_SECONDS (a graph may report in a tight loop), the
    last message of a burst once that interval has passed, so that the row does not keep an older
    message while the graph works on. A listen stream on the call's task is told.

    A call that is no task (yet) has nobody to read it: each message waits PROGRESS_EVERY_SECONDS
    and only the latest of them is written, so a run that ends sooner, as most do, writes nothing
    (the write is a commit; a round's run made one per step). A call that becomes a task while it
    runs (its client's wait outlasted MCP_TASK_WAIT_SECONDS) gets its message at most that interval
    late; every write says whether the call is a task by now, and from then on it is one."""

    def __init__(self, call_id: Any, *, task: bool, lost: Callable[[], bool] = lambda: False):
        self.call_id = call_id
        self.task = task
        self.lost = lost  # the run's lease: a run that lost it writes nothing more
        self._lock = threading.Lock()
        self._written: tuple[str, dict[str, float] | None] = ("", None)
        self._reported_at = -math.inf  # when a reported message was last written
        self._pending: tuple[str, dict[str, float] | None] | None = None
        self._scheduled = False  # a write of what is pending is due on _later's thread

    def __call__(self, message: str, reported: bool, numbers: dict[str, float] | None = None) -> None:
        with self._lock:
            self._pending = None  # whatever came since supersedes it
            if (message, numbers) == self._written:
                return
            if not self.task:
                wait = PROGRESS_EVERY_SECONDS
            elif reported:
                wait = self._reported_at + PROGRESS_EVERY_SECONDS - time.monotonic()
            else:
                wait = 0.0
            if wait > 0:
                self._pending = (message, numbers)
                if not self._scheduled:
                    self._scheduled = True
                    _later.call_in(wait, self._write_pending)
                return
            self._write(message, reported, numbers)

    def close(self) -> None:
        """The run ended: nothing more is written (its end, or a hand-over, sets the row now)."""
        with self._lock:
            self._pending = None

    def _write_pending(self) -> None:
        with self._lock:
            self._scheduled = False
            if self._pending is None:
                return  # the run ended first, as most do: nothing was written, nothing to close
            (message, numbers), self._pending = self._pending, None
            try:
                self._write(message, True, numbers)
            except Exception:  # a message a moment late is no reason to fail anything
                logger.warning("could not write the progress of call %s", self.call_id, exc_info=True)
            finally:
                # _later's thread's own: a write is rare (a step still going after the interval),
                # and the connection would otherwise sit idle on that thread between them.
                connection.close()

    def _write(self, message: str, reported: bool, numbers: dict[str, float] | None) -> None:
        if self.lost():
            return
        self._written = (message, numbers)
        if reported:
            self._reported_at = time.monotonic()
        if store.report_progress(self.call_id, message, numbers):
            self.task = True
            call_id = self.call_id
            transaction.on_commit(lambda: waiter.notify_task(call_id))


class _LogWriter:
    """The graph's log lines its request asked for (Round.log_level), kept on its call's row
    (ToolCall.add_log_lines) for the call's stream: in batches at most PROGRESS_EVERY_SECONDS
    apart, from any thread of the run, and what is left when the run ends, before its end is
    recorded."""

    def __init__(self, call_id: Any, *, lost: Callable[[], bool] = lambda: False):
        self.call_id = call_id
        self.lost = lost  # the run's lease: a run that lost it writes nothing more
        self._lock = threading.Lock()
        self._lines: list[dict[str, Any]] = []
        self._scheduled = False

    def __call__(self, record: logging.LogRecord) -> None:
        line = {
            "level": _mcp_level(record.levelno),
            "logger": record.name,
            "data": record.getMessage()[:LOG_LINE_CHARS],
        }
        with self._lock:
            self._lines.append(line)
            if not self._scheduled:
                self._scheduled = True
                _later.call_in(PROGRESS_EVERY_SECONDS, self._write_later)

    def close(self) -> None:
        """The run ended: what is left is written now."""
        self._write()

    def _write(self) -> None:
        with self._lock:
            lines, self._lines = self._lines, []
            self._scheduled = False
        if lines and not self.lost():
            ToolCall.add_log_lines(self.call_id, lines)

    def _write_later(self) -> None:
        try:
            self._write()
        except Exception:  # lines a moment late or lost are no reason to fail anything
            logger.warning("could not write the log lines of call %s", self.call_id, exc_info=True)
        finally:
            connection.close()  # _later's thread's own, as _ProgressWriter's


def _mcp_level(levelno: int) -> str:
    """A Python log level as MCP's: the highest whose start it reaches."""
    reached = [name for name, start in LOG_LEVELS.items() if levelno >= start and name not in ("alert", "emergency")]
    return reached[-1] if reached else "debug"


class _Later:
    """Calls what progress writers deferred when it is due, on one thread for the process. A run
    that started a timer thread of its own waited for that thread to start
    (docs/performance.md, "Measured choices"), though most runs end before their write is due and
    need none."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()  # ties broken in the order they came, never by the callables
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def call_in(self, seconds: float, call: Callable[[], None]) -> None:
        with self._changed:
            entry = (time.monotonic() + seconds, next(self._order), call)
            heapq.heappush(self._due, entry)
            # Started on first use, and again in a process forked from one that had it.
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="deferred progress", daemon=True)
                self._thread.start()
            if self._due[0] is entry:
                # Woken only when this call is due before the one it sleeps for: under load every
                # run defers a write or two, and a wake-up for each took the GIL from the runs.
                self._changed.notify()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._due or (wait := self._due[0][0] - time.monotonic()) > 0:
                    self._changed.wait(wait if self._due else None)
                _, _, call = heapq.heappop(self._due)
            call()


_later = _Later()


def _finish_paused(round_: Round, outcome: Outcome) -> None:
    """End the call of a run that paused with questions nobody can be asked, or cancelled if its
    task was cancelled meanwhile (the flag read under the call's lock, as for a pause)."""
    with transaction.atomic():
        _finish(round_, cancelled_outcome() if store.lock_if_cancelled(round_.call.pk) else outcome)


def _finish(round_: Round, outcome: Outcome) -> None:
    """End the call with this round, kept for 10 minutes if a requestState reached it
    (docs/rules.md, "Lifetime")."""
    _record(round_, Round.State.FINISHED, outcome)


def _record(
    round_: Round, state: str, outcome: Outcome, *, with_call: bool = True, unless_cancelled: bool = False
) -> store.Recording:
    """Record the round's end with the call's new state (paused, or finished: store.record_round,
    a transaction of its own unless the caller's is open) unless the caller sets it
    (`with_call=False`, a hand-over, in the caller's transaction), and tell the request waiting for
    it once that has committed, with what the rows hold then."""
    recorded = store.record_round(round_, state, outcome, with_call=with_call, unless_cancelled=unless_cancelled)
    if recorded is not store.Recording.RECORDED:
        return recorded
    logger.info(
        "tool %s, call %s: round %s %s",
        round_.call.graph,
        round_.call_id,
        round_.number,
        "ended with questions" if state == Round.State.ASKING else "ended",
    )
    transaction.on_commit(lambda: waiter.notify(round_.pk, round_.recorded()))
    return recorded
