"""One settings module, driven by the environment (django-environ): one on purpose, so an operator
finds every environment variable in one place (see below).

With no environment at all the service runs on the embedded default: SQLite for Django,
a SQLite checkpointer for LangGraph, and Celery tasks run in-process. Set DATABASE_URL
(PostgreSQL) and REDIS_URL for production: Django and the checkpoints share the database,
and graphs run in Celery workers.

One module on purpose: every setting the service reads is here, grouped (Django, Celery, graphs, the
MCP endpoint, limits, staff approvals, e-mail, operating, production hardening) and each with the
reason for its default, so an operator finds every environment variable in one place
(docs/configuration.md lists them); split by app, which ones exist would be scattered over several
files.
"""

import json
import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import environ
from django.core.exceptions import ImproperlyConfigured
from kombu import Exchange, Queue

from hitl_project import log_formats

BASE_DIR = Path(__file__).resolve().parent.parent


class _Env(environ.Env):
    """django-environ's reader, with two rules for the numbers and flags (env.int, env.float,
    env.bool): an empty value is unset, and a value that is not a number stops startup naming it."""

    def get_value(self, var, cast=None, default=environ.Env.NOTSET, parse_default=False):
        if cast in (int, float, bool) and var in self.ENVIRON and not self.ENVIRON[var].strip():
            # `CONN_MAX_AGE=` in .env, or a compose file's `${X}` of an unset X, means "the default":
            # int("") stopped startup with a bare ValueError, and env.bool read it as false.
            if default is self.NOTSET:
                raise ImproperlyConfigured(f"Set the {var} environment variable")
            return default
        try:
            return super().get_value(var, cast=cast, default=default, parse_default=parse_default)
        except ValueError:
            kind = {int: "an integer", float: "a number"}.get(cast, "valid")
            raise ImproperlyConfigured(f"{var}={self.ENVIRON.get(var)!r} is not {kind}") from None


env = _Env()
# Before any setting is read, HITL_VAR_DIR included: the README lets .env hold every one of them.
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

