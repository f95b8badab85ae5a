"""The embedded default behind `make run`: no DATABASE_URL and no REDIS_URL, so SQLite for Django
and LangGraph's checkpoints, and rounds run in the web process. Served by uvicorn as `make run`
serves it, set up by the same `migrate` and `demo_setup` commands, driven by the official SDK
client and plain HTTP."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.clients import Raw, accept, by_message, run, sdk_client
from tests.processes import ROOT, Web
from tests.rounds import result_of


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    """(MCP URL, bearer token) of an embedded server with a data directory of its own."""
    home = tmp_path_factory.mktemp("embedded")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(HITL_VAR_DIR=str(home), GRAPHS_CONFIG="tests/langgraph.json", MCP_RUN_WAIT_SECONDS="1")
    web = Web(env, home / "web.log")

    def manage(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    manage("migrate", "--noinput", "-v", "0")
    printed = manage("demo_setup", "--url", web.url)
    token = re.search(r"Authorization: Bearer (\S+)", printed).group(1)
    web.start()
    yield f"{web.url}/mcp/", token
    web.stop()


def test_the_embedded_default_pauses_and_resumes_a_call_through_the_sdk_client(embedded):
    url, token = embedded

    async def go():
        async with sdk_client(url, token, by_message({"What is your name?": accept(name="Ada")})) as client:
            return await client.call_tool("greeter", {})

    assert run(go()).structured_content == {"greeting": "Hello, Ada!"}


def test_in_the_embedded_default_a_run_that_outlasts_the_wait_gets_a_request_state_that_collects_its_result(
    embedded,
):
    # Rounds run on threads of their own, not inside the request's database thread, so the request
    # answers "still running" at MCP_RUN_WAIT_SECONDS (1 s here) as it does with a Celery worker.
    url, token = embedded
    raw = Raw(url, token)

    still_running = result_of(raw.call("slow", {"value": 3}))

    assert set(still_running) - {"_meta"} == {"resultType", "requestState"}
    done = still_running
    while done.get("resultType") == "input_required":  # retried, as a client does
        done = result_of(raw.call("slow", {"value": 3}, requestState=done["requestState"]))
    assert done["isError"] is False and done["structuredContent"]["answer"] == "slept"
