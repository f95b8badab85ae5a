"""The lease a worker holds on the row of the run it makes (a round's, a staff decision's resume):
a time written on the row, RUN_LEASE_SECONDS ahead, that its process's heartbeat renews while it
lives (heartbeat.py). However many copies of a task run, the one that takes the lease runs; once
nobody renews it (the worker died), it runs out and a later copy takes the row over.

Each change is a conditional UPDATE, so of two workers racing for one change exactly one makes it:
`take` only a row nobody holds, `Held.renew` and `Held.end` only while the row still holds the
time this worker last wrote. A worker whose lease was taken over (it could not reach the database
for the whole lease) can then neither extend the new holder's lease nor record over its run, and
learns that it lost the row (renew is False) and stops.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

# Longer than any gap between a run being due (its task enqueued) and a worker taking it, or a
# request starting to wait for it: a run nobody took in this time is stalled.
STALLED_AFTER = timedelta(seconds=60)


def lease_end(now: datetime | None = None) -> datetime:
    """When a lease taken or renewed now runs out."""
    return (now or timezone.now()) + timedelta(seconds=settings.RUN_LEASE_SECONDS)


def take(rows: models.QuerySet[Any], field: str, now: datetime | None = None) -> datetime | None:
    """Lease `rows` (one row, with the conditions it may be taken on) until lease_end(now); None when
    it did not match (another worker holds it, or there is nothing to run)."""
    until = lease_end(now)
    return until if rows.update(**{field: until}) else None


def free(field: str, now: datetime) -> models.Q:
    """Held by nobody: never leased, or its lease ran out."""
    return models.Q(**{f"{field}__isnull": True}) | models.Q(**{f"{field}__lte": now})


def stalled(field: str, due: str, now: datetime) -> models.Q:
    """Rows whose lease ran out (the worker died), or that nobody leased within STALLED_AFTER of
    `due` (when the run was enqueued)."""
    return models.Q(**{f"{field}__lte": now}) | models.Q(
        **{f"{field}__isnull": True, f"{due}__lte": now - STALLED_AFTER}
    )


def live(field: str, due: str, now: datetime) -> models.Q:
    """Rows a worker holds, or whose run was enqueued lately: the others of `stalled`."""
    return models.Q(**{f"{field}__gt": now}) | models.Q(**{f"{field}__isnull": True, f"{due}__gt": now - STALLED_AFTER})


def is_stalled(until: datetime | None, due: datetime, now: datetime) -> bool:
    """`stalled`, for a row already read."""
    return until <= now if until else due <= now - STALLED_AFTER


class Held:
    """This worker's lease on `row`: its while the row's `field` holds the value this worker last
    wrote, and the row is still `running` (a Q: the run is not over). `lock` makes one change at a
    time: the heartbeat's thread renews while the run's thread records, and what they match on must
    be the value in the row."""

    def __init__(self, row: models.Model, field: str, running: models.Q, *, remember_attempt: bool) -> None:
        self.row, self.field, self._running = row, field, running
        # Ended, the lease runs out at once instead of being cleared: the row then shows it was
        # attempted, so the next attempt looks for the checkpoint the last one may have left.
        self._remember_attempt = remember_attempt
        self.lock = threading.Lock()

    @property
    def until(self) -> datetime | None:
        return getattr(self.row, self.field)

    def _mine(self) -> models.QuerySet[Any]:
        # Built when used (a renewal, an end), not with the lease: a run that ends within its first
        # heartbeat, as most do, never needs it, and building a query cost 1.6 % of a busy worker's
        # CPU (docs/performance.md, "Throughput as clients grow").
        rows = type(self.row)._default_manager.filter(self._running, pk=self.row.pk)
        return rows.filter(**{self.field: self.until})

    def renew(self) -> bool:
        """The worker is alive (its heartbeat): it holds the row another RUN_LEASE_SECONDS. False
        once the run is over, or the lease is another worker's."""
        with self.lock:
            until = lease_end()
            if not self._mine().update(**{self.field: until}):
                return False
            setattr(self.row, self.field, until)
            return True

    def end(self) -> None:
        """The attempt failed on our side (not the agent's), or its worker is stopping: the next
        attempt may take the row at once."""
        with self.lock:
            self._mine().update(**{self.field: timezone.now() if self._remember_attempt else None})
