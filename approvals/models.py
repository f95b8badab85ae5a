"""The staff side of a paused call: one ApprovalRequest per staff_approval interrupt, and the
archive of the messages staff let through.

The LangGraph checkpoint stays the source of truth for what is paused; these rows are the queue
staff work from, the record of who decided what and when, and the answer the resumed run gave.
They outlive the gateway's ToolCall (removed with its thread after the call finishes), so the
link to it is nullable and the thread and graph are kept here too.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

# The permission to approve or reject (ApprovalRequest.Meta.permissions), in the admin and the API.
DECIDE_PERMISSION = "approvals.decide_approval"


class DecidedVia(models.TextChoices):
    ADMIN = "admin", "the Django admin"
    API = "api", "the REST API"
    EXPIRED = "expired", "nobody: it expired"


class ApprovalRequest(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"
        EXPIRED = "expired", "Expired"
        # The MCP client cancelled the task waiting for it: nobody can decide it any more.
        WITHDRAWN = "withdrawn", "Withdrawn by the client"

    # A public id: it goes to the MCP client in structuredContent, so it should not be guessable.
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    call = models.ForeignKey(
        "mcp_gateway.ToolCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="approvals"
    )
    thread_id = models.CharField(max_length=64, db_index=True)
    graph = models.CharField(max_length=128)
    interrupt_id = models.CharField(max_length=128)
    # The interrupt's payload: [{"name", "input"}] and the visitor's message that led to them.
    tool_calls = models.JSONField(default=list)
    visitor_message = models.TextField(blank=True)
    # What the agent told the visitor before it paused (its last words in the run).
    agent_message = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    # The audit of who decided. decided_via says through which door (the REST API's shared
    # ADMIN_TOKEN has no user; a staff API token does); decided_by_username keeps the user's name
    # after their account is deleted, when decided_by (a link for as long as it exists) turns null.
    decided_via = models.CharField(max_length=16, choices=DecidedVia.choices, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_by_username = models.CharField(max_length=150, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    # Held by the worker that resumes the thread, so two copies of the resume never both run it.
    resume_leased_until = models.DateTimeField(null=True, blank=True)
    note = models.TextField(blank=True)
    # The arguments staff approved when they edited them: what ran and was archived. The audit
    # shows them next to the original (tool_calls).
    edited_tool_calls = models.JSONField(null=True, blank=True)
    # The resumed run's final answer; answered_at is set once, when it lands (see services.py).
    answer = models.TextField(blank=True)
    answered_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    # Still pending APPROVAL_ESCALATE_AFTER after it was queued: staff were told again then.
    escalated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        permissions = [("decide_approval", "Can approve or reject a paused tool call")]
        constraints = [
            models.UniqueConstraint(fields=["thread_id", "interrupt_id"], name="one_approval_per_interrupt"),
        ]
        indexes = [models.Index(fields=["status", "expires_at"])]

    def __str__(self) -> str:
        return f"{self.tool_names or 'approval'} ({self.get_status_display().lower()})"

    @property
    def tool_names(self) -> str:
        return ", ".join(call.get("name", "?") for call in self.tool_calls)

    @property
    def is_expired(self) -> bool:
        return self.status == self.Status.EXPIRED or self.expires_at <= timezone.now()

    @property
    def is_decidable(self) -> bool:
        return self.status == self.Status.PENDING and not self.is_expired

    @property
    def decider(self) -> str:
        """Who decided, for the audit: a name that outlives the account, and the door they used."""
        if self.decided_via == DecidedVia.ADMIN:
            return f"{self.decided_by_username} (in the Django admin)"
        if self.decided_via == DecidedVia.API:
            who = self.decided_by_username
            return f"{who} (through the REST API)" if who else "the REST API (admin token)"
        return DecidedVia(self.decided_via).label if self.decided_via else ""

    @property
    def decision(self) -> dict[str, Any]:
        """The value interrupt() returns in the graph (approvals/interrupts.py)."""
        decision: dict[str, Any] = {"approved": self.status == self.Status.APPROVED, "note": self.note or None}
        if self.edited_tool_calls is not None and decision["approved"]:
            decision["tool_calls"] = self.edited_tool_calls
        return decision

    @property
    def approved_tool_calls(self) -> list[dict[str, Any]]:
        """The tool calls as they run once approved: staff's edit, else the agent's own."""
        return self.edited_tool_calls if self.edited_tool_calls is not None else self.tool_calls


class ContactMessage(models.Model):
    """A high-risk action staff approved and the run carried out (the graph's contact_drafts)."""

    approval = models.ForeignKey(ApprovalRequest, on_delete=models.PROTECT, related_name="contact_messages")
    # Its index in the thread's contact_drafts: a redelivered resume can never archive a draft twice.
    position = models.PositiveIntegerField()
    tool = models.CharField(max_length=128)
    input = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["approval", "position"], name="one_message_per_draft")]

    def __str__(self) -> str:
        return f"{self.tool} from {self.input.get('email') or self.input.get('name') or 'a visitor'}"
