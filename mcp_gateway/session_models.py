"""The rows of older clients' sessions and streams (MCP_OLDER_CLIENTS=answer), and every change of
them: a Session, the CallStream that answers one of its requests with a call, and the StreamEvent
rows that stream sends (wires/sessions/). models.py exports them with the call's rows."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import models
from django.utils import timezone

from mcp_gateway.exact_json import ExactJSONField


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
    # The clientInfo its initialize declared (protocol.declared_client), for the calls it starts.
    client_info = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        # The per-caller cap counts a caller's live sessions at every initialize.
        indexes = [models.Index(fields=["caller", "expires_at"], name="session_by_caller")]

    def __str__(self) -> str:
        return f"session {self.pk} of {self.caller}"

    @classmethod
    def open(
        cls,
        *,
        key_hash: str,
        caller: str,
        protocol_version: str,
        capabilities: dict,
        client_info: dict | None,
        expires_at: datetime,
    ) -> Session:
        """A session an initialize opened."""
        return cls.objects.create(
            key_hash=key_hash,
            caller=caller,
            protocol_version=protocol_version,
            capabilities=capabilities,
            client_info=client_info,
            expires_at=expires_at,
        )

    def keep_until(self, until: datetime, *, now: datetime) -> None:
        """Kept alive until then, unless it expired meanwhile: the sweep may be removing it."""
        Session.objects.filter(pk=self.pk, expires_at__gt=now).update(expires_at=until)
        self.expires_at = until

    def end(self) -> None:
        """Ended by its client (DELETE): its streams' rows go with it, its calls go on."""
        Session.objects.filter(pk=self.pk).delete()

    @classmethod
    def remove_expired(cls, now: datetime) -> int:
        """The calls' sweep: the sessions expired by now, with their streams' rows; how many."""
        _, removed = cls.objects.filter(expires_at__lte=now).delete()
        return removed.get(cls._meta.label, 0)


class CallStream(models.Model):
    """The event stream that answers one tools/call (or tasks/result) of a session: its call's
    questions, then the response (call_streams.py). Its events are rows, so any web process
    replays them."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="streams")
    call = models.ForeignKey("mcp_gateway.ToolCall", on_delete=models.CASCADE, related_name="streams")
    # The JSON-RPC id its last event answers: a tools/call's, or a tasks/result's (`for_task`: the
    # 2025-11-25 tasks utility's stream, whose messages name the call's task).
    request_id = models.JSONField()
    for_task = models.BooleanField(default=False)
    # The request's progressToken: the run's progress goes on the stream as notifications/progress.
    progress_token = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"stream {self.pk} of {self.call_id}"

    @classmethod
    def open(
        cls, *, session: Session, call_id: Any, request_id: str | int, for_task: bool, progress_token: str | int | None
    ) -> CallStream:
        """The stream that answers a request of the session with its call."""
        return cls.objects.create(
            session=session, call_id=call_id, request_id=request_id, for_task=for_task, progress_token=progress_token
        )


class StreamEvent(models.Model):
    """One event of a call's stream: a question (one elicitation/create request; its JSON-RPC id
    and its SSE id are `<stream id>.<event id>`) and the client's answer to it, a progress or
    task status notification, a URL question's completion, or the stream's final response. The
    event id orders the stream."""

    class Kind(models.TextChoices):
        QUESTION = "question", "Question"
        PROGRESS = "progress", "Progress"
        STATUS = "status", "Task status"
        COMPLETE = "complete", "URL question completed"
        RESPONSE = "response", "Response"

    id = models.BigAutoField(primary_key=True)
    stream = models.ForeignKey(CallStream, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    round = models.ForeignKey("mcp_gateway.Round", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    # The question's key in its round's requests; a progress or task status notification's number;
    # the id of the question a completion tells of.
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
            models.UniqueConstraint(
                fields=["stream", "key"], condition=models.Q(kind="complete"), name="one_completion_per_question"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.pk} of {self.stream_id}"

    def take_answer(self, answer: dict[str, Any], *, refused: bool = False) -> bool:
        """An open question answered. However many responses to it arrive at once, one takes it
        (a conditional UPDATE)."""
        open_ = StreamEvent.objects.filter(pk=self.pk, answered_at__isnull=True)
        return bool(open_.update(answer=answer, answered_at=timezone.now(), refused=refused))

    def refuse(self) -> None:
        """The answer to this question was refused, and the question is asked no more."""
        StreamEvent.objects.filter(pk=self.pk).update(refused=True)

    def ask_again(self, round_: models.Model, key: str, reason: str) -> None:
        """An answer the checks refused: the question `key` of `round_` asked again with the
        reason, and this one marked refused if it is that question (a review's refusal can name
        another of the round's questions, and this answer is kept)."""
        StreamEvent.objects.filter(pk=self.pk).update(refused=key == self.key)
        StreamEvent.objects.create(
            stream_id=self.stream_id, kind=StreamEvent.Kind.QUESTION, round_id=round_.pk, key=key, reason=reason
        )

    # A stream's events are recorded by whichever process serves it; two serving it at once record
    # each once: the second insert meets a constraint of Meta and is dropped.

    @staticmethod
    def ask(stream: CallStream, round_: models.Model, keys: Iterable[str], reason: str) -> None:
        """The questions `keys` of `round_`, asked on the stream (with why, if asked again)."""
        kind = StreamEvent.Kind.QUESTION
        questions = [StreamEvent(stream=stream, kind=kind, round_id=round_.pk, key=k, reason=reason) for k in keys]
        StreamEvent.objects.bulk_create(questions, ignore_conflicts=True)

    @staticmethod
    def notify(stream: CallStream, kind: str, number: int, message: dict[str, Any]) -> None:
        """A progress or task status notification, the `number`th of its kind on the stream."""
        event = StreamEvent(stream=stream, kind=kind, key=str(number), message=message)
        StreamEvent.objects.bulk_create([event], ignore_conflicts=True)

    @staticmethod
    def complete(stream: CallStream, question_ids: Iterable[int], messages: Iterable[dict[str, Any]]) -> None:
        """The completions of the URL questions `question_ids` (events of the stream), each with its
        notification."""
        kind = StreamEvent.Kind.COMPLETE
        events = [
            StreamEvent(stream=stream, kind=kind, key=str(question), message=message)
            for question, message in zip(question_ids, messages, strict=True)
        ]
        StreamEvent.objects.bulk_create(events, ignore_conflicts=True)

    @staticmethod
    def respond(stream: CallStream, message: dict[str, Any]) -> None:
        """The stream's response, its last event."""
        event = StreamEvent(stream=stream, kind=StreamEvent.Kind.RESPONSE, message=message)
        StreamEvent.objects.bulk_create([event], ignore_conflicts=True)
