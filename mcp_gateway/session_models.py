"""The rows of older clients' sessions and streams (MCP_OLDER_CLIENTS=answer): a Session, the
CallStream that answers one of its requests with a call, and the StreamEvent rows that stream
sends (wires/sessions/). models.py exports them with the call's rows."""

from __future__ import annotations

import uuid
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
    round = models.ForeignKey("mcp_gateway.Round", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
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