VAR_DIR = Path(env.str("HITL_VAR_DIR", default=str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _embedded_secret_key() -> str:
    # The embedded default keeps its key on disk so request tokens and sessions survive a restart.
    # Processes starting at once on a new directory (uvicorn's workers, a worker beside them) must
    # all end up with the same key: only the first creates the file (O_EXCL, private from the
    # start); the others read it once its creator has written it.
    path = VAR_DIR / "secret_key"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        from django.core.management.utils import get_random_secret_key

        with os.fdopen(fd, "w") as file:
            file.write(get_random_secret_key())
    for _ in range(100):
        if key := path.read_text().strip():
            return key
        time.sleep(0.05)
    raise ImproperlyConfigured(f"{path} is empty (its writer stopped?): delete it, or set SECRET_KEY")


def _list(name: str, default: list[str]) -> list[str]:
    # env.list splits on commas only: "a.com, b.com" gave " b.com", a host or origin nothing ever
    # matches, so requests from it were refused with no hint why.
    return [item.strip() for item in env.list(name, default=default) if item.strip()]


DEBUG = env.bool("DEBUG", default=False)
_secret_key = env.str("SECRET_KEY", default="")
SECRET_KEY_FROM_ENVIRONMENT = bool(_secret_key)
SECRET_KEY = _secret_key or _embedded_secret_key()
ALLOWED_HOSTS = _list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = _list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    # Staff API tokens, stored as digests, created and revoked in the admin.
    "knox",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "health_check",
    # TOTP devices for step-up on high-risk policies (approvals/step_up.py), enrolled in the admin.
    "django_otp",
    "django_otp.plugins.otp_totp",
    "mcp_gateway",
    "approvals",
    # The project's own management commands (sweep), which run both apps' jobs.
    "hitl_project",
]

MIDDLEWARE = [
    # Outermost: it sees every streamed response, WhiteNoise's included.
    "hitl_project.middleware.streams_synchronous_iterators_chunk_by_chunk",
    "django.middleware.security.SecurityMiddleware",
    "hitl_project.middleware.refuse_nul_in_the_query",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "hitl_project.middleware.LockedDatabaseMiddleware",
]

ROOT_URLCONF = "hitl_project.urls"
WSGI_APPLICATION = "hitl_project.wsgi.application"
ASGI_APPLICATION = "hitl_project.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# An empty DATABASE_URL counts as unset: the embedded SQLite default.
DATABASES = {"default": env.db_url_config(env.str("DATABASE_URL", default="") or f"sqlite:///{VAR_DIR / 'db.sqlite3'}")}
DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
# A persistent connection that PostgreSQL dropped (a restart) is replaced before it is used, not
# found dead by a request that then fails: one SELECT 1 per request cycle; in the worker, whose
# tasks are retried, a poll of its socket instead (hitl_project/postgresql).
DATABASES["default"].setdefault("CONN_HEALTH_CHECKS", env.bool("CONN_HEALTH_CHECKS", default=True))
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"]["ENGINE"] = "hitl_project.postgresql"
# On PostgreSQL, statements that run again and again are prepared, Django's and the checkpointer's:
# a round's statements are the same few every time, and PostgreSQL parsing and planning each of them
# anew cost about as much as running it (docs/performance.md). A pooler that cannot keep prepared
# statements (PgBouncer in transaction mode before 1.21) needs DATABASE_PREPARED_STATEMENTS=false.
DATABASE_PREPARED_STATEMENTS = env.bool("DATABASE_PREPARED_STATEMENTS", default=True)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Django's backend, with the process's writers taking turns on a lock of its own before they ask
    # SQLite for the file (hitl_project/sqlite says why).
    DATABASES["default"]["ENGINE"] = "hitl_project.sqlite"
    # A writer of another process (a `manage.py` command beside the server) is waited for this long;
    # past it the request is answered 503 with Retry-After (mcp_gateway/calls/overload.py).
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = env.float("SQLITE_BUSY_TIMEOUT_SECONDS", default=20.0)
    # Every transaction takes the write lock as it begins (BEGIN IMMEDIATE). A deferred one that
    # reads first (a staff decision, the sweep's batch) and writes next cannot wait for another
    # writer: SQLite fails its write at once with "database is locked" instead of calling the
    # timeout's busy handler, since waiting could deadlock. This also gives select_for_update,
    # which SQLite ignores, its meaning: transactions on the file take turns.
    DATABASES["default"]["OPTIONS"]["transaction_mode"] = "IMMEDIATE"
    # A write-ahead log, as the checkpoints' file has (graph_runtime/checkpointer.py): readers
    # (the admin, the MCP view looking up a call) and the one writer (a round, a staff decision) no
    # longer wait for each other; with the default rollback journal a commit waits until every
    # reader is done. synchronous stays FULL, as for the checkpoints, so a committed pause survives
    # a power cut in both files alike.
    DATABASES["default"]["OPTIONS"]["init_command"] = "PRAGMA journal_mode=WAL"
elif DATABASE_PREPARED_STATEMENTS:
    # Parameters bound by the server (Django binds them in the client by default, and then nothing
    # can be prepared), and each statement prepared once it has run 5 times on a connection
    # (psycopg's own threshold): one-off queries, such as the admin's, are not kept.
    DATABASES["default"].setdefault("OPTIONS", {}).update(server_side_binding=True, prepare_threshold=5)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# collectstatic's output. The container image collects at build time into a directory of the image
# (the Dockerfile), apart from HITL_VAR_DIR, which a volume may cover.
STATIC_ROOT = Path(env.str("STATIC_ROOT", default=str(VAR_DIR / "static")))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
WHITENOISE_USE_FINDERS = True
# Files served at the site's root: the favicon browsers ask every page of the admin for, which was
# otherwise a 404 and a "Not Found: /favicon.ico" WARNING line per page.
WHITENOISE_ROOT = BASE_DIR / "hitl_project" / "site_root"

# --- Celery -------------------------------------------------------------------------------
REDIS_URL = env.str("REDIS_URL", default="")
# The broker of Celery's tasks: Redis (REDIS_URL) unless CELERY_BROKER_URL names RabbitMQ
# (amqp://), which keeps queued tasks through its own restarts. Redis is needed all the same: the
# round notifications, the rate limits and the cache stay on it (docs/operating.md, "Brokers").
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="") or REDIS_URL or "memory://"
BROKER_IS_RABBITMQ = CELERY_BROKER_URL.startswith(("amqp://", "amqps://", "pyamqp://"))
if env.str("CELERY_BROKER_URL", default="") and not REDIS_URL:
    raise ImproperlyConfigured(
        "CELERY_BROKER_URL is set but REDIS_URL is not: the production shape needs Redis beside its broker "
        "(round notifications, rate limits); without either, leave both unset for the embedded default"
    )
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # kombu's Redis transport with one client per channel for its commands (hitl_project/broker.py).
    CELERY_BROKER_TRANSPORT = "hitl_project.broker:Transport"
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
# Without a broker the embedded default runs tasks in the calling process.
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
CELERY_TASK_EAGER_PROPAGATES = True
# A worker killed mid-run leaves its task on the queue for the next worker (see mcp_gateway/tasks.py
# for why running a round twice is harmless).
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Threads, not prefork: an agent's run mostly waits (on its model, on PostgreSQL), and prefork's
# parent process relays every task to a child over a pipe: threads cost a worker less CPU per round
# and serve more rounds a second (docs/performance.md, "Measured choices"). Run more worker
# processes to use more cores.
CELERY_WORKER_POOL = env.str("CELERY_WORKER_POOL", default="threads")
CELERY_WORKER_CONCURRENCY = env.int("WORKER_CONCURRENCY", default=8)
# The embedded default (no REDIS_URL): runs waiting for one of the web process's WORKER_CONCURRENCY
# threads. Past it a first call is refused with HTTP 503 and Retry-After (mcp_gateway/calls/overload.py).
EMBEDDED_RUN_QUEUE_MAX = env.int("EMBEDDED_RUN_QUEUE_MAX", default=64)
# Keep the worker's database connection between tasks (Celery's Django fix-up otherwise reconnects
# for every task: docs/performance.md, "Measured choices"); hitl_project/celery.py still drops stale
# ones.
CELERY_DB_REUSE_MAX = env.int("CELERY_DB_REUSE_MAX", default=1000)
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_QUEUE", default="hitl")
# The last line of defence: a task whose worker died is handed to another worker once its
# visibility timeout has passed, looked for every interval × throttle seconds. The heartbeat
# leases below take a dead worker's runs over long before.
CELERY_VISIBILITY_TIMEOUT = env.int("CELERY_VISIBILITY_TIMEOUT", default=3600)
# How long a worker holds the run it took (a round's, a staff decision's resume) without renewing
# it. Its process renews every lease it holds each RUN_HEARTBEAT_SECONDS (a third of the lease),
# whatever the run is doing, so a long run keeps its lease and only a dead worker's runs out; then
# another worker takes the run over (graph_runtime/heartbeat.py).
RUN_LEASE_SECONDS = env.int("RUN_LEASE_SECONDS", default=30)
RUN_HEARTBEAT_SECONDS = RUN_LEASE_SECONDS / 3
# How often beat looks for runs whose lease ran out, and enqueues them again.
STALLED_CHECK_SECONDS = env.int("STALLED_CHECK_SECONDS", default=10)
# A run nobody took within this long of being enqueued is enqueued again by the same checks: its
# task was lost (the broker restarted without persistence, a web host died between committing the
# run and publishing its task) or a worker received it and died before starting it. Longer than a
# task's wait in the queue at your busiest: a shorter value enqueues queued runs a second time,
# which the lease makes harmless but not free.
RUN_STALLED_AFTER_SECONDS = env.int("RUN_STALLED_AFTER_SECONDS", default=60)
# On SIGTERM a worker stops taking tasks and lets its runs finish for this long; then it hands the
# rest back (their leases end, their tasks are enqueued again) and exits. Keep it below the time
# your process manager waits before SIGKILL (Kubernetes: 30 s by default).
WORKER_STOP_GRACE_SECONDS = env.float("WORKER_STOP_GRACE_SECONDS", default=20.0)
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, Any] = {
    "visibility_timeout": CELERY_VISIBILITY_TIMEOUT,
    "unacked_restore_interval": env.int("CELERY_RESTORE_INTERVAL", default=10),
    "unacked_restore_throttle": env.int("CELERY_RESTORE_THROTTLE", default=10),
}
if BROKER_IS_RABBITMQ:
    # A quorum queue: durable and replicated, so a queued task outlives a broker restart (a Redis
    # without persistence loses it, and only the stalled-round check brings it back). Publisher
    # confirms: enqueueing returns once the broker has the task. Late acknowledgement (above): a
    # task whose worker dies is delivered again when its connection closes. A topic exchange, so
    # that a countdown (a run handed back) waits in the broker, in Celery's native delayed
    # delivery, not in a worker's memory.
    CELERY_TASK_QUEUES = [
        Queue(
            CELERY_TASK_DEFAULT_QUEUE,
            Exchange(CELERY_TASK_DEFAULT_QUEUE, type="topic"),
            routing_key=CELERY_TASK_DEFAULT_QUEUE,
            queue_arguments={"x-queue-type": "quorum"},
            durable=True,
        )
    ]
    CELERY_TASK_DEFAULT_EXCHANGE = CELERY_TASK_DEFAULT_QUEUE
    CELERY_TASK_DEFAULT_EXCHANGE_TYPE = "topic"
    CELERY_TASK_DEFAULT_ROUTING_KEY = CELERY_TASK_DEFAULT_QUEUE
    CELERY_BROKER_NATIVE_DELAYED_DELIVERY_QUEUE_TYPE = "quorum"
    CELERY_BROKER_TRANSPORT_OPTIONS = {"confirm_publish": True}
