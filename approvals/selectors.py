"""Reads for the staff side."""

from __future__ import annotations

from django.db.models import QuerySet
from django.utils import timezone

from .models import ApprovalRequest


def approvals_pending() -> QuerySet[ApprovalRequest]:
    """The queue: undecided and not expired, newest first."""
    return ApprovalRequest.objects.filter(
        status=ApprovalRequest.Status.PENDING, expires_at__gt=timezone.now()
    ).order_by("-created_at")
