"""What the staff side keeps to prove and to refuse: the append-only audit chain and its head, and
the keys already spent (Slack signatures, e-mail links), so none is taken twice."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class AuditEvent(models.Model):
    """One link of the append-only, hash-chained audit (approvals/audit.py): what happened to an
    approval, who did it, and the hash that covers the previous link's hash and this event's
    canonical JSON. Written only by audit.record, never updated or deleted; `manage.py
    verify_audit` recomputes the chain. The approval is named, not linked: a foreign key's
    ON DELETE would have to update or delete rows the database role may not touch."""

    seq = models.BigIntegerField(unique=True)
    at = models.DateTimeField(db_index=True)
    kind = models.CharField(max_length=32)
    approval_id = models.UUIDField(null=True, blank=True, db_index=True)
    actor = models.CharField(max_length=150, blank=True)
    data = models.JSONField(default=dict)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)

    class Meta:
        ordering = ["seq"]
        verbose_name = "audit event"

    def __str__(self) -> str:
        return f"#{self.seq} {self.kind}"


class AuditHead(models.Model):
    """The chain's one head row: the last event's seq and hash. Appends lock it, so concurrent
    writers take turns and never fork the chain; verify_audit compares it with the last event, so
    rows deleted from the end are seen too."""

    seq = models.BigIntegerField(default=0)
    hash = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"audit head #{self.seq}"


class SpentKey(models.Model):
    """A one-time thing, used: a Slack interaction's signature (a replay of it is refused within the
    five minutes its timestamp is accepted) or an e-mail link's nonce (each link decides once). The
    unique key makes two uses at once take turns: the second insert fails."""

    class Kind(models.TextChoices):
        SLACK = "slack", "Slack interaction"
        EMAIL = "email", "e-mail link"

    kind = models.CharField(max_length=8, choices=Kind.choices)
    key = models.CharField(max_length=128, unique=True)
    spent_at = models.DateTimeField(default=timezone.now, db_index=True)

    def __str__(self) -> str:
        return f"{self.kind} {self.key[:12]}…"
