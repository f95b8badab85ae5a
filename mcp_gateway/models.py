"""A paused tool call, made durable.

The LangGraph checkpoint is the source of truth for what is pending; these rows are the index,
the lifetime and the security binding of each call, and the memory of what each round answered
and returned (so a repeated request gets the same result).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone


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

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class ToolCall(models.Model):
    """One tools/call and the LangGraph thread it runs on, from the first request to its removal."""

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        PAUSED = "paused", "Waiting for the MCP client"
        AWAITING_STAFF = "awaiting_staff", "Waiting for staff"
        FINISHED = "finished", "Finished"

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
    expires_at = models.DateTimeField(db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["status", "expires_at"])]

    def __str__(self) -> str:
        return f"{self.tool_name} {self.id}"

    @property
    def is_expired(self) -> bool:
        return self.expires_at <= timezone.now()


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


class Round(models.Model):
    """One run of the call's graph, and the questions it ended with, if any.

    Round 0 starts the graph; round n+1 resumes it with the answers to round n. The public id of
    a round is the first part of its requestState.
    """

    class State(models.TextChoices):
        RUNNING = "running", "Running"
        ASKING = "asking", "Asking"
        ANSWERED = "answered", "Answered"
        DONE = "done", "Done"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    call = models.ForeignKey(ToolCall, on_delete=models.CASCADE, related_name="rounds")
    number = models.PositiveIntegerField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.RUNNING)
    # Keyed hash of this round's requestState (see tokens.py); never the token itself.
    token_hash = models.CharField(max_length=64)
    # What the run starts from: the tool arguments (round 0) or {interrupt_id: value} (later rounds).
    graph_input = ExactJSONField(null=True, blank=True)
    resume = ExactJSONField(null=True, blank=True)
    context = ExactJSONField(null=True, blank=True)
    # Document "Lifetime": whether the request that started this run carried a requestState.
    with_request_state = models.BooleanField(default=False)
    # Where the run stopped: {"kind": "questions" | "result" | ..., ...}; rendered per request.
    # Exact, for the order of its questions too (jsonb sorts an object's keys), which a client
    # shows them in.
    outcome = ExactJSONField(null=True, blank=True)
    # The inputResponses that answered this round. Before it is answered: those a first call sent
    # for it when its run outlasted the call's wait (calls._promise_token), to answer it when asked.
    answers = models.JSONField(null=True, blank=True)
    # A worker running this round holds it until then; a copy of the task that arrives meanwhile
    # (a broker redelivery) waits, and one that arrives after a crash takes the round over.
    leased_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["call", "number"], name="one_round_per_number")]
        # Cleanup and the stalled-round nudge look for running rounds in a table of every round.
        indexes = [models.Index(fields=["call"], condition=models.Q(state="running"), name="round_running")]
        ordering = ["call", "number"]

    def __str__(self) -> str:
        return f"round {self.number} of {self.call_id}"

    # Longer than any gap between a round's enqueueing and a worker taking it.
    STALLED_AFTER = timedelta(seconds=60)

    @classmethod
    def live(cls, now: datetime) -> models.Q:
        """RUNNING rounds that a worker holds, or that were enqueued lately: not stalled."""
        return models.Q(state=cls.State.RUNNING) & (
            models.Q(leased_until__gt=now) | models.Q(leased_until__isnull=True, created_at__gt=now - cls.STALLED_AFTER)
        )

    @classmethod
    def stalled(cls, now: datetime) -> models.Q:
        """RUNNING rounds whose lease ran out (the worker died) or that nobody took."""
        return models.Q(state=cls.State.RUNNING) & (
            models.Q(leased_until__lte=now)
            | models.Q(leased_until__isnull=True, created_at__lte=now - cls.STALLED_AFTER)
        )

    def is_stalled(self, now: datetime) -> bool:
        if self.state != self.State.RUNNING:
            return False
        return self.leased_until <= now if self.leased_until else self.created_at <= now - self.STALLED_AFTER
