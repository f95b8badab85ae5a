"""How long a call is kept (docs/rules.md, "Lifetime"), in one place.

A paused call expires 24 hours after its latest round of questions; a call finished by a request
with a requestState is kept 10 minutes, so the same answers resent get the same result; one
finished without a requestState goes at once. A call whose later round needs url elicitation
from a client that declared only form is kept 10 minutes, for the client to come back with url
declared. A finished MCP task is kept MCP_TASK_FINISHED_TTL (an hour), for its client to read.
A shorter default_ttl in the thread TTL configuration shortens every lifetime.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings


def lifetime(base: timedelta) -> timedelta:
    """`base`, shortened by a shorter default_ttl (MCP_DEFAULT_TTL_MINUTES)."""
    if settings.MCP_DEFAULT_TTL_MINUTES is not None:
        return min(base, timedelta(minutes=settings.MCP_DEFAULT_TTL_MINUTES))
    return base


def paused_until(since: datetime) -> datetime:
    return since + lifetime(settings.MCP_PAUSED_TTL)


def finished_until(since: datetime) -> datetime:
    return since + lifetime(settings.MCP_FINISHED_TTL)


def missing_capability_until(since: datetime) -> datetime:
    return since + lifetime(settings.MCP_MISSING_CAPABILITY_TTL)


def task_finished_until(since: datetime) -> datetime:
    """A finished task is kept for its client to read (its ttlMs), then removed by the sweep."""
    return since + lifetime(settings.MCP_TASK_FINISHED_TTL)