# Beat's state file in the data directory, not in whatever directory beat was started from.
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_BEAT_SCHEDULE = {
    # A dead worker's runs, taken over within seconds of their leases running out. A copy that
    # waited in a busy queue past the next one is dropped (expires), so they never pile up. First,
    # so that `manage.py sweep` (every entry once, in this order) enqueues what is stalled before
    # the sweeps below expire anything.
    "nudge-stalled-rounds": {
        "task": "mcp_gateway.tasks.nudge_stalled_rounds",
        "schedule": timedelta(seconds=STALLED_CHECK_SECONDS),
        "options": {"expires": STALLED_CHECK_SECONDS},
    },
    "nudge-stalled-resumes": {
        "task": "approvals.tasks.nudge_stalled_resumes",
        "schedule": timedelta(seconds=STALLED_CHECK_SECONDS),
        "options": {"expires": STALLED_CHECK_SECONDS},
    },
    # Remove expired calls with their threads.
    "sweep-calls": {
        "task": "mcp_gateway.tasks.sweep_calls",
        "schedule": timedelta(seconds=env.int("CLEANUP_INTERVAL_SECONDS", default=300)),
    },
    # Decline the approvals nobody decided within APPROVAL_TTL (their calls then go to the sweep
    # above).
    "sweep-approvals": {
        "task": "approvals.tasks.sweep_approvals",
        "schedule": timedelta(seconds=env.int("CLEANUP_INTERVAL_SECONDS", default=300)),
    },
    # Tell staff again of the approvals pending past APPROVAL_ESCALATE_AFTER.
    "escalate-approvals": {
        "task": "approvals.tasks.escalate_approvals",
        "schedule": timedelta(seconds=env.int("ESCALATION_CHECK_SECONDS", default=60)),
    },
}

