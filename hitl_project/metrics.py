"""GET /metrics: Prometheus's text format, for operators (docs/operating.md).

Off unless METRICS_ENABLED (404). With METRICS_TOKEN set, only `Authorization: Bearer <token>` reads
it. The counters and histograms come from every process of this host, each writing its own files in
METRICS_DIR (prometheus_client's multiprocess mode, added up here); the gauges of what waits now are
read from the tables and the broker at each scrape, so every web process answers them alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.crypto import constant_time_compare
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily, Metric
from redis import Redis
from redis.exceptions import RedisError

from approvals.selectors import pending_summary
from graph_runtime import work
from mcp_gateway.selectors import calls_by_status, oldest_pause


def metrics_view(request: HttpRequest) -> HttpResponse:
    if not settings.METRICS_ENABLED:
        raise Http404
    if settings.METRICS_TOKEN and not constant_time_compare(
        request.headers.get("Authorization", ""), f"Bearer {settings.METRICS_TOKEN}"
    ):
        response = HttpResponse("Unauthorized: send Authorization: Bearer <METRICS_TOKEN>\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    registry.register(WaitingNow())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)


class WaitingNow:
    """The gauges read at each scrape: calls by status, the oldest pause, the approvals' queue, and
    the broker's queue."""

    def describe(self) -> list[Metric]:
        return []  # nothing to check for clashes before the first scrape, and no query at registration

    def collect(self) -> Iterator[Metric]:
        now = timezone.now()
        calls = GaugeMetricFamily("hitl_tool_calls", "Tool calls now, by status.", labels=["status"])
        for status, count in calls_by_status(now).items():
            calls.add_metric([status], count)
        yield calls
        since = oldest_pause(now)
        yield GaugeMetricFamily(
            "hitl_paused_call_age_seconds",
            "How long the longest-waiting paused call has waited for its client (0: none waits).",
            value=(now - since).total_seconds() if since else 0.0,
        )
        approvals = pending_summary()
        yield GaugeMetricFamily("hitl_approvals_pending", "Approvals waiting for staff.", value=approvals["count"])
        oldest, next_expiry = approvals["oldest"], approvals["next_expiry"]
        yield GaugeMetricFamily(
            "hitl_approval_oldest_pending_seconds",
            "How long the oldest pending approval has waited (0: none waits).",
            value=(now - oldest).total_seconds() if oldest else 0.0,
        )
        if next_expiry is not None:
            yield GaugeMetricFamily(
                "hitl_approval_next_expiry_seconds",
                "Time left before the next pending approval expires undecided (absent: none waits).",
                value=(next_expiry - now).total_seconds(),
            )
        if (length := _queue_length()) is not None:
            queue = GaugeMetricFamily(
                "hitl_queue_length",
                "Tasks waiting for a worker (the embedded default: queued or running on its threads).",
                labels=["queue"],
            )
            queue.add_metric([settings.CELERY_TASK_DEFAULT_QUEUE], length)
            yield queue


def _queue_length() -> int | None:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return work.in_process_backlog()
    if settings.BROKER_IS_RABBITMQ:
        return _rabbitmq_queue_length()
    try:
        # kombu's Redis transport keeps a queue as a Redis list of its name.
        return _broker().llen(settings.CELERY_TASK_DEFAULT_QUEUE)
    except RedisError:
        return None  # the other figures still count; the series' absence says the broker is out of reach


def _rabbitmq_queue_length() -> int | None:
    """The ready messages of the queue, as RabbitMQ counts them (a passive declare changes nothing)."""
    from kombu import Connection

    try:
        with Connection(settings.CELERY_BROKER_URL, connect_timeout=2) as connection:
            declared = connection.default_channel.queue_declare(settings.CELERY_TASK_DEFAULT_QUEUE, passive=True)
            return int(declared.message_count)
    except Exception:  # out of reach, or the queue not declared yet: the series is left out
        return None


@cache
def _broker() -> Redis:
    return Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
