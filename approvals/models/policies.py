"""The rules of which tool calls wait for staff, kept by staff in the admin (approvals/policies.py
evaluates them): each with its outcome, its M of N, its approver groups in turn, and its version."""

from __future__ import annotations

import math
from typing import Any

from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import models

# The most approvals a policy or an interrupt may require (M of N).
MAX_APPROVALS = 10


def is_json_number(value: Any) -> bool:
    # bool is an int to Python, not a number to JSON.
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


class Outcome(models.TextChoices):
    """What a policy does with a tool call it matches."""

    RUN = "run", "Run without approval"
    APPROVE = "approve", "Staff approval"
    TWO_APPROVALS = "two_approvals", "Two approvals (by two different staff)"
    REFUSE = "refuse", "Refuse"


class Operator(models.TextChoices):
    """How an argument condition compares the argument at its path with its value."""

    EQUALS = "equals", "equals"
    NOT_EQUALS = "not_equals", "does not equal"
    GREATER = "greater", "is greater than"
    LESS = "less", "is less than"
    CONTAINS = "contains", "contains (text or list)"
    MATCHES = "matches", "matches the pattern (text, * and ?)"
    PRESENT = "present", "is present"


class ApprovalPolicy(models.Model):
    """One rule of which tool calls need staff: the first enabled rule (by position) whose
    patterns and condition match a call decides its outcome (approvals/policies.py)."""

    position = models.PositiveIntegerField(
        default=100, help_text="Rules are tried from the lowest position up; the first that matches decides."
    )
    name = models.CharField(max_length=120, help_text="What staff see on the approvals this rule requires.")
    enabled = models.BooleanField(default=True)
    graph_pattern = models.CharField(
        "graph", max_length=128, default="*", help_text="The graph's name, or a pattern: * any text, ? one character."
    )
    tool_pattern = models.CharField(
        "tool", max_length=128, default="*", help_text="The tool's name, or a pattern: * any text, ? one character."
    )
    argument_path = models.CharField(
        max_length=200,
        blank=True,
        help_text="Optional condition on the arguments: a JSON pointer such as /amount or /recipient/email. "
        "Empty: the rule matches whatever the arguments are.",
    )
    operator = models.CharField(max_length=16, choices=Operator.choices, blank=True)
    value = models.JSONField(
        null=True, blank=True, help_text='A JSON value to compare with: 100, "text" (with the quotes), true.'
    )
    outcome = models.CharField(max_length=16, choices=Outcome.choices, default=Outcome.APPROVE)
    # M of N: the two-person rule generalised. N is whoever may decide (the approver group's
    # members, or every decider when the rule names no group).
    approvals_required = models.PositiveSmallIntegerField(
        "approvals required",
        default=1,
        help_text="How many different staff must approve a call this rule sends to staff (M of N). "
        "“Two approvals” means at least 2.",
    )
    approver_groups = models.ManyToManyField(
        Group, through="PolicyApproverGroup", blank=True, related_name="approval_policies"
    )
    # Step-up (approvals/step_up.py): a decision is taken only from staff who proved again who
    # they are: the password within STEP_UP_MINUTES, or a code from their TOTP device.
    requires_step_up = models.BooleanField(
        "require step-up",
        default=False,
        help_text="Before deciding, staff enter their password again (it counts for STEP_UP_MINUTES) or a "
        "code from their TOTP device; the REST API takes only a staff token with an X-OTP-Code header.",
    )
    # A passkey's assertion is bound to the decision itself (approvals/passkeys.py); a password
    # or a code only says who is there.
    requires_passkey = models.BooleanField(
        "step-up with a passkey only",
        default=False,
        help_text="With step-up required: only a passkey confirms a decision, each bound to that decision "
        "(approve, reject or request changes, and the arguments as edited); the password and TOTP codes are "
        "refused, and so is the REST API. Staff register passkeys at /admin/passkeys/.",
    )
    # One more at each edit (save): an approval records the version it was requested under, is
    # bound to it (its digest), and staff are told when the rule changed while it waited.
    version = models.PositiveIntegerField(default=1, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["position", "pk"]
        verbose_name = "approval policy"
        verbose_name_plural = "approval policies"

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            self.version += 1
            if kwargs.get("update_fields") is not None:
                kwargs["update_fields"] = {*kwargs["update_fields"], "version"}
        super().save(*args, **kwargs)

    @property
    def required_approvals(self) -> int:
        """How many different staff must approve a call this rule sends to staff."""
        if self.outcome == Outcome.TWO_APPROVALS:
            return max(2, self.approvals_required)
        return max(1, self.approvals_required)

    def approver_group_ids(self) -> list[int]:
        """The groups that decide its approvals, in turn: the first, then the next at each escalation."""
        return list(self.group_links.order_by("position", "pk").values_list("group_id", flat=True))

    def clean(self) -> None:
        """Refuse a rule that could never be read as meant, each reason beside its field."""
        errors: dict[str, str] = {}
        for field in ("graph_pattern", "tool_pattern"):
            if not getattr(self, field).strip():
                errors[field] = "Give a name or a pattern; * matches every name."
        path, operator, value = self.argument_path, self.operator, self.value
        if not path:
            if operator or value is not None:
                errors["argument_path"] = "A condition needs the argument's path, such as /amount."
        elif not path.startswith("/"):
            errors["argument_path"] = f"A JSON pointer starts with /: did you mean /{path}?"
        if path and not operator:
            errors["operator"] = "Choose how to compare the argument."
        elif path and operator == Operator.PRESENT and value is not None:
            errors["value"] = "“is present” compares with nothing: leave the value empty."
        elif path and operator != Operator.PRESENT and value is None:
            errors["value"] = 'Give a JSON value to compare with: 100, "text" (with the quotes), true.'
        elif path and operator in (Operator.GREATER, Operator.LESS) and not is_json_number(value):
            errors["value"] = "“greater than” and “less than” compare numbers: give a number such as 100."
        elif path and operator == Operator.MATCHES and not isinstance(value, str):
            errors["value"] = 'A pattern is text: give it in quotes, such as "*@example.com".'
        if self.requires_passkey and not self.requires_step_up:
            errors["requires_passkey"] = "A passkey is a kind of step-up: tick “require step-up” too."
        if not 1 <= self.approvals_required <= MAX_APPROVALS:
            errors["approvals_required"] = f"Between 1 and {MAX_APPROVALS}."
        if errors:
            raise ValidationError(errors)


class PolicyApproverGroup(models.Model):
    """One group whose members decide a policy's approvals. The lowest position decides first;
    an approval still pending APPROVAL_ESCALATE_AFTER later is handed to the next one."""

    policy = models.ForeignKey(ApprovalPolicy, on_delete=models.CASCADE, related_name="group_links")
    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="+")
    position = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["position", "pk"]
        verbose_name = "approver group"
        constraints = [models.UniqueConstraint(fields=["policy", "group"], name="one_link_per_policy_group")]

    def __str__(self) -> str:
        return self.group.name
