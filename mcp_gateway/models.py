"""A paused tool call, made durable, and every change of its rows.

The LangGraph checkpoint is the source of truth for what is pending; these rows are the index,
the lifetime and the security binding of each call, and the memory of what each round answered
and returned (so a repeated request gets the same result).

Every change of these rows is a conditional UPDATE that names the state it moves from, so that of
two processes racing for one change exactly one makes it (the web's answer against another answer,
a worker's record against a request handing out a requestState, two workers' leases). The request
side (tool_calls.py) and the worker side (runs.py) decide which change to make. The changes every
round makes (a call started, a round leased, its run's end recorded with the call's new state, an
answer claimed with the next round) are made by store.py, in SQL; the others are methods here.

    ToolCall:  running ──► paused ──► running ──► ... ──► finished ──► (removed by the sweep)
                    └──► awaiting_staff ──► finished (the staff side, through handover.py)
    A call whose client declared the MCP Tasks extension may also become a task (become_task):
    the same states, read through tasks/get (mcp_task_methods.py), and cancellable.
    Round:     running ──► asking ──► answered          (the next round runs the resume)
                    └──► finished

The MCP bearer tokens (MCPToken, stored as digests) that callers of the endpoint present are here
too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import uuid
from datetime import datetime
from functools import cache, cached_property
from typing import Any, Literal, TypedDict

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import Case, Value, When
from django.utils import timezone

from graph_runtime import leases, runner
from mcp_gateway import lifetimes, metrics

logger = logging.getLogger(__name__)


class MCPToken(models.Model):
    """A bearer token for the MCP endpoint. Only its SHA-256 digest is stored."""

    PREFIX = "hitl_"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mcp_tokens")
    name = models.CharField(max_length=100, blank=True)
    # The first characters of the raw token, so staff can tell tokens apart in the admin.
    hint = models.CharField(max_length=16, editable=False)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "MCP token"

    def __str__(self) -> str:
        return f"{self.hint}… ({self.user})"

    @staticmethod
    def digest_of(raw: str) -> str:
        # Tokens are 256 random bits, so an unsalted hash is enough to make the column useless.
        return hashlib.sha256(raw.encode()).hexdigest()

    @classmethod
    def issue(cls, user, name: str = "") -> tuple[MCPToken, str]:
        raw = cls.PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(user=user, name=name, hint=raw[:12], digest=cls.digest_of(raw))
        return token, raw

    @classmethod
    def usable(cls, raw: str) -> models.QuerySet[MCPToken]:
        """The token with this raw value while it still authenticates: not revoked, its user active."""
        return cls.objects.filter(digest=cls.digest_of(raw), revoked_at__isnull=True, user__is_active=True)

    @classmethod
    def user_id_of(cls, raw: str) -> Any:
        """Every request's read: the user of a bearer token while it authenticates (the conditions
        of `usable`), in one plain statement. Building the token and user models costs CPU on
        every request (docs/performance.md, "Measured choices"), and nothing reads them. Digests
        are unique, so one row at most."""
        with connection.cursor() as cursor:
            cursor.execute(_token_user_sql(), {"digest": cls.digest_of(raw)})
            row = cursor.fetchone()
        return None if row is None else row[0]

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


@cache
def _token_user_sql() -> str:
    from django.contrib.auth import get_user_model

    return (
        f"SELECT t.user_id FROM {MCPToken._meta.db_table} t JOIN {get_user_model()._meta.db_table} u"
        " ON u.id = t.user_id WHERE t.digest = %(digest)s AND t.revoked_at IS NULL AND u.is_active"
    )


class ExactJSONField(models.TextField):
    """JSON kept as the text it was sent as. PostgreSQL's jsonb keeps numbers as `numeric`, so a
    float such as 1e20 comes back as the integer 100000000000000000000: the agent would not get
    what the client sent, and LangGraph's checkpoint serializer cannot hold such an integer. SQL
    NULL stands for None."""

    # For django-stubs: values are JSON, not str.
    _pyi_private_set_type: Any
    _pyi_private_get_type: Any

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> Any:
        return None if value is None else json.loads(value)

    def to_python(self, value: Any) -> Any:
        return value

    def get_prep_value(self, value: Any) -> str | None:
        if value is None:
            return None
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        try:
            text.encode()
        except UnicodeEncodeError:
            # An unpaired surrogate (an agent's output decoded with surrogateescape, say) is no
            # UTF-8 the database could store: as a JSON escape it is, and it reads back the same.
            text = json.dumps(value, separators=(",", ":"))
        return text


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


class Rejected(TypedDict):
    """LangGraph's own validation refused the answers a round was resumed with."""

    message: str
    data: dict[str, Any]


class QuestionsOutcome(TypedDict, total=False):
    """The run paused with questions: the round's inputRequests, how answers become resume values
    (questions.py), and the interrupts as LangGraph raised them."""

    kind: Literal["questions"]
    requests: dict[str, dict[str, Any]]
    plans: list[dict[str, Any]]
    interrupts: list[dict[str, Any]]
    rejected: Rejected


