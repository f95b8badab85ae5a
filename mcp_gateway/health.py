"""GET /health/: the database, the LangGraph checkpointer, Redis and the broker configured (Redis,
or RabbitMQ with CELERY_BROKER_URL), with django-health-check; each named in its output."""

import dataclasses
import urllib.parse

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


@dataclasses.dataclass
class RabbitMQ(HealthCheck):
    """Celery's broker when CELERY_BROKER_URL names RabbitMQ: a connection opened and closed with
    kombu, as the web's enqueueing opens one (django-health-check's own RabbitMQ check needs
    aio-pika, which nothing else here uses)."""

    url: str = dataclasses.field(repr=False)

    def __repr__(self) -> str:
        # Named by where it is, never by its credentials.
        parts = urllib.parse.urlsplit(self.url)
        return f"RabbitMQ(host={parts.hostname!r}, port={parts.port or 5672})"

    def run(self) -> None:
        from kombu import Connection

        try:
            with Connection(self.url, connect_timeout=5) as connection:
                connection.ensure_connection(max_retries=1)
        except Exception as exc:
            raise ServiceUnavailable("RabbitMQ unavailable") from exc


def _checks() -> list:
    checks: list = ["health_check.checks.Database", Checkpointer]
    if settings.REDIS_URL:
        from redis.asyncio import Redis

        # The round notifications, the rate limit and the cache, and Celery's broker unless
        # RabbitMQ is.
        checks.append(
            ("health_check.contrib.redis.Redis", {"client_factory": lambda: Redis.from_url(settings.REDIS_URL)})
        )
    if settings.BROKER_IS_RABBITMQ:
        checks.append((RabbitMQ, {"url": settings.CELERY_BROKER_URL}))
    return checks


async def health_view(request, *args, **kwargs):
    return await HealthCheckView.as_view(checks=_checks())(request, *args, **kwargs)
