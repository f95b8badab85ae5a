"""settings.DATABASES' ENGINE on PostgreSQL: Django's own backend, whose connection check
(CONN_HEALTH_CHECKS, before the first statement of each web request and each Celery task) asks
the socket first in a Celery worker, and sends its SELECT 1 only when the socket has something to
read.

Only in the worker: a task whose first statement meets a connection the poll missed (a session
ended a moment before) fails with a DatabaseError and is retried (RETRY_ON_INFRASTRUCTURE), from
its last checkpoint if it was a run. A web request has no retry; it keeps the round trip, which
tells a dying backend from a live one."""

from __future__ import annotations

from django.db.backends.postgresql import base

from graph_runtime.connections import spoke_while_idle


class DatabaseWrapper(base.DatabaseWrapper):
    # Set once by the worker as it starts (hitl_project/celery.py), for every connection after.
    polled_check = False

    def is_usable(self) -> bool:
        if DatabaseWrapper.polled_check and not spoke_while_idle(self.connection):
            return True
        return super().is_usable()
