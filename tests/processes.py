"""The service's real processes for tests: a Celery worker and a uvicorn web server, each its own
OS process group, stoppable with SIGKILL like a crash, and commands run to their end; all started
through the fork server (tests/forkserver.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import httpx
from django.conf import settings
from kombu.exceptions import OperationalError

from tests import forkserver

ROOT = forkserver.ROOT


def service_env(queue: str, fake_model_url: str, **extra: str) -> dict[str, str]:
    """The environment of a production process, pointed at the test database and a queue."""
    db = settings.DATABASES["default"]
    env = dict(os.environ)
    if db["ENGINE"].endswith("postgresql"):
        env["DATABASE_URL"] = (
            f"postgres://{db.get('USER') or ''}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
        )
    env.update(
        CELERY_QUEUE=queue,
        OPENAI_API_KEY="test",
        OPENAI_BASE_URL=f"{fake_model_url}/v1",
        DJANGO_SETTINGS_MODULE="hitl_project.settings",
        PYTHONUNBUFFERED="1",
        **extra,
    )
    return env


class _Process:
    proc: forkserver.Forked | subprocess.Popen | None = None

    def _spawn(self, args: list[str], env: dict[str, str], log: Path) -> None:
        """`python ARGS`, its output appended to `log`."""
        self.proc = forkserver.start(args, env, log)

    def kill(self) -> None:
        """SIGKILL the whole process group: no cleanup, as in a crash."""
        if self.proc and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


class Worker(_Process):
    """A Celery worker (the pool and acks_late of hitl_project/settings.py) consuming one queue."""

    def __init__(self, queue: str, env: dict[str, str], log: Path):
        self.queue, self.env, self.log = queue, env, log
        self.name = ""

    def start(self, concurrency: int = 2, *, beat_schedule: Path | None = None) -> Worker:
        """`beat_schedule`: also run Celery beat in this worker (-B), keeping its state there."""
        from celery import Celery

        from hitl_project.celery import app

        self.name = f"w-{uuid.uuid4().hex[:8]}@test"
        beat = ["-B", "-s", str(beat_schedule)] if beat_schedule is not None else []
        self._spawn(
            [
                "-m",
                "celery",
                "-A",
                "hitl_project",
                "worker",
                "-Q",
                self.queue,
                "-n",
                self.name,
                "-c",
                str(concurrency),
                "--without-gossip",
                "--without-mingle",
                "-l",
                "INFO",
                *beat,
            ],
            self.env,
            self.log,
        )
        # Asked over the worker's own broker (RabbitMQ, where its environment names one). Not made
        # Celery's current app: this test process goes on enqueueing through its own (work.enqueue
        # reads current_app), and a later test's staff decision must reach its own worker.
        pinging = (
            Celery(broker=self.env["CELERY_BROKER_URL"], set_as_current=False)
            if self.env.get("CELERY_BROKER_URL")
            else app
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"celery worker exited: see {self.log}")
            try:
                if pinging.control.ping(destination=[self.name], timeout=0.5):
                    return self
            except (OSError, OperationalError):
                # The broker is restarting (a test restarts RabbitMQ just before): not ready yet.
                time.sleep(0.2)
        raise RuntimeError(f"celery worker did not start: see {self.log}")

    def wait_until_idle(self, timeout: float = 60) -> None:
        """Until this worker's queue is empty and it runs nothing (tasks waiting for a countdown
        aside), or `timeout`: work a test left behind must not run while the next one begins."""
        import redis
        from django.conf import settings

        from hitl_project.celery import app

        broker = redis.Redis.from_url(settings.REDIS_URL)
        deadline = time.monotonic() + timeout
        while self.proc is not None and self.proc.poll() is None and time.monotonic() < deadline:
            if broker.llen(self.queue) == 0:
                inspect = app.control.inspect(destination=[self.name], timeout=1)
                active, reserved = inspect.active(), inspect.reserved()
                if active is not None and reserved is not None:
                    if not any(active.values()) and not any(reserved.values()):
                        return
            time.sleep(0.05)


def python(
    *args: str, env: dict[str, str], typed: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """`python ARGS` run from the checkout in `env`, with `typed` on its standard input; its output."""
    return forkserver.run(list(args), env, typed, timeout)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Web(_Process):
    """The production web server: uvicorn serving the ASGI app."""

    def __init__(self, env: dict[str, str], log: Path, port: int | None = None, *, access_log: bool = False):
        self.env, self.log = env, log
        # uvicorn's access log, as the Procfile's web writes it: off unless a test reads it.
        self.access_log = access_log
        # A port chosen here may be taken by another test process before uvicorn binds it: then
        # the first start moves to another one. A port given, or a restart, keeps its port.
        self._may_move = port is None
        self.port = port or free_port()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, workers: int = 1) -> Web:
        for _ in range(5):
            if self._start(workers):
                return self
            self.port = free_port()
        raise RuntimeError(f"web server found no free port: see {self.log}")

    def _start(self, workers: int) -> bool:
        """Whether the server started; False when its port was taken and it may move."""
        said_before = self.log.stat().st_size if self.log.exists() else 0
        self._spawn(
            [
                "-m",
                "uvicorn",
                "hitl_project.asgi:application",
                "--http",
                "hitl_project.http:NoDelayHttpToolsProtocol",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--workers",
                str(workers),
                *([] if self.access_log else ["--no-access-log"]),
            ],
            self.env,
            self.log,
        )
        # Only once uvicorn says it runs on this port is the server answering ours: before, another
        # test process's server that took the port would answer the health check (and refuse our
        # tokens).
        running = f"running on {self.url}".encode()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            said = self._said_since(said_before)
            if self.proc.poll() is not None:
                if self._may_move and b"address already in use" in said:
                    return False
                raise RuntimeError(f"web server exited: see {self.log}")
            try:
                if running in said and httpx.get(f"{self.url}/health/?format=json", timeout=2).status_code == 200:
                    self._may_move = False
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"web server did not start: see {self.log}")

    def _said_since(self, offset: int) -> bytes:
        with self.log.open("rb") as log:
            log.seek(offset)
            return log.read()
