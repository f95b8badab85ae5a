"""What the processes print (docs/operating.md, "Logs" and "Traces"): with LOG_FORMAT=json every line
of the Procfile's worker and beat is one JSON object, from start to SIGTERM; spans printed to the
console are one line each; the web says where its traces go; beat's frequent periodic jobs write no
INFO line when they did nothing; the admin's favicon is served, not logged as a 404."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.embedded import serve
from tests.processes import ROOT, Web, service_env

# uvicorn's own lines (its start and stop) keep uvicorn's format, as docs/operating.md says.
UVICORN_LINE = re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL):\s")


def procfile(process: str) -> str:
    """The Procfile's command line for `process`."""
    for line in (ROOT / "Procfile").read_text().splitlines():
        name, _, command = line.partition(":")
        if name.strip() == process:
            return command.strip()
    raise LookupError(process)


def run_until_sigterm(command: str, env: dict[str, str], log: Path, started: Callable[[str], bool]) -> str:
    """Run `command` as the Procfile's process manager would (a shell, the virtualenv's scripts on
    PATH), send it SIGTERM once `started(output)` holds, and return all it printed."""
    env = {**env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["sh", "-c", f"exec {command}"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while not started(log.read_text(errors="replace")):
            assert proc.poll() is None, f"{command!r} exited:\n{log.read_text(errors='replace')}"
            assert time.monotonic() < deadline, f"{command!r} did not start:\n{log.read_text(errors='replace')}"
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return log.read_text(errors="replace")


def json_lines(printed: str) -> list[dict[str, Any]]:
    lines = printed.splitlines()
    assert lines
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            pytest.fail(f"not a JSON line: {line!r}\nin:\n{printed}")
    return parsed


@pytest.fixture(scope="module")
def worker_printed(django_db_setup, celery_queue, fake_model, tmp_path_factory) -> str:
    """All the Procfile's worker printed with LOG_FORMAT=json, from its start to its exit on SIGTERM."""
    home = tmp_path_factory.mktemp("json-worker")
    env = service_env(f"{celery_queue}-json-lines", fake_model, LOG_FORMAT="json", HITL_VAR_DIR=str(home))
    return run_until_sigterm(procfile("worker"), env, home / "worker.log", lambda said: " ready." in said)


@pytest.fixture(scope="module")
def beat(django_db_setup, celery_queue, fake_model, tmp_path_factory) -> dict[str, Any]:
    """The Procfile's beat with LOG_FORMAT=json and metrics on, its stalled-run checks every second,
    stopped with SIGTERM once it has sent them a few times."""
    import redis
    from django.conf import settings

    home = tmp_path_factory.mktemp("json-beat")
    queue = f"{celery_queue}-beat"  # which no worker consumes
    env = service_env(
        queue,
        fake_model,
        LOG_FORMAT="json",
        LOG_LEVEL="DEBUG",
        HITL_VAR_DIR=str(home),
        STALLED_CHECK_SECONDS="1",
        METRICS_ENABLED="true",
        METRICS_DIR=str(home / "metrics"),
    )
    broker = redis.Redis.from_url(settings.REDIS_URL)

    def sent_a_few() -> bool:
        return broker.llen(queue) >= 4

    printed = run_until_sigterm(procfile("beat"), env, home / "beat.log", lambda said: sent_a_few())
    broker.delete(queue)
    return {"printed": printed, "metrics": home / "metrics"}


def test_with_log_format_json_every_line_the_procfiles_worker_prints_is_a_json_object(worker_printed):
    lines = json_lines(worker_printed)

    messages = [line["message"] for line in lines]
    # Celery's banner and its shutdown message, which it prints past logging, are log lines too.
    [banner] = [line for line in lines if " starting: celery " in line["message"]]
    assert banner["queues"] and banner["concurrency"] > 0
    assert "worker: Warm shutdown (MainProcess)" in messages
    if os.geteuid() == 0:
        # Python's warnings: Celery warns a worker run as root, before its logging is set up.
        assert any(line["logger"] == "py.warnings" and "SecurityWarning" in line["message"] for line in lines)


def test_with_log_format_json_every_line_the_procfiles_beat_prints_is_a_json_object(beat):
    lines = json_lines(beat["printed"])

    assert "beat: Starting..." in [line["message"] for line in lines]


def test_beat_sends_the_stalled_run_checks_at_debug_not_info(beat):
    lines = json_lines(beat["printed"])

    sends = [line for line in lines if "Sending due task nudge-stalled-" in line["message"]]
    assert len(sends) >= 4
    assert {line["level"] for line in sends} == {"DEBUG"}


def test_beat_writes_nothing_into_the_metrics_directory(beat):
    assert list(beat["metrics"].iterdir()) == []


@pytest.fixture(scope="module")
def procfile_web_printed(django_db_setup, celery_queue, fake_model, tmp_path_factory) -> str:
    """All the Procfile's web printed with LOG_FORMAT=json, two uvicorn processes under its
    supervisor, from its start through requests (answered, refused, not found) to its exit."""
    from tests.processes import free_port

    home = tmp_path_factory.mktemp("json-web")
    port = free_port()
    env = service_env(f"{celery_queue}-json-web", fake_model, LOG_FORMAT="json", HITL_VAR_DIR=str(home), PORT=str(port))
    base = f"http://127.0.0.1:{port}"

    def serving(said: str) -> bool:
        if said.count("Application startup complete") < 2:
            return False
        assert httpx.get(f"{base}/admin/login/").status_code == 200
        assert httpx.get(f"{base}/no-such-page").status_code == 404
        assert httpx.get(f"{base}/health/", headers={"Host": "not-allowed.example"}).status_code == 400
        return True

    return run_until_sigterm(procfile("web").replace("${WEB_CONCURRENCY:-2}", "2"), env, home / "web.log", serving)


def test_with_log_format_json_every_line_the_procfiles_web_prints_is_a_json_object(procfile_web_printed):
    lines = json_lines(procfile_web_printed)

    loggers = {line["logger"] for line in lines}
    # uvicorn's supervisor, its processes' start and stop, and every access line.
    assert {"uvicorn.error", "uvicorn.access"} <= loggers
    messages = [line["message"] for line in lines]
    assert any("GET /admin/login/ HTTP/1.1" in message and message.endswith("200") for message in messages)
    assert any("GET /no-such-page HTTP/1.1" in message for message in messages)
    assert not any("lifespan" in message for message in messages)


@pytest.fixture(scope="module")
def web_printed(django_db_setup, celery_queue, fake_model, tmp_path_factory) -> str:
    """All a web process printed with LOG_FORMAT=json and spans printed to the console, serving a
    few requests."""
    home = tmp_path_factory.mktemp("console-spans")
    env = service_env(
        f"{celery_queue}-console-spans",
        fake_model,
        LOG_FORMAT="json",
        HITL_VAR_DIR=str(home),
        OTEL_TRACES_EXPORTER="console",
        OTEL_BSP_SCHEDULE_DELAY="100",
    )
    web = Web(env, home / "web.log").start()
    try:
        for _ in range(3):
            assert httpx.get(f"{web.url}/admin/login/").status_code == 200
    finally:
        web.stop()  # the last spans are printed as it exits
    return (home / "web.log").read_text(errors="replace")


def test_with_the_console_exporter_each_span_is_one_json_line_among_the_json_log_lines(web_printed):
    ours = [line for line in web_printed.splitlines() if not UVICORN_LINE.match(line)]
    lines = json_lines("\n".join(ours))

    spans = [line for line in lines if "context" in line and "trace_id" in line["context"]]
    assert {span["name"] for span in spans} >= {"GET admin/login/"}
    assert any("message" in line for line in lines)


def test_the_web_says_where_its_traces_go(web_printed):
    ours = [line for line in web_printed.splitlines() if not UVICORN_LINE.match(line)]

    assert "traces go to console" in [line.get("message") for line in json_lines("\n".join(ours))]


def test_the_stalled_run_checks_of_the_embedded_default_write_no_info_line_when_they_found_nothing(tmp_path):
    web, _, _ = serve(tmp_path, STALLED_CHECK_SECONDS="1", LOG_LEVEL="DEBUG")
    try:
        time.sleep(4)
    finally:
        web.stop()
    records = [line for line in (tmp_path / "web.log").read_text().splitlines() if re.match(r"\d{4}-\d\d-\d\d ", line)]
    about_the_checks = [line for line in records if "nudge" in line]

    # Beat's sending, and each check's "succeeded … {'rounds_nudged': 0}": DEBUG lines only.
    assert any(" DEBUG celery.beat " in line for line in about_the_checks)
    assert any(" DEBUG celery.app.trace " in line and "_nudged': 0}" in line for line in about_the_checks)
    assert [line for line in about_the_checks if " DEBUG " not in line] == []


def test_the_favicon_every_admin_page_asks_for_is_served_without_a_warning(client, caplog):
    response = client.get("/favicon.ico")

    assert response.status_code == 200
    assert response["Content-Type"] in ("image/x-icon", "image/vnd.microsoft.icon")
    assert b"".join(response.streaming_content)[:4] == b"\x00\x00\x01\x00"  # an icon file
    assert [r.getMessage() for r in caplog.records if r.levelno >= 30] == []