# --- Graphs and checkpoints ---------------------------------------------------------------
# A langgraph.json-compatible file: {"graphs": {"name": "package.module:attr" | "./path.py:attr"}}.
GRAPHS_CONFIG = Path(env.str("GRAPHS_CONFIG", default=str(BASE_DIR / "langgraph.json")))
CHECKPOINT_SQLITE_PATH = VAR_DIR / "checkpoints.sqlite"
# At least one checkpointer connection per run a worker holds at once, so no run waits for one.
CHECKPOINT_POOL_MAX_SIZE = env.int("CHECKPOINT_POOL_MAX_SIZE", default=max(8, CELERY_WORKER_CONCURRENCY))

# --- MCP endpoint -------------------------------------------------------------------------
MCP_SERVER_NAME = "hitl-mcp"
MCP_SERVER_VERSION = "0.1.0"
MCP_MAX_BODY_BYTES = env.int("MCP_MAX_BODY_BYTES", default=4 * 1024 * 1024)
# Browsers send Origin; MCP clients usually do not. A present Origin must be one of these.
MCP_ALLOWED_ORIGINS = _list("MCP_ALLOWED_ORIGINS", default=["http://127.0.0.1", "http://localhost", "http://[::1]"])
# Dotted path to a callable(request) -> mcp_gateway.auth.Caller | None, in place of bearer tokens.
MCP_AUTH_HANDLER = env.str("MCP_AUTH_HANDLER", default="mcp_gateway.auth.bearer_token_caller")
# False runs every call on a throw-away thread: a pause then cannot be resumed.
MCP_THREADS_ENABLED = env.bool("MCP_THREADS_ENABLED", default=True)
# docs/rules.md, "Lifetime": a paused call lives 24 h after its latest round, a finished one 10 min;
# a shorter default_ttl in the thread TTL configuration shortens both.
MCP_PAUSED_TTL = timedelta(hours=24)
MCP_FINISHED_TTL = timedelta(minutes=10)
MCP_MISSING_CAPABILITY_TTL = timedelta(minutes=10)
# A first call sent again with the idempotency key of one sent within this window (the same caller,
# tool and arguments) gets that call, not a new run: a client whose first call was cut (its
# connection, or the web process, died) can send it again safely (mcp_gateway/calls/tool_calls.py).
MCP_IDEMPOTENCY_WINDOW = timedelta(seconds=env.int("MCP_IDEMPOTENCY_WINDOW_SECONDS", default=600))


