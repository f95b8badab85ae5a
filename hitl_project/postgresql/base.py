"""settings.DATABASES' ENGINE on PostgreSQL: Django's own backend, whose health check
(CONN_HEALTH_CHECKS, at the first query of each request and each Celery task) asks the socket
before it asks the server. Its SELECT 1 was a round trip per request and per task: about 0.3 ms
each, four a pause-and-resume round."""

from __future__ import annotations

from django.db.backends.postgresql import base

from . import spoke_while_idle


class DatabaseWrapper(base.DatabaseWrapper):
    def is_usable(self) -> bool:
        return not spoke_while_idle(self.connection) or super().is_usable()
