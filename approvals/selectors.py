"""Reads for the staff side."""

from __future__ import annotations

from django.db.models import Q, QuerySet
from django.utils import timezone

from .models import ApprovalRequest


def waiting() -> Q:
    """Undecided and within its deadline: what staff can still decide. Past the deadline an
    approval leaves the queue at once, not when the sweep (approvals_expire) marks it expired."""
    return Q(status=ApprovalRequest.Status.PENDING, expires_at__gt=timezone.now())


def approvals_pending() -> QuerySet[ApprovalRequest]:
    """The queue: undecided and not expired, newest first."""
    return ApprovalRequest.objects.filter(waiting()).order_by("-created_at")
