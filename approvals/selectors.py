"""Reads for the staff side."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Count, Min, Q, QuerySet
from django.utils import timezone

from .models import ApprovalRequest


def waiting() -> Q:
    """Undecided and within its deadline: what staff can still decide. Past the deadline an
    approval leaves the queue at once, not when the sweep (approvals_expire) marks it expired."""
    return Q(status=ApprovalRequest.Status.PENDING, expires_at__gt=timezone.now())


def approvals_pending() -> QuerySet[ApprovalRequest]:
    """The queue: undecided and not expired, newest first."""
    return ApprovalRequest.objects.filter(waiting()).order_by("-created_at")


def approval_by_ref(ref: str) -> ApprovalRequest | None:
    """The approval an API path names: by its approval_id, else the latest of the thread_id's."""
    try:
        by_id = ApprovalRequest.objects.filter(pk=uuid.UUID(ref)).first()
    except ValueError:
        by_id = None
    return by_id or ApprovalRequest.objects.filter(thread_id=ref).order_by("-created_at").first()


def pending_summary() -> dict[str, Any]:
    """How many approvals wait for staff (`count`), since when the oldest has waited (`oldest`), and
    when the next one expires (`next_expiry`)."""
    return ApprovalRequest.objects.filter(waiting()).aggregate(
        count=Count("pk"), oldest=Min("created_at"), next_expiry=Min("expires_at")
    )