def _thread_default_ttl() -> float | None:
    """The thread TTL's default_ttl in minutes, where langgraph-api reads it: LANGGRAPH_THREAD_TTL
    (minutes, or a JSON object), else `checkpointer.ttl` in the graphs' langgraph.json."""
    raw = env.str("LANGGRAPH_THREAD_TTL", default="").strip()
    try:
        ttl = json.loads(raw) if raw else json.loads(GRAPHS_CONFIG.read_text()).get("checkpointer", {}).get("ttl")
    except (OSError, ValueError, AttributeError):
        return None  # an unreadable graphs file is reported by the graph registry
    if isinstance(ttl, dict):
        ttl = ttl.get("default_ttl")
    return float(ttl) if isinstance(ttl, (int, float)) and not isinstance(ttl, bool) else None


# MCP_DEFAULT_TTL_MINUTES, when set, stands for the thread TTL's default_ttl.
MCP_DEFAULT_TTL_MINUTES = env.float("MCP_DEFAULT_TTL_MINUTES", default=None)
if MCP_DEFAULT_TTL_MINUTES is None:
    MCP_DEFAULT_TTL_MINUTES = _thread_default_ttl()
# Clients of the handshake revisions (2025-11-25, 2025-06-18, 2025-03-26): "error" gives a tool
# that pauses an error result with the pending questions (docs/rules.md, "Clients before 2026-07-28"); "answer"
# gives them sessions (Mcp-Session-Id) and asks the questions as elicitation/create requests on
# the call's event stream (mcp_gateway/wires/sessions/sessions.py, mcp_gateway/wires/sessions/call_streams.py).
MCP_OLDER_CLIENTS = env.str("MCP_OLDER_CLIENTS", default="error").strip().lower()
if MCP_OLDER_CLIENTS not in ("error", "answer"):
    raise ImproperlyConfigured(f"MCP_OLDER_CLIENTS must be error or answer, not {MCP_OLDER_CLIENTS!r}")
# With "answer": a session ends after this many minutes without a request or an open stream; one
# caller holds at most MCP_SESSIONS_PER_CALLER sessions.
MCP_SESSION_IDLE_MINUTES = env.float("MCP_SESSION_IDLE_MINUTES", default=60.0)
MCP_SESSIONS_PER_CALLER = env.int("MCP_SESSIONS_PER_CALLER", default=50)
# Event streams (mcp_gateway/streams/capacity.py), of every kind together: a web process serves at
# most MCP_MAX_STREAMS at once (one more is 503), and one caller holds at most
# MCP_STREAMS_PER_CALLER of them (one more is 429), well below the cap, so that one caller cannot
# hold the streams every other caller needs. Without MCP_MAX_STREAMS, the smaller of the older
# names MCP_SESSION_MAX_STREAMS and MCP_LISTEN_MAX_STREAMS stands for it.
MCP_MAX_STREAMS = env.int(
    "MCP_MAX_STREAMS",
    default=min(env.int("MCP_SESSION_MAX_STREAMS", default=1000), env.int("MCP_LISTEN_MAX_STREAMS", default=1000)),
)
MCP_STREAMS_PER_CALLER = env.int("MCP_STREAMS_PER_CALLER", default=100)
# A comment line this often keeps an idle stream open through proxies (as the SDK's streams).
MCP_STREAM_KEEPALIVE_SECONDS = env.float("MCP_STREAM_KEEPALIVE_SECONDS", default=15.0)
# A call stream whose run is still going is closed after this many seconds, and its client comes
# back after the stream's `retry` with Last-Event-ID (2025-11-25's polling); 0: held to the end.
MCP_STREAM_HOLD_SECONDS = env.float("MCP_STREAM_HOLD_SECONDS", default=0.0)
# How long one HTTP request waits for a run before answering "still running" (a requestState-only
# input_required result that the client retries).
MCP_RUN_WAIT_SECONDS = env.float("MCP_RUN_WAIT_SECONDS", default=60.0)
# The MCP Tasks extension (docs/tasks.md). A client that declares it gets a task instead of a
# result when its run is still going after this many seconds (well under MCP_RUN_WAIT_SECONDS), or
# when the call is handed over to staff.
MCP_TASK_WAIT_SECONDS = env.float("MCP_TASK_WAIT_SECONDS", default=3.0)
# The pollIntervalMs a task suggests: while its graph runs or asks, and while staff decide.
MCP_TASK_POLL_INTERVAL_MS = env.int("MCP_TASK_POLL_INTERVAL_MS", default=1000)
MCP_TASK_STAFF_POLL_INTERVAL_MS = env.int("MCP_TASK_STAFF_POLL_INTERVAL_MS", default=5000)
# How long a finished task (its result) is kept for its client; the sweep then removes it.
MCP_TASK_FINISHED_TTL = timedelta(minutes=env.float("MCP_TASK_FINISHED_TTL_MINUTES", default=60))
# subscriptions/listen for task status notifications (mcp_gateway/wires/mcp_tasks/mcp_task_listen.py): a stream
# ends, gracefully, after this many seconds (the client listens again) or once its tasks have all
# ended; it names at most MCP_LISTEN_MAX_TASKS tasks. A stream that waits for changes (a listen
# stream, a session's own, an older client's call stream while its round asks) reads them again
# every MCP_LISTEN_REFRESH_SECONDS (a graph's progress, and a lost notification, reach it so).
MCP_LISTEN_MAX_SECONDS = env.float("MCP_LISTEN_MAX_SECONDS", default=900.0)
MCP_LISTEN_MAX_TASKS = env.int("MCP_LISTEN_MAX_TASKS", default=100)
MCP_LISTEN_REFRESH_SECONDS = env.float("MCP_LISTEN_REFRESH_SECONDS", default=5.0)
# Threads (each with its database connection) a web process uses for the MCP view's database work.
MCP_DB_THREADS = env.int("MCP_DB_THREADS", default=8)

