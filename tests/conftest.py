"""Real parts for every test: PostgreSQL (pytest-django's test database, with LangGraph's
checkpoint tables made by the migration), Redis, a Celery worker in its own OS process, the web
endpoint on a live server, and a fake OpenAI-compatible model server (the only thing faked: it is
outside the machine in production)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from tests.fakes import openai_server

ROOT = Path(__file__).resolve().parent.parent


def pytest_report_header(config):
    db = os.environ.get("DATABASE_URL", "sqlite (embedded default)")
    return f"database: {db}; redis: {os.environ.get('REDIS_URL', 'none: tasks run in-process')}"


@pytest.fixture(scope="session")
def fake_model():
    server, url = openai_server.start()
    yield url
    server.shutdown()


@pytest.fixture(scope="session")
def celery_queue():
    """A queue of this session's own, so no other worker on the machine takes its tasks."""
    from hitl_project.celery import app

    queue = f"hitl-test-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    app.conf.task_default_queue = queue
    return queue


def _worker_env(queue: str, fake_model_url: str) -> dict[str, str]:
    db = settings.DATABASES["default"]
    env = dict(os.environ)
    if db["ENGINE"].endswith("postgresql"):
        # The worker uses the test database pytest-django just created and migrated.
        env["DATABASE_URL"] = (
            f"postgres://{db.get('USER') or ''}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
        )
    env.update(
        CELERY_QUEUE=queue,
        OPENAI_API_KEY="test",
        OPENAI_BASE_URL=f"{fake_model_url}/v1",
        DJANGO_SETTINGS_MODULE="hitl_project.settings",
        PYTHONUNBUFFERED="1",
    )
    return env


class Worker:
    """A Celery worker as a separate OS process (prefork pool, acks_late), stoppable with SIGKILL."""

    def __init__(self, queue: str, env: dict[str, str], log: Path):
        self.queue, self.env, self.log = queue, env, log
        self.proc: subprocess.Popen | None = None
        self.name = ""

    def start(self, concurrency: int = 2) -> Worker:
        from hitl_project.celery import app

        self.name = f"w-{uuid.uuid4().hex[:8]}@test"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "hitl_project", "worker", "-Q", self.queue, "-n", self.name,
             "-c", str(concurrency), "--pool=prefork", "--without-gossip", "--without-mingle", "-l", "INFO"],
            cwd=ROOT, env=self.env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"celery worker exited: see {self.log}")
            if app.control.ping(destination=[self.name], timeout=0.5):
                return self
        raise RuntimeError(f"celery worker did not start: see {self.log}")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture(scope="session")
def worker_factory(django_db_setup, django_db_blocker, celery_queue, fake_model, tmp_path_factory):
    """Start (more) Celery workers for this session's queue; all are stopped at the end."""
    if not settings.REDIS_URL:
        pytest.fail("the suite runs graphs in a real Celery worker: set REDIS_URL (make test does)")
    started: list[Worker] = []
    log = tmp_path_factory.mktemp("celery") / "worker.log"

    def start(concurrency: int = 2) -> Worker:
        worker = Worker(celery_queue, _worker_env(celery_queue, fake_model), log).start(concurrency)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()
    from hitl_project.graphs.checkpointer import close_pools

    close_pools()  # so the test database can be dropped


@pytest.fixture(scope="session")
def celery_worker(worker_factory):
    return worker_factory()


@pytest.fixture
def mcp_url(live_server, celery_worker):
    """The endpoint's exact URL (the SDK client does not follow a POST redirect)."""
    return f"{live_server.url}/mcp/"


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