class ResultOutcome(TypedDict, total=False):
    """The call ended with this CallToolResult: `handed_over` to another app (handover.py), whose
    notice it is, or `cancelled` by its task's client."""

    kind: Literal["result"]
    result: dict[str, Any]
    rejected: Rejected
    handed_over: bool
    cancelled: bool


class BreakpointOutcome(TypedDict):
    """The run stopped at a static breakpoint (interrupt_before/interrupt_after)."""

    kind: Literal["breakpoint"]
    values: dict[str, Any]


Outcome = QuestionsOutcome | ResultOutcome | BreakpointOutcome


class Recorded(TypedDict):
    """A round's notification (waiter.py): its rows as the run's transaction committed them, so
    the request waiting for it answers without reading them."""

    state: str
    outcome: Outcome
    finished_at: str
    with_request_state: bool
    expires_at: str


class Lease(models.TextChoices):
    """What a worker's attempt to lease a round got."""

    FIRST = "first", "leased, never run before"
    AGAIN = "again", "leased, after an attempt whose worker died or failed"
    HELD = "held", "another worker holds it"
    GONE = "gone", "no longer running"
    HANDED_BACK = "handed_back", "left to another worker: this one is stopping"


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


# --- older clients' sessions (MCP_OLDER_CLIENTS=answer) ------------------------------------------


class Session(models.Model):
    """An older client's session (the handshake revisions' `Mcp-Session-Id`): who opened it, the
    revision and the capabilities its `initialize` declared. Its id is handed to the client once;
    the row holds only a keyed hash of it (sessions.py). Ended by `DELETE`, or after
    MCP_SESSION_IDLE_MINUTES without a request or an open stream; the calls' sweep removes it."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    caller = models.CharField(max_length=255)
    protocol_version = models.CharField(max_length=16)
    capabilities = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        # The per-caller cap counts a caller's live sessions at every initialize.
        indexes = [models.Index(fields=["caller", "expires_at"], name="session_by_caller")]

    def __str__(self) -> str:
        return f"session {self.pk} of {self.caller}"


class CallStream(models.Model):
    """The event stream that answers one tools/call (or tasks/result) of a session: its call's
    questions, then the response (call_streams.py). Its events are rows, so any web process
    replays them."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="streams")
    call = models.ForeignKey(ToolCall, on_delete=models.CASCADE, related_name="streams")
    # The JSON-RPC id its last event answers: a tools/call's, or a tasks/result's (`for_task`: the
    # 2025-11-25 tasks utility's stream, whose messages name the call's task).
    request_id = models.JSONField()
    for_task = models.BooleanField(default=False)
    # The request's progressToken: the run's progress goes on the stream as notifications/progress.
    progress_token = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"stream {self.pk} of {self.call_id}"


class StreamEvent(models.Model):
    """One event of a call's stream: a question (one elicitation/create request; its JSON-RPC id
    and its SSE id are `<stream id>.<event id>`) and the client's answer to it, a progress or
    task status notification, or the stream's final response. The event id orders the stream."""

    class Kind(models.TextChoices):
        QUESTION = "question", "Question"
        PROGRESS = "progress", "Progress"
        STATUS = "status", "Task status"
        RESPONSE = "response", "Response"

    id = models.BigAutoField(primary_key=True)
    stream = models.ForeignKey(CallStream, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    round = models.ForeignKey(Round, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    # The question's key in its round's requests; a progress or task status notification's number.
    key = models.TextField(blank=True)
    # Why the question is asked again: the reason its previous answer was refused.
    reason = models.TextField(blank=True)
    # The client's answer (an ElicitResult), once it came; whether the checks refused it.
    answer = models.JSONField(null=True, blank=True)
    answered_at = models.DateTimeField(null=True, blank=True)
    refused = models.BooleanField(default=False)
    # The JSON-RPC message of a notification or of the final response.
    message = ExactJSONField(null=True, blank=True)

    class Meta:
        constraints = [
            # Two processes serving one stream (a reconnect while the old response is still
            # being written) ask each question once, and answer the call once.
            models.UniqueConstraint(
                fields=["stream", "round", "key"],
                condition=models.Q(kind="question", answered_at__isnull=True),
                name="one_open_question",
            ),
            models.UniqueConstraint(fields=["stream"], condition=models.Q(kind="response"), name="one_response"),
            models.UniqueConstraint(
                fields=["stream", "key"], condition=models.Q(kind="progress"), name="one_progress_per_number"
            ),
            models.UniqueConstraint(
                fields=["stream", "key"], condition=models.Q(kind="status"), name="one_status_per_number"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.pk} of {self.stream_id}"

    def take_answer(self, answer: dict[str, Any], *, refused: bool = False) -> bool:
        """An open question answered. However many responses to it arrive at once, one takes it
        (a conditional UPDATE)."""
        open_ = StreamEvent.objects.filter(pk=self.pk, answered_at__isnull=True)
        return bool(open_.update(answer=answer, answered_at=timezone.now(), refused=refused))