# --- Limits (mcp_gateway/limits.py) -------------------------------------------------------
# JSON nesting of a request body; deeper bodies get -32600 (PostgreSQL, Python's parser and
# LangGraph's serializers each have a depth limit of their own, all far above this).
MCP_MAX_JSON_DEPTH = env.int("MCP_MAX_JSON_DEPTH", default=64)
# Answers in one request's inputResponses, and the size of one answer as JSON: -32602 past these.
# A round never asks more questions than one request may answer: past that, it is unaskable.
MCP_MAX_INPUT_RESPONSES = env.int("MCP_MAX_INPUT_RESPONSES", default=100)
MCP_MAX_ANSWER_BYTES = env.int("MCP_MAX_ANSWER_BYTES", default=256 * 1024)
# Rounds of questions one call may ask; the run that would ask one more ends the call with an
# error result (mcp_gateway/calls/runs.py).
MCP_MAX_ROUNDS = env.int("MCP_MAX_ROUNDS", default=100)
# Requests per caller and minute (fixed window on the cache below, shared by all web processes
# through Redis); past it HTTP 429 with Retry-After. 0 turns the limit off.
MCP_RATE_LIMIT_PER_MINUTE = env.int("MCP_RATE_LIMIT_PER_MINUTE", default=0)
MCP_RATE_LIMIT_CACHE = "default"
# Whether a tool's error result names the agent's exception and its message ("The tool failed:
# ValueError: ..."); false sends a generic text and leaves the details to the log.
MCP_TOOL_ERROR_DETAIL = env.bool("MCP_TOOL_ERROR_DETAIL", default=True)
# A hosted answer page for every open round (mcp_gateway/wires/pages/): "on" serves /answer/<link>/,
# where a person answers a round's questions in a browser; "off" serves nothing there (404).
MCP_ANSWER_PAGES = env.str("MCP_ANSWER_PAGES", default="off").strip().lower()
if MCP_ANSWER_PAGES not in ("off", "on"):
    raise ImproperlyConfigured(f"MCP_ANSWER_PAGES must be off or on, not {MCP_ANSWER_PAGES!r}")
# Who may open an answer page (docs/security.md, "Answer pages"): "off", whoever holds its link;
# "caller", only a browser logged in as the Django user whose MCP token made the call (others are
# sent to log in at /answer/login/, or refused), and no call of a caller that is not a user is sent
# to a page.
MCP_ANSWER_PAGE_LOGIN = env.str("MCP_ANSWER_PAGE_LOGIN", default="off").strip().lower()
if MCP_ANSWER_PAGE_LOGIN not in ("off", "caller"):
    raise ImproperlyConfigured(f"MCP_ANSWER_PAGE_LOGIN must be off or caller, not {MCP_ANSWER_PAGE_LOGIN!r}")
# An answer page's POST refused by the CSRF check gets the page's own refusal (hitl_project/views.py).
CSRF_FAILURE_VIEW = "hitl_project.views.csrf_failure"

CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL, "KEY_PREFIX": "hitl"}
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

