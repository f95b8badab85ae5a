"""Traces and metrics, set up once per process: by asgi.py for the web (once logging is configured,
and before Django's handler is built, so the Django instrumentation's middleware is in it), by
celery.py for the worker and beat.

Traces are on when the OpenTelemetry SDK's standard variables name an exporter
(`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_TRACES_EXPORTER`), and
off when none does or `OTEL_SDK_DISABLED=true`. Everything else (sampler, batch sizes, headers,
resource attributes, the service name) is the SDK's own reading of its `OTEL_*` variables. The
instrumentations: Django (the admin and the staff API; `/mcp/` opens its span itself, see
mcp_gateway/observe.py), Celery (a task continues the trace of whoever enqueued it), psycopg (Django's
queries and LangGraph's checkpointer alike) and Redis.
"""

from __future__ import annotations

import fcntl
import logging
import os
from importlib.metadata import entry_points
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger(__name__)

_done: set[str] = set()


def tracing_configured() -> bool:
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporters == "none":
        return False
    return bool(
        exporters
        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def setup(role: str) -> None:
    """Set up this process (`role`: web, worker or beat) once; the settings are loaded by then."""
    if role in _done:
        return
    _done.add(role)
    if role != "beat":  # beat counts nothing (counts_nothing)
        _check_metrics_mode()
    if tracing_configured():
        _setup_tracing(role)


# --- Which processes write into METRICS_DIR (docs/operating.md, "Metrics") -----------------------
# Every process that creates the metrics (they are created as Django loads the apps) writes files of
# its own there, named by its process id, that outlive it: one set per process that ever ran. Only
# the processes that count write them: the web's, the workers', and the sweep command's.

_sweep_lock: list[int] = []


def counts_nothing() -> None:
    """This process counts nothing (beat, a management command other than `sweep`): its metrics stay
    in its memory and it writes nothing into METRICS_DIR. Call it before Django loads the apps."""
    from django.conf import settings

    if settings.METRICS_ENABLED:
        from prometheus_client import values

        values.ValueClass = values.MutexValue


def command(name: str) -> None:
    """For manage.py, before Django loads the apps: `sweep` (beat's jobs, from cron or by hand)
    counts what it does; every other command counts nothing."""
    from django.conf import settings

    if name != "sweep":
        counts_nothing()
    elif settings.METRICS_ENABLED:
        _one_set_of_files_for_every_sweep(settings.METRICS_DIR)


def _one_set_of_files_for_every_sweep(metrics_dir: Path) -> None:
    # Run from cron every few minutes, the sweep would leave a set of files per run, each read at
    # every scrape, until the host stops. Every run writes the same files instead (`*_sweep.db`),
    # adding its counts to the last run's. prometheus_client's rule is that processes running at
    # once write different files: a sweep that finds another one running (an exclusive lock on
    # `sweep.lock`, which goes with its process however that ends) writes under its process id.
    from prometheus_client import values

    fd = os.open(metrics_dir / "sweep.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return
    _sweep_lock.append(fd)  # held until the process ends
    values.ValueClass = values.MultiProcessValue(process_identifier=lambda: "sweep")


def _check_metrics_mode() -> None:
    from django.conf import settings

    if not settings.METRICS_ENABLED:
        return
    from prometheus_client import values

    # prometheus_client picks its storage when it is first imported: imported before the settings
    # set PROMETHEUS_MULTIPROC_DIR, this process would count in memory that /metrics never reads.
    if not getattr(values.ValueClass, "_multiprocess", False):
        raise ImproperlyConfigured(
            "prometheus_client was imported before the settings set PROMETHEUS_MULTIPROC_DIR: "
            "set PROMETHEUS_MULTIPROC_DIR to METRICS_DIR in the environment"
        )


def _exporters() -> list:
    # The SDK's exporters by their registered names; "otlp" is OTLP over HTTP/protobuf, the one
    # installed (OTEL_EXPORTER_OTLP_PROTOCOL=grpc would need opentelemetry-exporter-otlp-proto-grpc).
    names = [n.strip() for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").lower().split(",") if n.strip()]
    found = []
    for name in names:
        if name == "console":
            found.append(_console_exporter())
            continue
        registered = "otlp_proto_http" if name == "otlp" else name
        matches = list(entry_points(group="opentelemetry_traces_exporter", name=registered))
        if not matches:
            raise ImproperlyConfigured(f"OTEL_TRACES_EXPORTER names {name!r}, which is not installed")
        found.append(matches[0].load()())
    return found


def _console_exporter():
    """The SDK's console exporter, one line per span: its default indents each span over dozens of
    lines, which, amid one-line JSON log lines, no line-based log collector can take apart."""
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    return ConsoleSpanExporter(formatter=lambda span: span.to_json(indent=None) + "\n")


def _destination() -> str:
    exporters = os.environ.get("OTEL_TRACES_EXPORTER", "otlp")
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    return f"{exporters} ({endpoint})" if endpoint and "otlp" in exporters else exporters


def _setup_tracing(role: str) -> None:
    from opentelemetry import trace
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.instrumentation.redis import RedisInstrumentor
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # OTEL_SERVICE_NAME, when set, names every process alike; by default each role has its name.
    attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: f"hitl-{role}"}
    provider = TracerProvider(resource=Resource.create(attributes))
    for exporter in _exporters():
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    if role == "web":
        DjangoInstrumentor().instrument(request_hook=_answer_links_redacted)
    CeleryInstrumentor().instrument()
    # skip_dep_check: psycopg[binary] installs as psycopg and psycopg-binary, which the dependency
    # check does not always recognise.
    PsycopgInstrumentor().instrument(skip_dep_check=True)
    RedisInstrumentor().instrument()
    logger.info("traces go to %s", _destination())


def _answer_links_redacted(span, request) -> None:
    """A request span's URL attributes without an answer page's link, which is a capability
    (mcp_gateway/wires/pages/links.py), as the log lines have it (logs.py)."""
    if "/answer/" not in request.path:
        return
    from hitl_project.logs import redacted

    for name, value in dict(getattr(span, "attributes", None) or {}).items():
        if isinstance(value, str) and "/answer/" in value:
            span.set_attribute(name, redacted(value))


def flush() -> None:
    """Send the spans still batched (a process about to exit)."""
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    if hasattr(provider, "force_flush"):
        provider.force_flush()
