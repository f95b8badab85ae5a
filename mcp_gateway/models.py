"""A paused tool call, made durable: its rows (ToolCall, Round) and every change of them that
store.py does not make.

The LangGraph checkpoint is the source of truth for what is pending; these rows are the index,
the lifetime and the security binding of each call, and the memory of what each round answered
and returned (so a repeated request gets the same result).

Each change that two processes can race for is a conditional UPDATE that names the state it moves
from, so that exactly one of them makes it (the web's answer against another answer, a worker's
record against a request handing out a requestState, two workers' leases). The request side
(tool_calls.py) and the worker side (runs.py) decide which change to make. The changes every round
makes (a call started, a round leased, its run's end recorded with the call's new state, an answer
claimed with the next round) are store.py's, in SQL; a lease once taken is renewed and ended by
graph_runtime/leases.py, through Round.lease; the others are methods here. docs/architecture.md
lists every change with its home.

    ToolCall:  running ──► paused ──► running ──► ... ──► finished ──► (removed by the sweep)
                    └──► awaiting_staff ──► finished (the staff side, through handover.py)
    A call whose client declared the MCP Tasks extension may also become a task (become_task):
    the same states, read through tasks/get (mcp_task_methods.py), and cancellable.
    Round:     running ──► asking ──► answered          (the next round runs the resume)
                    └──► finished

The app's other models are exported here, where Django and the migrations find them: the bearer
tokens (bearer_tokens.py) and older clients' sessions and streams (session_models.py), each module
with the changes of its rows; so are the types of what a run ended with (run_outcomes.py).
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from datetime import datetime
from functools import cached_property
from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.db.models import Case, Value, When
from django.utils import timezone

from graph_runtime import leases, runner
from mcp_gateway import lifetimes, metrics
from mcp_gateway.bearer_tokens import MCPToken as MCPToken
from mcp_gateway.exact_json import ExactJSONField as ExactJSONField
from mcp_gateway.run_outcomes import BreakpointOutcome as BreakpointOutcome
from mcp_gateway.run_outcomes import Lease as Lease
from mcp_gateway.run_outcomes import Outcome as Outcome
from mcp_gateway.run_outcomes import QuestionsOutcome as QuestionsOutcome
from mcp_gateway.run_outcomes import Recorded as Recorded
from mcp_gateway.run_outcomes import Rejected as Rejected
from mcp_gateway.run_outcomes import ResultOutcome as ResultOutcome
from mcp_gateway.session_models import CallStream as CallStream
from mcp_gateway.session_models import Session as Session
from mcp_gateway.session_models import StreamEvent as StreamEvent

logger = logging.getLogger(__name__)


def delete_thread(thread_id: str) -> bool:
    """Delete a call's LangGraph thread now; False when that failed (the sweep removes what is
    left, found through the call's row)."""
    try:
        runner.delete_thread(thread_id)
    except Exception:
        logger.exception("could not delete thread %s now", thread_id)
        return False
    return True