# --- Staff approvals ----------------------------------------------------------------------
APPROVAL_TTL = timedelta(days=env.float("APPROVAL_TTL_DAYS", default=7))
ADMIN_TOKEN = env.str("ADMIN_TOKEN", default="")
# How long POST /api/admin/approvals/<thread_id> waits for the resumed run's answer before it
# answers 202 with answer null.
APPROVAL_WAIT_SECONDS = env.float("APPROVAL_WAIT_SECONDS", default=60.0)
APPROVAL_NOTIFY_EMAIL = env.str("APPROVAL_NOTIFY_EMAIL", default="owner@localhost")
# A Slack-compatible incoming webhook told of every queued approval (a JSON POST with a link to the
# decision page), signed with APPROVAL_WEBHOOK_SECRET (approvals/notifications.py).
APPROVAL_WEBHOOK_URL = env.str("APPROVAL_WEBHOOK_URL", default="")
APPROVAL_WEBHOOK_SECRET = env.str("APPROVAL_WEBHOOK_SECRET", default="")
APPROVAL_WEBHOOK_TIMEOUT = env.float("APPROVAL_WEBHOOK_TIMEOUT", default=10.0)
# Slack's interaction requests (the Approve and Reject buttons of the webhook's message) are
# verified with the Slack app's signing secret (approvals/slack.py). Empty, the message carries no
# buttons and the endpoint refuses every request.
SLACK_SIGNING_SECRET = env.str("SLACK_SIGNING_SECRET", default="")
# The only origins a Slack interaction's response_url is posted to: a signed payload naming any
# other address (an internal one, with a leaked signing secret) gets no request from us.
SLACK_RESPONSE_ORIGINS = _list("SLACK_RESPONSE_ORIGINS", default=["https://hooks.slack.com"])
# How long the Approve and Reject links of an approval's e-mail can be used (once each; they open a
# confirmation page behind the admin's login: approvals/email_links.py).
APPROVAL_EMAIL_LINK_MAX_AGE = timedelta(hours=env.float("APPROVAL_EMAIL_LINK_HOURS", default=24))
# An approval still pending after this long is escalated: marked so in the queue, and told again to
# the escalation address and webhook (else the usual ones). 0 turns escalation off.
APPROVAL_ESCALATE_AFTER = timedelta(hours=env.float("APPROVAL_ESCALATE_AFTER_HOURS", default=24))
APPROVAL_ESCALATION_EMAIL = env.str("APPROVAL_ESCALATION_EMAIL", default="")
APPROVAL_ESCALATION_WEBHOOK_URL = env.str("APPROVAL_ESCALATION_WEBHOOK_URL", default="")
# Step-up on the policies that require it (approvals/step_up.py): in the admin, the password
# entered again or a TOTP code counts for this many minutes; the API takes a code with each decision.
STEP_UP_MINUTES = env.float("STEP_UP_MINUTES", default=10.0)
# The name authenticator apps show beside an enrolled TOTP device (django-otp's config URL).
OTP_TOTP_ISSUER = env.str("OTP_TOTP_ISSUER", default="hitl")
# Where staff reach this service (https://hitl.example.com): the e-mail's admin link starts with
# it. Unset, the link is the admin path alone; a worker has no request to take the host from.
SITE_URL = env.str("SITE_URL", default="").rstrip("/")
# Passkeys (approvals/passkeys.py): the WebAuthn relying party's id (a registrable domain, e.g.
# hitl.example.com) and the origin browsers show (https://hitl.example.com). Empty: SITE_URL's
# host and origin, else the request's host. A passkey works only on the RP id it was registered
# for, so changing it leaves staff to register theirs again.
WEBAUTHN_RP_ID = env.str("WEBAUTHN_RP_ID", default="")
WEBAUTHN_ORIGIN = env.str("WEBAUTHN_ORIGIN", default="").rstrip("/")

# --- E-mail (approvals/notifications.py) --------------------------------------------------
# EMAIL_URL as django-environ reads it: smtp://user:password@host:port (user and password
# percent-encoded), smtp+tls:// for STARTTLS, smtp+ssl:// for TLS from the first byte. Unset (or
# empty), each e-mail is written to the log at INFO (hitl_project/mail.py). EMAIL_BACKEND, when
# set, replaces the URL's backend; the default URL names localhost so that EMAIL_BACKEND=<the SMTP
# backend> alone still sends to an MTA on localhost:25, as it did before EMAIL_URL existed.
_email_url = env.str("EMAIL_URL", default="")
globals().update(
    env.email_url_config(
        _email_url or "consolemail://localhost",
        backend=env.str("EMAIL_BACKEND", default="") or (None if _email_url else "hitl_project.mail.EmailBackend"),
    )
)
# The mail goes out from a worker's thread after the pause commits; Django's SMTP default of no
# timeout would hold that thread for minutes on a mail server that does not answer.
EMAIL_TIMEOUT = env.int("EMAIL_TIMEOUT", default=10)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="hitl@localhost")

