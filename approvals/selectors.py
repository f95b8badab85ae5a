"""Reads for the staff side."""

from __future__ import annotations

import statistics
import uuid
from datetime import timedelta
from typing import Any

from django.db import connection
from django.db.models import Count, Min, Q, QuerySet
from django.utils import timezone

from .models import ApprovalRequest


def waiting() -> Q:
    """Undecided and within its deadline: what staff can still decide. Past the deadline an
    approval leaves the queue at once, not when the sweep (approvals_expire) marks it expired."""
    return Q(status=ApprovalRequest.Status.PENDING, expires_at__gt=timezone.now())


def approvals_pending() -> QuerySet[ApprovalRequest]:
    """The queue: undecided and not expired, newest first."""
    # The policy with each: whether it changed since the request is shown with the approval.
    pending = ApprovalRequest.objects.filter(waiting()).select_related("policy").prefetch_related("signoffs")
    return pending.order_by("-created_at")


def tool_names() -> list[str]:
    """The tools approvals have asked to run, sorted: the queue's tool filter. Read by the database
    from the JSON of each request (its arrays' elements), not decoded here a row at a time."""
    table = ApprovalRequest._meta.db_table
    if connection.vendor == "postgresql":
        sql = (
            f"SELECT DISTINCT c->>'name' FROM {table},"
            " jsonb_array_elements(CASE jsonb_typeof(tool_calls) WHEN 'array' THEN tool_calls ELSE '[]' END) c"
            " WHERE jsonb_typeof(c) = 'object'"
        )
    else:  # SQLite, the embedded default
        sql = (
            f"SELECT DISTINCT json_extract(c.value, '$.name') FROM {table}, json_each({table}.tool_calls) c"
            f" WHERE json_type({table}.tool_calls) = 'array' AND c.type = 'object'"
        )
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return sorted(name for (name,) in cursor.fetchall() if isinstance(name, str))


def approval_by_ref(ref: str) -> ApprovalRequest | None:
    """The approval an API path names: by its approval_id, else the latest of the thread_id's."""
    try:
        by_id = ApprovalRequest.objects.filter(pk=uuid.UUID(ref)).first()
    except ValueError:
        by_id = None
    return by_id or ApprovalRequest.objects.filter(thread_id=ref).order_by("-created_at").first()


def pending_summary() -> dict[str, Any]:
    """How many approvals wait for staff (`count`), since when the oldest has waited (`oldest`),
    when the next one expires (`next_expiry`), and how many of them were escalated (`escalated`)."""
    return ApprovalRequest.objects.filter(waiting()).aggregate(
        count=Count("pk"),
        oldest=Min("created_at"),
        next_expiry=Min("expires_at"),
        escalated=Count("pk", filter=Q(escalated_at__isnull=False)),
    )


def decisions_by_day(*, days: int = 28) -> list[dict[str, Any]]:
    """For each of the last `days` days (oldest first): approvals approved, rejected and expired
    that day, and the median time from request to decision of those decided by staff."""
    today = timezone.localdate()
    first = today - timedelta(days=days - 1)
    decided = ApprovalRequest.objects.filter(decided_at__date__gte=first, decided_at__isnull=False).exclude(
        status=ApprovalRequest.Status.PENDING
    )
    counts: dict[Any, dict[str, int]] = {first + timedelta(days=n): {} for n in range(days)}
    waits: dict[Any, list[float]] = {day: [] for day in counts}
    for status, created_at, decided_at in decided.values_list("status", "created_at", "decided_at"):
        day = timezone.localdate(decided_at) if decided_at is not None else None
        if decided_at is None or day not in counts:
            continue
        counts[day][status] = counts[day].get(status, 0) + 1
        if status != ApprovalRequest.Status.EXPIRED:
            waits[day].append((decided_at - created_at).total_seconds())
    return [
        {
            "day": day,
            **{kind: counted.get(kind, 0) for kind in ("approved", "rejected", "expired")},
            "median_seconds": statistics.median(waits[day]) if waits[day] else None,
        }
        for day, counted in counts.items()
    ]
