"""An approval: one ApprovalRequest per staff_approval interrupt, each approval of it towards M of
N (Signoff), and the archive of the messages staff let through (ContactMessage).

The LangGraph checkpoint stays the source of truth for what is paused; these rows are the queue
staff work from, the record of who decided what and when, and the answer the resumed run gave.
They outlive the gateway's ToolCall (removed with its thread after the call finishes), so the
link to it is nullable and the thread and graph are kept here too.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.utils import timezone

from .. import digests
from .policies import ApprovalPolicy

# The permission to approve or reject (ApprovalRequest.Meta.permissions), in the admin and the API.
DECIDE_PERMISSION = "approvals.decide_approval"


class DecidedVia(models.TextChoices):
    ADMIN = "admin", "the Django admin"
    API = "api", "the REST API"
    SLACK = "slack", "Slack"
    EMAIL = "email", "an e-mail link"
    EXPIRED = "expired", "nobody: it expired"


class ApprovalRequest(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"
        # Staff sent the agent back with what must change (the note): it revises its call and asks
        # again, on a new approval that names this one as the attempt it revises.
        CHANGES_REQUESTED = "changes_requested", "Changes requested"
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
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
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
    # The resumed run's final answer; answered_at is set once, when it lands (see resumes.py).
    answer = models.TextField(blank=True)
    answered_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    # Still pending APPROVAL_ESCALATE_AFTER after it was queued: staff were told again then.
    escalated_at = models.DateTimeField(null=True, blank=True)
    # The rule that required staff (None: the tool's high_risk flag, or the graph's own interrupt).
    # policy_name is a snapshot: the record still names the rule after it is edited or deleted.
    policy = models.ForeignKey(
        ApprovalPolicy, null=True, blank=True, on_delete=models.SET_NULL, related_name="approval_requests"
    )
    policy_name = models.CharField(max_length=120, blank=True)
    # How many different staff must approve (M of N; the two-person rule: 2); one rejection ends it.
    approvals_required = models.PositiveSmallIntegerField(default=1)
    # One JSON Schema (or None) per tool call: what edited arguments are checked against.
    argument_schemas = models.JSONField(null=True, blank=True)
    # Who may decide (approvals/deciders.py): the members of approver_group when there is one,
    # which escalation moves along the policy's groups (escalation_level: how far).
    approver_group = models.ForeignKey(Group, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    escalation_level = models.PositiveSmallIntegerField(default=0)
    # The MCP caller's own user, when the call was made with a user's token: they may not approve it.
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The staff member a delegate decided for (the audit's "on behalf of"); empty otherwise.
    decided_on_behalf_of_username = models.CharField(max_length=150, blank=True)
    # The earlier attempt this one revises, after staff requested changes on it (see `attempts`).
    revision_of = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="revision"
    )
    # The binding of the decision to the action (approvals/digests.py): who called the MCP tool,
    # the version of the rule the agent evaluated, the SHA-256 of the action as requested, and of
    # the action as approved (the same, unless staff edited the arguments). The resume runs only
    # what approved_digest names.
    # policy_key is the rule's id as recorded: it outlives the rule, when policy turns null.
    caller = models.CharField(max_length=255, blank=True)
    policy_key = models.PositiveIntegerField(null=True, blank=True)
    policy_version = models.PositiveIntegerField(null=True, blank=True)
    digest = models.CharField(max_length=64, blank=True)
    approved_digest = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-created_at"]
        permissions = [("decide_approval", "Can approve or reject a paused tool call")]
        constraints = [
            models.UniqueConstraint(fields=["thread_id", "interrupt_id"], name="one_approval_per_interrupt"),
        ]
        indexes = [
            models.Index(fields=["status", "expires_at"]),
            # The admin's list, newest first, reads a page of 100 without sorting every approval.
            models.Index(fields=["created_at", "id"], name="approval_by_creation"),
        ]

    def __str__(self) -> str:
        return f"{self.tool_names or 'approval'} ({self.get_status_display().lower()})"

    @property
    def approvals_given(self) -> int:
        return len(self.signoffs.all())

    @property
    def progress(self) -> str:
        """ "1 of 2" while a two-person approval waits for its second approver; "" otherwise."""
        if self.approvals_required < 2 or self.status != self.Status.PENDING:
            return ""
        return f"{self.approvals_given} of {self.approvals_required}"

    @property
    def required_by(self) -> str:
        """Which rule sent this call to staff, for the audit."""
        return self.policy_name or "the tool's high_risk flag"

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
        who = self.decided_by_username
        if who and self.decided_on_behalf_of_username:
            who = f"{who} on behalf of {self.decided_on_behalf_of_username}"
        if self.decided_via == DecidedVia.ADMIN:
            return f"{who} (in the Django admin)"
        if self.decided_via == DecidedVia.API:
            return f"{who} (through the REST API)" if who else "the REST API (admin token)"
        if self.decided_via == DecidedVia.SLACK:
            return f"{who} (in Slack)"
        if self.decided_via == DecidedVia.EMAIL:
            return f"{who} (through an e-mail link)"
        return DecidedVia(self.decided_via).label if self.decided_via else ""

    @property
    def decision(self) -> dict[str, Any]:
        """The value interrupt() returns in the graph (approvals/interrupts.py)."""
        decision: dict[str, Any] = {"approved": self.status == self.Status.APPROVED, "note": self.note or None}
        if self.edited_tool_calls is not None and decision["approved"]:
            decision["tool_calls"] = self.edited_tool_calls
        if self.status == self.Status.CHANGES_REQUESTED:
            # Not approved, and not a rejection either: the note says what must change.
            decision["changes_requested"] = True
        if decision["approved"]:
            decision["digest"] = self.approved_digest
        return decision

    def attempts(self) -> list[ApprovalRequest]:
        """Every attempt at this call, oldest first: each revision staff asked for is a new
        approval linked to the one it revises (one query per attempt; a thread has a few)."""
        first = self
        while first.revision_of_id is not None and first.revision_of is not None:
            first = first.revision_of
        chain = [first]
        while (following := ApprovalRequest.objects.filter(revision_of=chain[-1]).first()) is not None:
            chain.append(following)
        return chain

    def action(self, tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The action its digest covers: as requested, or with other `tool_calls` (staff's edit)."""
        return digests.action(
            graph=self.graph,
            tool_calls=self.tool_calls if tool_calls is None else tool_calls,
            caller=self.caller,
            policy_id=self.policy_key,
            policy_version=self.policy_version,
        )

    @property
    def current_policy_version(self) -> int | None:
        """The version of its rule now: 0 once the rule is deleted, None without a recorded rule."""
        if self.policy_version is None:
            return None
        return self.policy.version if self.policy is not None else 0

    @property
    def policy_changed(self) -> bool:
        """The rule that required staff was edited (or deleted) since the call was requested."""
        return self.policy_version is not None and self.current_policy_version != self.policy_version

    @property
    def approved_tool_calls(self) -> list[dict[str, Any]]:
        """The tool calls as they run once approved: staff's edit, else the agent's own."""
        return self.edited_tool_calls if self.edited_tool_calls is not None else self.tool_calls


class Signoff(models.Model):
    """One staff member's approval of an ApprovalRequest, each its own decision under the
    request's row lock. The request is approved once it has approvals_required of them."""

    approval = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE, related_name="signoffs")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Kept after the account is deleted, as decided_by_username is.
    username = models.CharField(max_length=150, blank=True)
    # The staff member `user` approved for, as their delegate (Delegation); the one who counts
    # towards M of N and whose group membership was checked.
    on_behalf_of = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    on_behalf_of_username = models.CharField(max_length=150, blank=True)
    via = models.CharField(max_length=16, choices=DecidedVia.choices)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            # The two-person rule, kept by the database too: one approval per person per request.
            models.UniqueConstraint(fields=["approval", "user"], name="one_signoff_per_person"),
        ]

    def __str__(self) -> str:
        return f"approved by {self.who}"

    @property
    def who(self) -> str:
        who = self.username or "the admin token"
        return f"{who} on behalf of {self.on_behalf_of_username}" if self.on_behalf_of_username else who


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