class ToolCall(models.Model):
    """One tools/call and the LangGraph thread it runs on, from the first request to its removal."""

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        PAUSED = "paused", "Waiting for the MCP client"
        AWAITING_STAFF = "awaiting_staff", "Waiting for staff"
        FINISHED = "finished", "Finished"

    # A bound on a call's log_lines, whatever its graph logs.
    LOG_LINES_KEPT = 200

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    thread_id = models.CharField(max_length=64, unique=True)
    graph = models.CharField(max_length=128)
    tool_name = models.CharField(max_length=128)
    arguments_digest = models.CharField(max_length=64)
    caller = models.CharField(max_length=255, db_index=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    # False when threads are disabled or the caller may not create and update threads: the call
    # runs, but a pause ends it ("this call can't be resumed").
    resumable = models.BooleanField(default=True)
    # SHA-256 of the idempotency key its first call carried (tool_calls.IDEMPOTENCY_KEY), if any.
    first_call_key = models.CharField(max_length=64, blank=True, default="", editable=False)
    expires_at = models.DateTimeField(db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The W3C traceparent of the first round's request span, when traces are on: every later
    # round's spans link to it, so the call's whole life can be followed from any of them. A
    # database default too: processes of the previous release, still running while the migration
    # adds it, insert calls without it.
    traceparent = models.CharField(max_length=55, blank=True, default="", db_default="")
    # The MCP Tasks extension (mcp_task_handles.py): a keyed hash of the task id, never the id itself;
    # null for a call that is not a task.
    task_hash = models.CharField(max_length=64, null=True, blank=True, unique=True, editable=False)
    task_created_at = models.DateTimeField(null=True, blank=True)
    # The client asked to cancel the task: a running graph stops at its next step (runs.py).
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    # Which step the run is on, or what the graph last reported through its custom stream writer:
    # a task's statusMessage while it works.
    progress = models.CharField(max_length=500, blank=True)
    # The numbers the graph gave with that report, {"progress": n} and "total" where it gave one:
    # a 2026-07-28 call's notifications/progress carry them (call_notifications.py).
    progress_numbers = models.JSONField(null=True, blank=True)
    # The graph's own log lines of the runs whose request asked for them (Round.log_level), as
    # notifications/message params, oldest first and at most LOG_LINES_KEPT: a 2026-07-28
    # call's stream sends them (call_notifications.py).
    log_lines = models.JSONField(null=True, blank=True)
    # How a call handed over to staff ended (an Outcome), once staff's decision has run, or once
    # its client withdrew it: the round that handed it over ended with the notice.
    final_outcome = ExactJSONField(null=True, blank=True)
    # The client's declared name, version and title (its clientInfo, protocol.declared_client) when
    # the call started, shown on its answer page; null when it declared none.
    client_info = models.JSONField(null=True, blank=True)
    # The progressToken of a 2025-11-25 task-augmented tools/call: valid for the task's life, so
    # the task's tasks/result stream sends the run's progress with it.
    progress_token = models.JSONField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["status", "expires_at"]),
            # The admin's list, newest first: read from the index, not sorted from a scan of every call.
            models.Index(fields=["created_at", "id"], name="toolcall_by_creation"),
            # The same list filtered by status: a page of a status few calls have (awaiting staff,
            # finished) read from its own entries, not found by walking every newer call's
            # (docs/performance.md, "Capacity").
            models.Index(fields=["status", "created_at", "id"], name="toolcall_by_status_creation"),
        ]
        constraints = [
            # Two first calls with one key at once: one creates the call, the other finds it.
            models.UniqueConstraint(
                fields=["caller", "first_call_key"],
                condition=~models.Q(first_call_key=""),
                name="one_call_per_idempotency_key",
            )
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} {self.id}"

    @staticmethod
    def key_digest(key: str) -> str:
        return hashlib.sha256(key.encode()).hexdigest()

    @classmethod
    def with_idempotency_key(cls, *, caller: str, key: str) -> ToolCall | None:
        """The call this caller's first call with `key` started within MCP_IDEMPOTENCY_WINDOW, while
        it is kept. An older one gives the key up, for the new call it is about to start."""
        now = timezone.now()
        call = cls.objects.filter(caller=caller, first_call_key=cls.key_digest(key)).first()
        if call is None:
            return None
        if call.created_at > now - settings.MCP_IDEMPOTENCY_WINDOW and call.expires_at > now:
            return call
        cls.objects.filter(pk=call.pk).update(first_call_key="")
        return None

    @property
    def is_expired(self) -> bool:
        return self.expires_at <= timezone.now()

    @property
    def is_task(self) -> bool:
        return self.task_hash is not None

    def latest_round(self) -> Round | None:
        """The call's latest round (its `call` is this call, read again by nobody)."""
        return self.rounds.order_by("-number").first()

    @staticmethod
    def _kept_finished(now: datetime) -> Case:
        """docs/rules.md, "Lifetime", for a finished call kept for its client: 10 minutes, or a task's
        MCP_TASK_FINISHED_TTL (its ttlMs), read from the row: the call may have become a task
        after this process loaded it."""
        return Case(
            When(task_hash__isnull=False, then=Value(lifetimes.task_finished_until(now))),
            default=Value(lifetimes.finished_until(now)),
        )

    def _set(self, **fields: Any) -> None:
        """UPDATE the row, and this instance with it (a round's notification carries the expiry)."""
        ToolCall.objects.filter(pk=self.pk).update(**fields)
        for name, value in fields.items():
            setattr(self, name, value)

    def hand_over(self, *, until: datetime) -> None:
        """A run paused for another app (handover.py), which keeps the thread until then."""
        # No progress of the run before: a task waits for staff (mcp_task_handles.fields).
        self._set(status=self.Status.AWAITING_STAFF, expires_at=until, updated_at=timezone.now(), progress="")

    def become_task(self, task_hash: str) -> None:
        """The client got a task for this call (mcp_task_handles.py). The id is derived from the call
        and its caller, so requests racing to make the same call a task agree on it."""
        now = timezone.now()
        ToolCall.objects.filter(pk=self.pk, task_hash__isnull=True).update(task_hash=task_hash, task_created_at=now)
        # A run that ended in the moment before (its call kept as any finished call, 10 minutes) is
        # kept as a finished task is, for its client to read.
        kept_until = lifetimes.task_finished_until(now)
        finished_and_kept = ToolCall.objects.filter(pk=self.pk, status=self.Status.FINISHED, expires_at__gt=now)
        finished_and_kept.filter(expires_at__lt=kept_until).update(expires_at=kept_until)
        self.refresh_from_db(fields=["task_hash", "task_created_at", "expires_at", "status", "updated_at"])

    @classmethod
    def add_log_lines(cls, pk: Any, lines: list[dict[str, Any]]) -> None:
        """A run's log lines its request asked for, after those kept (up to LOG_LINES_KEPT)."""
        with transaction.atomic():
            # Locked: the lines a run writes from two threads (its own, and a deferred batch's)
            # are both kept.
            kept = cls.objects.select_for_update().filter(pk=pk).values_list("log_lines", flat=True).first()
            room = cls.LOG_LINES_KEPT - len(kept or [])
            if room > 0:
                cls.objects.filter(pk=pk).update(log_lines=[*(kept or []), *lines[:room]])

    def request_cancel(self) -> bool:
        """The client cancels its task: False once the call has finished (nothing to stop)."""
        now = timezone.now()
        unfinished = ToolCall.objects.filter(pk=self.pk).exclude(status=self.Status.FINISHED)
        return bool(unfinished.update(cancel_requested_at=now, updated_at=now))

    def keep_for_missing_capability(self) -> None:
        """A later round needs url elicitation the client did not declare: the client may come back
        with url declared and the same answers within 10 minutes."""
        self._set(expires_at=lifetimes.missing_capability_until(timezone.now()))

    def keep_paused(self, *, asked_at: datetime) -> None:
        """Once its questions are asked, a call shortened by keep_for_missing_capability is paused
        like any other again. Only a shortened call is written to, and never one that has expired
        meanwhile: the sweep may be removing it."""
        now = timezone.now()
        paused_until = lifetimes.paused_until(asked_at)
        if self.expires_at < paused_until:
            shortened = ToolCall.objects.filter(pk=self.pk, status=self.Status.PAUSED)
            shortened.filter(expires_at__gt=now, expires_at__lt=paused_until).update(expires_at=paused_until)

    def unkept_until(self, now: datetime) -> datetime:
        """When a call finished without a requestState expires: at once, unless an idempotency key
        started it. Its thread goes all the same; its rows stay until the idempotency window
        closes, so the first call sent again gets this result rather than a second run."""
        return max(now, self.created_at + settings.MCP_IDEMPOTENCY_WINDOW) if self.first_call_key else now

    def delete_thread_on_commit(self) -> None:
        thread_id = self.thread_id
        transaction.on_commit(lambda: delete_thread(thread_id))

    def discard(self) -> None:
        """Remove a call that can go no further: its thread now, its rows with it. The rows go only
        once the thread has: the sweep finds threads through them."""
        metrics.call_ended(self.tool_name, "discarded")
        if delete_thread(self.thread_id):
            ToolCall.objects.filter(pk=self.pk).delete()
        else:
            ToolCall.objects.filter(pk=self.pk).update(status=self.Status.FINISHED, expires_at=timezone.now())

    @classmethod
    def keep_progress_token(cls, task_hash: str, token: str | int) -> None:
        """The progressToken a 2025-11-25 task-augmented tools/call carried, kept with its task:
        the task's tasks/result stream sends the run's progress with it (the token is valid for
        the task's life)."""
        cls.objects.filter(task_hash=task_hash).update(progress_token=token)

    @classmethod
    def remove(cls, pks: list[Any]) -> None:
        """The sweep's: expired calls' rows removed, their rounds and streams with them, once
        their threads are gone (the sweep finds threads through these rows)."""
        cls.objects.filter(pk__in=pks).delete()

    @classmethod
    def keep_awaiting_staff(cls, pk: Any, *, until: datetime) -> None:
        """The resumed run paused for staff again: the call keeps waiting, until then."""
        cls.objects.filter(pk=pk).update(expires_at=until, updated_at=timezone.now(), progress="")

    @classmethod
    def finish_awaiting_staff(cls, pk: Any, outcome: Outcome) -> bool:
        """Staff's decision has run to its end, or the client withdrew the call: it is finished like
        any other (docs/rules.md, "Lifetime": kept 10 minutes, a task for its ttlMs, then the sweep
        removes it with its thread), with the outcome a task's client reads."""
        now = timezone.now()
        return bool(
            cls.objects.filter(pk=pk, status=cls.Status.AWAITING_STAFF).update(
                status=cls.Status.FINISHED, expires_at=cls._kept_finished(now), updated_at=now, final_outcome=outcome
            )
        )


