"""Reads of the calls' tables for operators: `manage.py call_stats` and the gauges of /metrics."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Count, Q

from mcp_gateway.models import Round, ToolCall


def calls_by_status(now: datetime) -> dict[str, int]:
    """Calls within their lifetime by status, and the expired ones the sweep has yet to remove."""
    live = Q(expires_at__gt=now)
    statuses = ToolCall.Status
    return ToolCall.objects.aggregate(
        running=Count("pk", filter=live & Q(status=statuses.RUNNING)),
        paused=Count("pk", filter=live & Q(status=statuses.PAUSED)),
        awaiting_staff=Count("pk", filter=live & Q(status=statuses.AWAITING_STAFF)),
        finished=Count("pk", filter=live & Q(status=statuses.FINISHED)),
        expired=Count("pk", filter=~live),
    )


def oldest_pause(now: datetime) -> datetime | None:
    """When the longest-waiting paused call (within its lifetime) asked its questions."""
    asking = Round.objects.filter(
        state=Round.State.ASKING,
        finished_at__isnull=False,
        call__status=ToolCall.Status.PAUSED,
        call__expires_at__gt=now,
    )
    # ORDER BY ... LIMIT 1 rather than MIN(): PostgreSQL walks the index of asking rounds
    # (round_asking_since) from the oldest and stops at the first live one; MIN() over the join
    # reads every round.
    return asking.order_by("finished_at").values_list("finished_at", flat=True).first()
