"""Who staff are beyond their Django account: whom they delegate to while away, the names of their
API tokens, the Slack member they decide as, their wrong step-up passwords, and their passkeys with
the nonces and assertions of each decision confirmed with one."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models


class Delegation(models.Model):
    """A staff member's delegate for a period (while they are away): the delegate may decide
    approvals on their behalf, as them (their groups), and the audit names both."""

    delegator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="delegations_given")
    delegate = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="delegations_received"
    )
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-starts_at"]
        indexes = [models.Index(fields=["delegate", "delegator"])]

    def __str__(self) -> str:
        return f"{self.delegate} for {self.delegator}"

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.delegator_id is not None and self.delegator_id == self.delegate_id:
            errors["delegate"] = "Name someone else: a delegate decides on your behalf."
        if self.starts_at and self.ends_at and self.ends_at <= self.starts_at:
            errors["ends_at"] = "The period must end after it starts."
        if errors:
            raise ValidationError(errors)

    def covers(self, moment: Any) -> bool:
        return self.starts_at <= moment < self.ends_at


class StaffTokenName(models.Model):
    """The name a staff member gave one of their API tokens. The token itself is knox's (stored
    only as a digest); revoking it deletes this with it."""

    token = models.OneToOneField(
        "knox.AuthToken", primary_key=True, on_delete=models.CASCADE, related_name="staff_name"
    )
    name = models.CharField(max_length=100)

    def __str__(self) -> str:
        return self.name


class StaffIdentity(models.Model):
    """Who a member of staff is elsewhere: the Slack user whose button presses decide as them.
    Slack's interaction requests name the Slack user only by id (no e-mail), so the link is set
    here, by an administrator, rather than guessed."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="staff_identity")
    slack_user_id = models.CharField(
        max_length=32, unique=True, help_text="The member ID in Slack (profile → ⋮ → Copy member ID), e.g. U024BE7LH."
    )

    class Meta:
        verbose_name_plural = "staff identities"

    def __str__(self) -> str:
        return f"{self.user} as {self.slack_user_id} in Slack"


class PasswordThrottle(models.Model):
    """A member of staff's wrong step-up passwords in a row, and when the last one came: the next
    password is taken only after a back-off that doubles with each (step_up.password_refusal), as
    django-otp holds a TOTP device's codes, so the step-up page is no faster an oracle for a
    password than for a code."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="password_throttle")
    failure_count = models.PositiveIntegerField(default=0)
    last_failure_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.user}: {self.failure_count} wrong step-up password(s)"


class StaffPasskey(models.Model):
    """One of a member of staff's passkeys (WebAuthn credentials), registered by them in the admin
    (approvals/passkeys.py): the public key a decision's assertion is verified with, and the
    authenticator's signature counter, which must grow at each use (a cloned authenticator shows
    as a counter that went back)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="passkeys")
    name = models.CharField(max_length=100)
    # base64url, as WebAuthn's JSON gives it.
    credential_id = models.CharField(max_length=1400, unique=True)
    # COSE_Key, as the authenticator gave it at registration.
    public_key = models.BinaryField()
    sign_count = models.PositiveBigIntegerField(default=0)
    transports = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "pk"]
        verbose_name = "staff passkey"

    def __str__(self) -> str:
        return f"{self.name} ({self.user})"


class PasskeyNonce(models.Model):
    """A nonce the server issued for one decision by one member of staff on one approval: the
    passkey's challenge is derived from it and from what is decided (passkeys.challenge), and the
    decision service spends it at the first assertion that names it, so no assertion counts twice."""

    nonce = models.CharField(max_length=64, unique=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    approval = models.ForeignKey("approvals.ApprovalRequest", on_delete=models.CASCADE, related_name="+")
    issued_at = models.DateTimeField(auto_now_add=True)
    spent_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"nonce {self.nonce[:12]}… for {self.approval_id}"


class PasskeyProof(models.Model):
    """A passkey's assertion that confirmed one decision, kept as it came, with what its challenge
    was derived from, so it can be verified again offline (manage.py verify_audit) against the
    public key it was verified with then and the approval's digest as it is now."""

    approval = models.ForeignKey("approvals.ApprovalRequest", on_delete=models.CASCADE, related_name="passkey_proofs")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    username = models.CharField(max_length=150)
    passkey = models.ForeignKey(StaffPasskey, null=True, on_delete=models.SET_NULL, related_name="proofs")
    credential_id = models.CharField(max_length=1400)
    credential_name = models.CharField(max_length=100)
    public_key = models.BinaryField()
    authenticator_data = models.BinaryField()
    client_data_json = models.BinaryField()
    signature = models.BinaryField()
    # What the challenge is derived from, besides the approval's id and digest.
    nonce = models.CharField(max_length=64)
    decision = models.CharField(max_length=16)
    edited_digest = models.CharField(max_length=64, blank=True)
    action_digest = models.CharField(max_length=64, blank=True)
    rp_id = models.CharField(max_length=253)
    origin = models.CharField(max_length=300)
    sign_count = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.username}'s passkey {self.credential_name} on {self.approval_id}"