REST_FRAMEWORK: dict[str, object] = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": [],
    "UNAUTHENTICATED_USER": None,
    "EXCEPTION_HANDLER": "approvals.api.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "HITL staff approvals API",
    "VERSION": "0.1.0",
    # The top of /api/docs/ and /api/redoc/: how to get a token and how to send it.
    "DESCRIPTION": (
        "Decide the agent's high-risk actions from a script.\n\n"
        "**Get a token.** Log into the admin and open *Your API tokens* (`/admin/api-tokens/`): create one "
        "with a name, and copy it at once, as it is shown only once. It acts as you, with your permissions: "
        "reading needs *Can view approval request*, deciding *Can approve or reject a paused tool call*. "
        "Revoke it on the same page. The server's shared `ADMIN_TOKEN`, when one is configured, works too.\n\n"
        "**Send it** in the `Authorization` header: `Authorization: Bearer staff_…` (knox's `Token staff_…` "
        "works too). In this page, press *Authorize* and paste the token.\n\n"
        "```\ncurl -H 'Authorization: Bearer staff_…' http://127.0.0.1:8000/api/admin/approvals\n```"
    ),
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI and Redoc from the package's own static files, not a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}
REST_KNOX = {
    "AUTH_HEADER_PREFIX": "Bearer",
    "TOKEN_PREFIX": "staff_",
    # A staff token lasts until it is revoked (deleted in the admin), or the expiry set there.
    "TOKEN_TTL": None,
}

# --- Operating: logs, metrics, traces (docs/operating.md) -----------------------------------
# "json": one JSON object per line, in the web, the worker and beat alike (Celery then logs through
# this configuration instead of its own, at LOG_LEVEL). Every line written while a call is handled
# names it (hitl_project/logs.py).
LOG_FORMAT = env.str("LOG_FORMAT", default="plain").strip().lower()
if LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT={LOG_FORMAT!r} is not plain or json")
LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
# Django's dictConfig, and Python's warnings as log lines through the same handler.
LOGGING_CONFIG = "hitl_project.logs.configure"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": log_formats.FORMAT + "%(about)s"},
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "format": log_formats.FORMAT,
            "rename_fields": log_formats.RENAME,
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["about_the_call", "answer_links_redacted"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "filters": {
        "client_error": {"()": "hitl_project.logs.ClientErrorWithoutTraceback"},
        "about_the_call": {"()": "hitl_project.logs.AboutTheCall", "json": LOG_FORMAT == "json"},
        "answer_links_redacted": {"()": "hitl_project.logs.AnswerLinksRedacted"},
        "periodic_jobs": {
            "()": "hitl_project.logs.PeriodicJobsQuietWhenIdle",
            "tasks": [entry["task"] for entry in CELERY_BEAT_SCHEDULE.values()],
        },
    },
    "loggers": {
        "httpx": {"level": "WARNING"},
        "openai": {"level": "WARNING"},
        "django.security.DisallowedHost": {"filters": ["client_error"]},
        # Celery's lines about beat's jobs: DEBUG, but for a job's outcome when it did something.
        "celery.beat": {"filters": ["periodic_jobs"]},
        "celery.worker.strategy": {"filters": ["periodic_jobs"]},
        "celery.app.trace": {"filters": ["periodic_jobs"]},
    },
}

# /metrics (hitl_project/metrics.py): off unless METRICS_ENABLED. Every process of a host (uvicorn's
# workers, Celery's, beat) counts into files in METRICS_DIR, prometheus_client's multiprocess mode,
# and the web's /metrics adds them up. prometheus_client reads PROMETHEUS_MULTIPROC_DIR once, when it
# is first imported: that is after the settings in every process (the apps import it), and
# hitl_project/telemetry.py refuses to start if something imported it earlier.
METRICS_ENABLED = env.bool("METRICS_ENABLED", default=False)
# When set, /metrics wants `Authorization: Bearer <METRICS_TOKEN>`; unset, whoever reaches it reads it.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
METRICS_DIR = Path(env.str("METRICS_DIR", default=str(VAR_DIR / "metrics")))
if METRICS_ENABLED:
    METRICS_DIR.mkdir(parents=True, exist_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(METRICS_DIR)
# Traces: the OpenTelemetry SDK's own OTEL_* variables (hitl_project/telemetry.py); none here.

# --- Production hardening (manage.py check --deploy) --------------------------------------
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
if not DEBUG and env.bool("HTTPS", default=False):
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
    # Health probes and Prometheus reach a process directly, over plain HTTP (/metrics has a token).
    SECURE_REDIRECT_EXEMPT = [r"^health/$", r"^metrics$"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# The MCP endpoint enforces its own limit (413); admin forms share it.
DATA_UPLOAD_MAX_MEMORY_SIZE = MCP_MAX_BODY_BYTES
