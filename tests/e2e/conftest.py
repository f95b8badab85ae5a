"""Real parts for every end-to-end test: PostgreSQL (pytest-django's test database, with
LangGraph's checkpoint tables made by the migration), Redis, a Celery worker in its own OS process,
and the web endpoint on a live server."""

from __future__ import annotations

import os
import socket
import uuid

import pytest
from django.conf import settings
from django.core.servers.basehttp import ThreadedWSGIServer
from django.test.testcases import LiveServerThread

from tests.e2e.approvals import ADMIN_TOKEN, SLACK_SIGNING_SECRET
from tests.e2e.embedded import serve
from tests.processes import Worker, service_env


class _TestServer(ThreadedWSGIServer):
    """live_server: Django's threaded development server, as uvicorn serves in production
    (hitl_project/http.py) in the two ways that matter to a test's timing."""

    # Its listen backlog is 10 connections: the tests that send 50 requests at once saw one reset
    # now and then. uvicorn's is 2048.
    request_queue_size = 128

    def get_request(self) -> tuple[socket.socket, object]:
        # wsgiref sends a response's status line, its headers and its body in separate writes: on a
        # kept-alive connection Nagle's algorithm holds each until the client acknowledges the one
        # before, which the client delays by 40 ms, so every request waited 40 ms or more.
        conn, address = super().get_request()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, address


LiveServerThread.server_class = _TestServer


@pytest.fixture(scope="session")
def celery_queue():
    """A queue of this test run's own, so no other worker on the machine takes its tasks."""
    from hitl_project.celery import app

    queue = f"hitl-test-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    app.conf.task_default_queue = queue
    return queue


@pytest.fixture(scope="session")
def worker_factory(django_db_setup, django_db_blocker, celery_queue, fake_model, tmp_path_factory):
    """Start (more) Celery workers for this test run's queue; all are stopped at the end."""
    if not settings.REDIS_URL:
        pytest.fail("the suite runs graphs in a real Celery worker: set REDIS_URL (make test does)")
    started: list[Worker] = []
    log = tmp_path_factory.mktemp("celery") / "worker.log"

    def start(concurrency: int = 2) -> Worker:
        worker = Worker(celery_queue, service_env(celery_queue, fake_model), log).start(concurrency)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()
    from django.db import connection

    from graph_runtime.checkpointer import close_pools

    close_pools()
    # Threads of the live server and of sync_to_async keep connections of their own; end them
    # all so the test database can be dropped.
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )


@pytest.fixture(scope="session")
def celery_worker(worker_factory):
    return worker_factory()


@pytest.fixture
def worker_with_env(celery_worker, worker_factory):
    """The worker reads its settings from its environment: stop the test run's worker, start one with
    `env`, and afterwards start the test run's worker object again (not a new one, so that the next
    test that stops `celery_worker` stops the worker that is really running)."""
    saved: dict[str, str | None] = {}
    started = []

    def start(**env: str) -> None:
        celery_worker.stop()
        for name, value in env.items():
            saved.setdefault(name, os.environ.get(name))
            os.environ[name] = value
        started.append(worker_factory())

    yield start
    for worker in started:
        worker.stop()
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    if started:
        celery_worker.start()


@pytest.fixture
def mcp_url(live_server, celery_worker):
    """The endpoint's exact URL (/mcp would cost each request a 308 to it).

    Afterwards, the runs the test started (a resume after a staff decision, say) finish before the
    test database is flushed: a TRUNCATE racing a run's queries deadlocks, and a run left over
    would write into the next test."""
    yield f"{live_server.url}/mcp/"
    celery_worker.wait_until_idle()


@pytest.fixture
def make_token(transactional_db):
    from django.contrib.auth import get_user_model

    from mcp_gateway.models import MCPToken

    def make(username: str = "ada") -> str:
        user, _ = get_user_model().objects.get_or_create(username=username)
        return MCPToken.issue(user)[1]

    return make


@pytest.fixture
def token(make_token):
    return make_token("ada")


@pytest.fixture(scope="module")
def generated_cases_summary():
    """The property tests' generated cases by outcome, printed at the end of their module (-s)."""
    from tests.e2e.fuzzing import SEEN

    yield
    print("\ngenerated cases by outcome:", dict(sorted(SEEN.items())), "total:", SEEN.total())


@pytest.fixture
def victim(mcp_url, make_token):
    """A paused call of another user, which no request of a property test may change."""
    from tests.e2e.fuzzing import Victim

    return Victim(mcp_url, make_token("victim"))


# --- staff approvals ---------------------------------------------------------------------------


@pytest.fixture
def model_requests(fake_model):
    from tests.e2e.approvals import record_model_requests

    return record_model_requests(fake_model)


@pytest.fixture
def admin_api(live_server, settings):
    from tests.e2e.approvals import ADMIN_TOKEN, AdminAPI

    settings.ADMIN_TOKEN = ADMIN_TOKEN
    return AdminAPI(live_server.url, ADMIN_TOKEN)


@pytest.fixture
def model_in_this_process(monkeypatch, fake_model):
    """Runs of the graph in the test process talk to the fake model, as the worker's runs do."""
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("OPENAI_BASE_URL", f"{fake_model}/v1")


@pytest.fixture
def tasks_client():
    """FastMCP clients that declare the tasks extension and resolve tasks, for this test only.

    Importing fastmcp_tasks registers its client half for every FastMCP Client in the process;
    other tests' clients (MCPAdapter's) must keep not declaring it, so it is unregistered after."""
    import fastmcp_tasks
    from fastmcp.client import extension_hooks

    factory = fastmcp_tasks.client._build_tasks_client_extension
    extension_hooks.register_internal_client_extension_factory(factory)
    yield fastmcp_tasks
    extension_hooks._internal_client_extension_factories.remove(factory)


# The embedded default of `make run`, one server per test module that asks for it.
@pytest.fixture(scope="module")
def embedded_server(tmp_path_factory):
    """(web server, its data directory, MCP URL, bearer token) of an embedded server with a data
    directory of its own."""
    home = tmp_path_factory.mktemp("embedded")
    web, url, token = serve(home, ADMIN_TOKEN=ADMIN_TOKEN, SLACK_SIGNING_SECRET=SLACK_SIGNING_SECRET)
    yield web, home, url, token
    web.stop()


@pytest.fixture(scope="module")
def embedded(embedded_server):
    """(MCP URL, bearer token) of the module's embedded server."""
    _, _, url, token = embedded_server
    return url, token