class Round(models.Model):
    """One run of the call's graph, and the questions it ended with, if any.

    Round 0 starts the graph; round n+1 resumes it with the answers to round n. The public id of
    a round is the first part of its requestState.
    """

    class State(models.TextChoices):
        RUNNING = "running", "Running"
        ASKING = "asking", "Asking"
        ANSWERED = "answered", "Answered"
        FINISHED = "finished", "Finished"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    call = models.ForeignKey(ToolCall, on_delete=models.CASCADE, related_name="rounds")
    number = models.PositiveIntegerField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.RUNNING)
    # Keyed hash of this round's requestState (request_state.py); never the requestState itself.
    request_state_hash = models.CharField(max_length=64)
    # What the run starts from: the tool arguments (round 0) or {interrupt_id: value} (later rounds).
    graph_input = ExactJSONField(null=True, blank=True)
    resume = ExactJSONField(null=True, blank=True)
    context = ExactJSONField(null=True, blank=True)
    # docs/rules.md, "Lifetime": whether the request that started this run carried a requestState.
    with_request_state = models.BooleanField(default=False)
    # The lowest level of the run's log lines the request that started it asked to hear (its
    # _meta logLevel, 2026-07-28): the worker keeps them on the call (ToolCall.log_lines). Empty:
    # none asked, none kept.
    log_level = models.CharField(max_length=16, blank=True, default="")
    # Where the run stopped (an Outcome); rendered per request. Exact, for the order of its
    # questions too (jsonb sorts an object's keys), which a client shows them in.
    outcome = ExactJSONField(null=True, blank=True)
    # The inputResponses that answered this round (while it is ASKING, those its task got so far).
    answers = models.JSONField(null=True, blank=True)
    # docs/rules.md, "Answers in the first call": the answers a first call sent while this round was
    # still running, when the run outlasted that call's wait (promise_request_state); they answer
    # the round once it is asked, for the request that comes back with the requestState.
    first_call_answers = models.JSONField(null=True, blank=True)
    # A worker running this round holds it until then; a copy of the task that arrives meanwhile
    # (a broker redelivery) waits, and one that arrives after a crash takes the round over.
    leased_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["call", "number"], name="one_round_per_number")]
        # The sweep and the stalled-round nudge look for running rounds in a table of every round.
        indexes = [
            models.Index(fields=["call"], condition=models.Q(state="running"), name="round_running"),
            # /metrics' oldest pause (selectors.oldest_pause): the asking rounds in the order they
            # asked, so the oldest live one is found without reading every round.
            models.Index(fields=["finished_at"], condition=models.Q(state="asking"), name="round_asking_since"),
        ]
        ordering = ["call", "number"]

    def __str__(self) -> str:
        return f"round {self.number} of {self.call_id}"

    @classmethod
    def live(cls, now: datetime) -> models.Q:
        """RUNNING rounds that a worker holds, or that were enqueued lately: not stalled."""
        return models.Q(state=cls.State.RUNNING) & leases.live("leased_until", "created_at", now)

    @classmethod
    def stalled(cls, now: datetime) -> models.Q:
        """RUNNING rounds whose lease ran out (the worker died) or that nobody took."""
        return models.Q(state=cls.State.RUNNING) & leases.stalled("leased_until", "created_at", now)

    def is_stalled(self, now: datetime) -> bool:
        return self.state == self.State.RUNNING and leases.is_stalled(self.leased_until, self.created_at, now)

    @classmethod
    def end_leases_left_running(cls, now: datetime) -> None:
        """A process that runs every round itself, as it starts: the leases of the rounds a previous
        process left running end now (sweep.take_over_running_rounds). Ended, not cleared: the
        next attempt looks for the checkpoint the last one may have left (leases.Held.end)."""
        cls.objects.filter(state=cls.State.RUNNING, leased_until__gt=now).update(leased_until=now)

    # --- the worker's side -------------------------------------------------------------------

    @cached_property
    def lease(self) -> leases.Held:
        """This worker's lease on the round, once taken: renewed, ended, and matched by the record
        of the run's end (store.record_round), all on the value of `leased_until` it last wrote."""
        return leases.Held(self, "leased_until", models.Q(state=self.State.RUNNING), remember_attempt=True)

    def recorded(self) -> Recorded:
        """This round's notification: what its rows hold once the recording transaction commits."""
        assert self.finished_at is not None and self.outcome is not None
        return {
            "state": self.state,
            "outcome": self.outcome,
            "finished_at": self.finished_at.isoformat(),
            "with_request_state": self.with_request_state,
            "expires_at": self.call.expires_at.isoformat(),
        }

    def apply_recorded(self, recorded: Recorded) -> Round:
        """This round (a request's own copy, with its call) brought to where its run recorded it."""
        self.state = recorded["state"]
        self.outcome = recorded["outcome"]
        self.finished_at = datetime.fromisoformat(recorded["finished_at"])
        self.with_request_state = recorded["with_request_state"]
        self.call.expires_at = datetime.fromisoformat(recorded["expires_at"])
        return self

    # --- the request's side ------------------------------------------------------------------

    def promise_request_state(self, first_call_answers: dict[str, Any] | None) -> bool:
        """docs/rules.md, "Lifetime": a call that ends after its requestState was handed out is kept
        for that requestState, even a first call's. False when the round is no longer running.

        docs/rules.md, "Answers in the first call": the client comes back with the requestState
        alone (the SDK retries a result without questions with no inputResponses), so a first call's
        answers are kept on its round, to answer it once it is asked."""
        if self.with_request_state:
            return True
        self.with_request_state = True
        # The worker records the round's end only with the flag it ran with (store.record_round).
        running = Round.objects.filter(pk=self.pk, state=self.State.RUNNING)
        return bool(running.update(with_request_state=True, first_call_answers=first_call_answers))

    def keep_answers(self, responses: dict[str, Any]) -> bool:
        """Some of an ASKING round's answers, sent to its task (tasks/update) while others are still
        missing: kept until the rest arrive."""
        asking = Round.objects.filter(pk=self.pk, state=self.State.ASKING)
        return bool(asking.update(answers=responses))
