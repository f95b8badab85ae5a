"""The lease a worker holds on the row of the run it makes (a round's, a staff decision's resume):
a time written on the row, RUN_LEASE_SECONDS ahead, that its process's heartbeat renews while it
lives (heartbeat.py). However many copies of a task run, the one that takes the lease runs; once
nobody renews it (the worker died), it runs out and a later copy takes the row over.

Each change is a conditional UPDATE, so of two workers racing for one change exactly one makes it:
`take` only a row nobody holds, `Held.renew` and `Held.end` only while the row still holds the
time this worker last wrote. A worker whose lease was taken over (it could not reach the database
for the whole lease) can then neither extend the new holder's lease nor record over its run, and
learns that it lost the row (renew is False) and stops.

A process can also be stopped (SIGSTOP, a VM paused, a swap storm) past its lease and go on where
it was, before its heartbeat runs again. So a run fences what it writes on its lease (`Held.lost`,
`Held.fenced`): once the lease has run out by its own clock it is lost at once, without asking
the database, and its checkpoint writes run in the transaction that first locks its row `FOR
SHARE` where the row still holds its lease (FENCE): a takeover then waits for the write, or the
write finds the takeover and is refused.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connections, models
from django.utils import timezone


def stalled_after() -> timedelta:
    """A run nobody took within this long of being due (its task enqueued) is stalled
    (RUN_STALLED_AFTER_SECONDS): longer than any wait in the queue."""
    return timedelta(seconds=settings.RUN_STALLED_AFTER_SECONDS)


# The first statement of a fenced write's transaction (Held.fenced): the run's row locked FOR
# SHARE, and an error unless it holds this run's lease. An error, not an empty result, so the
# writes sent after it in the same pipeline are never made and the write costs no extra round trip
# (the cast of a column's text cannot be folded away when the statement is planned). A row that
# is not there leaves the write alone: nobody else can hold it (its call was removed, or, in a
# test, it is not committed yet).
FENCE = """
SELECT CASE WHEN {field} IS DISTINCT FROM %(until)s
  THEN ('{refused}: ' || coalesce({field}::text, 'none'))::int END
FROM {table} WHERE {pk} = %(pk)s FOR SHARE
"""
REFUSED = "lease lost"


def _taken_over_elsewhere() -> bool:
    """Whether a run whose lease ran out may be taken over by another process. Not in the embedded
    default: one process per data directory runs every run on its own threads, and never takes over
    one it has (work.in_flight_here), so a lease that ran out while its run waited there (for the
    database another process held locked, for a thread) is still its run's."""
    return not settings.CELERY_TASK_ALWAYS_EAGER


class LeaseLost(Exception):
    """A run may not write: its lease ran out by its process's clock, or its row holds another
    worker's lease (a takeover), or its run is over."""


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
    """Rows whose lease ran out (the worker died), or that nobody leased within stalled_after() of
    `due` (when the run was enqueued)."""
    return models.Q(**{f"{field}__lte": now}) | models.Q(
        **{f"{field}__isnull": True, f"{due}__lte": now - stalled_after()}
    )


def live(field: str, due: str, now: datetime) -> models.Q:
    """Rows a worker holds, or whose run was enqueued lately: the others of `stalled`."""
    return models.Q(**{f"{field}__gt": now}) | models.Q(
        **{f"{field}__isnull": True, f"{due}__gt": now - stalled_after()}
    )


def is_stalled(until: datetime | None, due: datetime, now: datetime) -> bool:
    """`stalled`, for a row already read."""
    return until <= now if until else due <= now - stalled_after()


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
        self._lost = threading.Event()

    @property
    def until(self) -> datetime | None:
        return getattr(self.row, self.field)

    def _mine(self) -> models.QuerySet[Any]:
        # Built when used (a renewal, an end), not with the lease: a run that ends within its first
        # heartbeat, as most do, never needs it, and building a query cost 1.6 % of a busy worker's
        # CPU (docs/performance.md, "Throughput as clients grow").
        rows = type(self.row)._default_manager.filter(self._running, pk=self.row.pk)
        return rows.filter(**{self.field: self.until})

    def lost(self) -> bool:
        """Whether the run must record, write and start nothing more: its lease ran out by this
        process's clock (it was stopped or starved past it, and another worker may hold the row by
        now), or a renewal or a fenced write found the row another's. Never held again once lost:
        its heartbeat may not renew a lease the run has given up."""
        if not self._lost.is_set() and _taken_over_elsewhere() and (self.until is None or self.until <= timezone.now()):
            self._lost.set()
        return self._lost.is_set()

    def renew(self) -> bool:
        """The worker is alive (its heartbeat): it holds the row another RUN_LEASE_SECONDS. False
        once the run is over, the lease is another worker's, or it ran out (`lost`)."""
        with self.lock:
            if self.lost():
                return False
            until = lease_end()
            if not self._mine().update(**{self.field: until}):
                self._lost.set()
                return False
            setattr(self.row, self.field, until)
            return True

    def end(self) -> None:
        """The attempt failed on our side (not the agent's), or its worker is stopping: the next
        attempt may take the row at once."""
        with self.lock:
            self._mine().update(**{self.field: timezone.now() if self._remember_attempt else None})

    @contextlib.contextmanager
    def fenced(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Around a write the run may make only while it holds the row (a checkpoint): LeaseLost at
        once when `lost`; else the statement (with its parameters) the write's transaction runs
        first, whose refusal the writer raises as LeaseLost. The lock is held through the write, so
        a renewal waits for it and the value the write is fenced on is the row's."""
        with self.lock:
            if self.lost():
                raise LeaseLost(f"the lease on {self.row._meta.label} {self.row.pk} ran out")
            try:
                yield self._fence_sql(), {"pk": self.row.pk, "until": self.until}
            except LeaseLost:
                self._lost.set()
                raise

    def _fence_sql(self) -> str:
        meta, quote = self.row._meta, connections["default"].ops.quote_name
        field = meta.get_field(self.field)
        assert isinstance(field, models.Field) and field.column and meta.pk and meta.pk.column
        return FENCE.format(
            table=quote(meta.db_table),
            field=quote(field.column),
            pk=quote(meta.pk.column),
            refused=REFUSED,
        )
