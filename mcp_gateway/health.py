"""GET /health/: the database, the broker and the LangGraph checkpointer, with django-health-check."""

import dataclasses

from django.conf import settings
from health_check.base import HealthCheck
from health_check.exceptions import ServiceUnavailable
from health_check.views import HealthCheckView

from graph_runtime.checkpointer import checkpointer


@dataclasses.dataclass
class Checkpointer(HealthCheck):
    """Reads a thread that does not exist: a round trip through the checkpointer's own tables."""

    def run(self) -> None:
        try:
            checkpointer().get_tuple({"configurable": {"thread_id": "health-check", "checkpoint_ns": ""}})
        except Exception as exc:
            raise ServiceUnavailable("checkpointer unavailable") from exc


def _checks() -> list:
    checks: list = ["health_check.checks.Database", Checkpointer]
    if settings.REDIS_URL:
        from redis.asyncio import Redis

        checks.append(
            ("health_check.contrib.redis.Redis", {"client_factory": lambda: Redis.from_url(settings.REDIS_URL)})
        )
    return checks


async def health_view(request, *args, **kwargs):
    return await HealthCheckView.as_view(checks=_checks())(request, *args, **kwargs)
