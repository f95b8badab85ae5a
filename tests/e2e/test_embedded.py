"""The embedded default behind `make run`: no DATABASE_URL and no REDIS_URL, so SQLite for Django
and LangGraph's checkpoints, and rounds run in the web process. Served by uvicorn as `make run`
serves it, set up by the same `demo_setup --migrate` command, driven by the official SDK client
and plain HTTP (the demo client's tests are in test_embedded_demo_client.py)."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import re
import signal
import sqlite3
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest

from tests.clients import (
    Raw,
    by_message,
    elicit_result_accepting,
    event_stream_messages,
    fastmcp_client,
    meta,
    recording_handler,
    run,
    sdk_client,
)
from tests.e2e.approvals import ADMIN_TOKEN, HIRE_ME, SLACK_SIGNING_SECRET
from tests.e2e.embedded import embedded_env, manage, printed_token, serve
from tests.fakes import openai_server
from tests.processes import ROOT, Web, free_port, python
from tests.rounds import eventually, result_of, until_run_ends


def test_a_second_make_run_on_the_same_data_directory_refuses_naming_the_first_and_changes_nothing(embedded_server):
    web, home, url, token = embedded_server
    env = embedded_env(home, GRAPHS_CONFIG="tests/langgraph.json")
    holder = f"Another process (PID {web.proc.pid}) is serving the data directory {home}"

    setup = python("manage.py", "demo_setup", "--migrate", env=env)
    second = Web(env, home / "second.log")
    with pytest.raises(RuntimeError, match="web server exited"):
        second.start()

    assert setup.returncode == 1 and holder in setup.stderr
    assert second.proc.returncode == 1
    said = (home / "second.log").read_text()
    assert f"Cannot start: {holder}" in said and "took over" not in said
    assert (home / "embedded.pid").read_text() == str(web.proc.pid)
    assert httpx.get(f"{web.url}/health/?format=json").status_code == 200


def test_the_embedded_default_pauses_and_resumes_a_call_through_the_sdk_client(embedded):
    url, token = embedded

    async def go():
        async with sdk_client(
            url, token, by_message({"What is your name?": elicit_result_accepting(name="Ada")})
        ) as client:
            return await client.call_tool("greeter", {})

    assert run(go()).structured_content == {"greeting": "Hello, Ada!"}


def _streamed_call(url: str, token: str, name: str, arguments: dict, asked: dict) -> list[dict]:
    raw = Raw(url, token)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    body["params"] = {"name": name, "arguments": arguments, "_meta": {**meta(), **asked}}
    with raw.http.stream("POST", url, json=body, headers=raw.headers("tools/call", name)) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        return list(event_stream_messages(response))


def test_the_embedded_default_streams_a_runs_progress_and_log_lines_to_a_call_that_asks(embedded):
    url, token = embedded
    asked = {"progressToken": "p-1", "io.modelcontextprotocol/logLevel": "info"}

    *notifications, response = _streamed_call(url, token, "roll_out", {"version": "1.0"}, asked)

    progress = [n["params"] for n in notifications if n["method"] == "notifications/progress"]
    lines = [n["params"]["data"] for n in notifications if n["method"] == "notifications/message"]
    assert progress and {p["progressToken"] for p in progress} == {"p-1"}
    assert "deploying 1.0 to us-east-1" in lines
    # Its MCP_RUN_WAIT_SECONDS is 1: the stream ends with the requestState to come back with.
    assert response["result"]["resultType"] == "input_required" and response["result"]["requestState"]


def test_a_client_that_goes_away_mid_stream_leaves_its_call_running_and_answerable(embedded):
    url, token = embedded
    raw = Raw(url, token)
    arguments = {"version": "2.0"}
    # The idempotency key lets the client come back to the same call without its requestState.
    again = {**meta(), "hitl-mcp/idempotencyKey": "roll-out-2.0"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    body["params"] = {"name": "roll_out", "arguments": arguments, "_meta": {**again, "progressToken": 1}}
    with raw.http.stream("POST", url, json=body, headers=raw.headers("tools/call", "roll_out")) as response:
        first = next(event_stream_messages(response))
    assert first["method"] == "notifications/progress"  # and the client hangs up

    came_back = result_of(raw.call("roll_out", arguments, _meta=again))

    assert until_run_ends(raw, "roll_out", arguments, came_back)["structuredContent"]["regions"] == [
        "us-east-1",
        "eu-west-1",
        "ap-southeast-2",
    ]


def test_make_run_prints_the_same_login_and_token_on_every_start_until_the_token_is_revoked(tmp_path):
    env = embedded_env(tmp_path)

    def connect() -> tuple[str, str]:
        printed = manage(env, "demo_setup", "--migrate")
        return re.search(r"login: (.+)", printed).group(1), printed_token(printed)

    first, again = connect(), connect()
    assert again == first
    manage(
        env,
        "shell",
        "-c",
        "from django.utils import timezone; from mcp_gateway.models import MCPToken; "
        "MCPToken.objects.update(revoked_at=timezone.now())",
    )
    login, token = connect()
    assert login == first[0] and token != first[1]


def test_in_the_embedded_default_an_agent_output_with_unpaired_surrogates_is_delivered(embedded):
    # SQLite's checkpointer keeps it (PostgreSQL's jsonb refuses it, and the tool fails there), but
    # no UTF-8 text column can hold "\udce9" as it is: the round's outcome is stored escaped.
    url, token = embedded
    done = _call(Raw(url, token), "surrogate_output")

    assert done["isError"] is False and done["structuredContent"] == {"answer": "caf\udce9.txt"}


def test_in_the_embedded_default_a_run_that_outlasts_the_wait_gets_a_request_state_that_collects_its_result(
    embedded,
):
    # Rounds run on threads of their own, not inside the request's database thread, so the request
    # answers "still running" at MCP_RUN_WAIT_SECONDS (1 s here) as it does with a Celery worker.
    url, token = embedded
    raw = Raw(url, token)

    still_running = result_of(raw.call("slow", {"value": 3}))

    assert set(still_running) - {"_meta"} == {"resultType", "requestState"}
    done = until_run_ends(raw, "slow", {"value": 3}, still_running)
    assert done["isError"] is False and done["structuredContent"]["answer"] == "slept"


def test_in_the_embedded_default_ten_staff_decisions_at_once_resume_the_thread_once_and_the_rest_get_409(embedded):
    # SQLite ignores select_for_update: the decisions take turns only if each transaction takes the
    # file's write lock as it begins. One that read first would fail its write, a 500.
    url, token = embedded
    paused = _call(Raw(url, token), "digital_twin", {"message": HIRE_ME})
    assert paused["structuredContent"]["status"] == "pending", paused
    api = f"{url.removesuffix('/mcp/')}/api/admin/approvals"
    (pending,) = [a for a in _admin().get(api).json() if a["id"] == paused["structuredContent"]["approval_id"]]
    start = threading.Barrier(10)
    statuses: list[int] = []

    def decide():
        client = _admin()
        start.wait()
        statuses.append(client.post(f"{api}/{pending['thread_id']}", json={"approved": True}).status_code)

    threads = [threading.Thread(target=decide) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)

    assert Counter(statuses) == {200: 1, 409: 9}


def _admin(timeout: float = 120) -> httpx.Client:
    return httpx.Client(headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=timeout)


class _HeldModel(openai_server.Handler):
    """The fake model, holding each request while `held` is set until `released` is."""

    def do_POST(self) -> None:
        server = self.server
        if server.held.is_set():  # type: ignore[attr-defined]
            server.arrived.set()  # type: ignore[attr-defined]
            server.released.wait(120)  # type: ignore[attr-defined]
        super().do_POST()


@pytest.fixture
def held_model():
    """(URL, held, arrived, released) of a fake OpenAI model whose answers can be held."""
    server, url = openai_server.start()
    server.RequestHandlerClass = _HeldModel
    server.held, server.arrived, server.released = threading.Event(), threading.Event(), threading.Event()
    yield url, server.held, server.arrived, server.released
    server.released.set()
    server.shutdown()


def _staff_served(home: Path, model_url: str, **settings: str):
    """An embedded server whose digital_twin asks the fake model; (web, MCP URL, token, API URL)."""
    web, url, token = serve(
        home, ADMIN_TOKEN=ADMIN_TOKEN, OPENAI_API_KEY="test", OPENAI_BASE_URL=f"{model_url}/v1", **settings
    )
    return web, url, token, f"{url.removesuffix('/mcp/')}/api/admin/approvals"


def _pending_thread(url: str, token: str) -> str:
    paused = _call(Raw(url, token), "digital_twin", {"message": HIRE_ME})
    assert paused["structuredContent"]["status"] == "pending", paused
    return paused["structuredContent"]["approval_id"]


def _held_approval(home: Path, model_url: str, held: threading.Event):
    """An embedded server with a thread waiting for staff, whose resumed run the fake model will hold;
    (web, API URL of its thread, approval id)."""
    web, url, token, api = _staff_served(home, model_url, APPROVAL_WAIT_SECONDS="1")
    approval_id = _pending_thread(url, token)
    (pending,) = _admin().get(api).json()
    held.set()
    return web, f"{api}/{pending['thread_id']}", approval_id


def _answer_of(home: Path, approval_id: str) -> str | None:
    with sqlite3.connect(home / "db.sqlite3") as db:
        row = db.execute(
            "SELECT answer FROM approvals_approvalrequest WHERE id = ? AND answered_at IS NOT NULL",
            (approval_id.replace("-", ""),),
        ).fetchone()
    return row and row[0]


def _eventual_answer(home: Path, approval_id: str) -> str:
    eventually(lambda: _answer_of(home, approval_id) is not None, timeout=60)
    return _answer_of(home, approval_id) or ""


def test_in_the_embedded_default_a_staff_decision_answers_202_when_the_resumed_run_outlasts_the_wait(
    tmp_path, held_model
):
    # The resume runs on a thread of the web process, as a worker would run it, not inside the
    # request: the API answers at APPROVAL_WAIT_SECONDS (1 s here) however long the model takes.
    model_url, held, _, released = held_model
    web, thread_url, approval_id = _held_approval(tmp_path, model_url, held)
    try:
        decided = _admin(timeout=20).post(thread_url, json={"approved": True})

        assert decided.status_code == 202, decided.text
        thread_id = thread_url.rsplit("/", 1)[1]
        body = decided.json()
        assert body == {
            "status": "approved",
            "approval_id": approval_id,
            "thread_id": thread_id,
            "answer": None,
            "approvals_given": 1,
            "approvals_required": 1,
            # Approved as requested: the digest approved is the one requested.
            "digest": body["approved_digest"],
            "approved_digest": body["digest"],
        }
        assert len(body["digest"]) == 64
        released.set()
        assert _eventual_answer(tmp_path, approval_id).startswith("Your message was recorded")
    finally:
        web.stop()


def test_the_embedded_default_restarted_in_the_middle_of_a_staff_resume_carries_it_on_as_it_starts(
    tmp_path, held_model
):
    # As with rounds: the resume's lease (an hour) would keep the periodic job off it that long.
    model_url, held, arrived, released = held_model
    web, thread_url, approval_id = _held_approval(tmp_path, model_url, held)
    try:

        def decide() -> None:
            with contextlib.suppress(httpx.HTTPError):  # the server it waits on is killed
                _admin().post(thread_url, json={"approved": True})

        deciding = threading.Thread(target=decide)
        deciding.start()
        assert arrived.wait(60), "the resumed run never asked the model"

        web.kill()  # `make run` stopped with the resume in flight, and started again
        held.clear()
        released.set()
        web.start()

        assert _eventual_answer(tmp_path, approval_id).startswith("Your message was recorded")
        with sqlite3.connect(tmp_path / "db.sqlite3") as db:  # the approved tool ran once
            assert db.execute("SELECT count(*) FROM approvals_contactmessage").fetchone()[0] == 1
        deciding.join(60)
    finally:
        web.stop()


def test_make_run_on_all_interfaces_prints_an_address_that_answers(tmp_path):
    # `HOST=0.0.0.0 make run` serves on every interface; the URL and the command it prints must work.
    log = tmp_path / "make.log"
    # A port chosen free may be taken by another test process before uvicorn binds it: then again
    # on another one.
    for _ in range(5):
        env = embedded_env(tmp_path, HOST="0.0.0.0", PORT=str(free_port()))
        make = subprocess.Popen(
            ["make", "run"], cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + 120
        # uvicorn binds its socket after the application's startup: "running on" is the line that
        # says it listens.
        while "Uvicorn running on" not in log.read_text() and time.monotonic() < deadline and make.poll() is None:
            time.sleep(0.2)
        if make.poll() is None or "address already in use" not in log.read_text():
            break
    try:
        assert make.poll() is None, log.read_text()
        printed = log.read_text()
        url = re.search(r"MCP: +(\S+)", printed).group(1)
        token = printed_token(printed)

        async def go():
            async with sdk_client(
                url, token, by_message({"What is your name?": elicit_result_accepting(name="Ada")})
            ) as client:
                return await client.call_tool("greeter", {})

        assert run(go()).structured_content == {"greeting": "Hello, Ada!"}
    finally:
        os.killpg(make.pid, signal.SIGTERM)
        make.wait(30)


def test_the_embedded_default_removes_expired_calls_with_their_checkpoints_without_a_beat_process(tmp_path):
    # No Celery beat runs beside `make run`: the web process runs beat's schedule itself. A default_ttl
    # of 0.02 minutes (1.2 s) and a cleanup every second, so the paused call expires and goes at once.
    web, url, token = serve(tmp_path, MCP_DEFAULT_TTL_MINUTES="0.02", CLEANUP_INTERVAL_SECONDS="1")
    try:
        paused = _call(Raw(url, token), "greeter")
        assert paused["resultType"] == "input_required" and paused["inputRequests"], paused

        def left() -> tuple[int, int]:
            with (
                sqlite3.connect(tmp_path / "db.sqlite3") as calls,
                sqlite3.connect(tmp_path / "checkpoints.sqlite") as checkpoints,
            ):
                return (
                    calls.execute("SELECT count(*) FROM mcp_gateway_toolcall").fetchone()[0],
                    checkpoints.execute("SELECT count(*) FROM checkpoints").fetchone()[0],
                )

        assert left()[0] == 1 and left()[1] > 0
        assert eventually(lambda: left() == (0, 0), timeout=60), "the expired call or its checkpoints are still there"
    finally:
        web.stop()


def test_the_embedded_default_restarted_in_the_middle_of_a_run_carries_the_round_on_as_it_starts(tmp_path):
    # The rounds run on threads of the web process, so a restart loses the runs in flight. Their
    # leases (an hour) would make the client's retries wait that long: the new process takes them over.
    home, signals = tmp_path / "home", tmp_path / "signals"
    home.mkdir(), signals.mkdir()
    web, url, token = serve(home)
    try:
        raw, arguments = Raw(url, token), {"signal_dir": str(signals)}
        asked = _call(raw, "held_effect", arguments)
        (key,) = asked["inputRequests"]
        go = {key: {"action": "accept", "content": {"response": "yes"}}}
        # The run holds until released, so after MCP_RUN_WAIT_SECONDS (1 s) the answer gets a
        # requestState to come back with.
        running = result_of(raw.call("held_effect", arguments, inputResponses=go, requestState=asked["requestState"]))
        assert set(running) - {"_meta"} == {"resultType", "requestState"}
        assert eventually((signals / "started").exists, timeout=60)

        web.kill()  # `make run` stopped with the run in flight, and started again
        (signals / "release").touch()
        web.start()

        done = until_run_ends(raw, "held_effect", arguments, running)
        assert done.get("structuredContent") == {"signal_dir": str(signals), "go": "yes", "done": True}, done
        assert (signals / "effects").read_text().splitlines() == ["effect"]
    finally:
        web.stop()


def test_stopping_the_embedded_default_in_the_middle_of_a_run_neither_waits_for_the_run_nor_fails_it(tmp_path):
    # Ctrl-C on `make run` while a round runs: the process ends at once, and the next start carries
    # the round on. Waiting for the run, Python's exit also refused LangGraph the threads it saves
    # checkpoints on, and the run was recorded as the tool's failure.
    web, url, token = serve(tmp_path)
    try:
        raw = Raw(url, token)
        running = result_of(raw.call("slow", {"value": 4}))  # sleeps 4 s; the request waits 1 s
        assert set(running) - {"_meta"} == {"resultType", "requestState"}

        os.killpg(web.proc.pid, signal.SIGINT)  # Ctrl-C in the terminal
        web.proc.wait(60)
        web.start()

        done = until_run_ends(raw, "slow", {"value": 4}, running)
        assert done.get("structuredContent") == {"value": 4, "answer": "slept"}, done
    finally:
        web.stop()


def test_the_embedded_default_keeps_djangos_database_in_wal_mode_like_the_checkpoints(tmp_path):
    env = embedded_env(tmp_path)
    code = (
        "from django.db import connection\n"
        "with connection.cursor() as cursor:\n"
        "    cursor.execute('PRAGMA journal_mode')\n"
        "    print(connection.vendor, cursor.fetchone()[0])\n"
    )
    assert manage(env, "shell", "-v", "0", "-c", code).split() == ["sqlite", "wal"]


def _call(raw: Raw, tool: str, arguments: dict | None = None) -> dict:
    """A first call's result, after coming back while the run is still going: the server answers
    "still running" after MCP_RUN_WAIT_SECONDS (1 s here), which a first run on a busy machine can
    outlast."""
    return until_run_ends(raw, tool, arguments, result_of(raw.call(tool, arguments)))


WITH_TASKS = {"elicitation": {"form": {}}, "extensions": {"io.modelcontextprotocol/tasks": {}}}


def test_in_the_embedded_default_a_task_capable_client_answers_a_tasks_question_and_gets_its_result(
    embedded, tasks_client
):
    url, token = embedded
    asked, answer = recording_handler(lambda message: {"response": "eu-west"})

    async def go():
        async with fastmcp_client(url, token, handler=answer) as client:
            return await client.call_tool("choose_region_task", {})

    result = run(go())

    assert asked == ["Which region should the service deploy to?"]
    assert result.structured_content == {"region": "eu-west"}


def test_in_the_embedded_default_a_listen_stream_notifies_a_task_until_it_completes(embedded):
    # Without Redis the stream reads its tasks every second instead of being woken.
    url, token = embedded
    raw = Raw(url, token)
    created = raw.call("slow_task", {"value": 1}, capabilities=WITH_TASKS).json()["result"]
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "subscriptions/listen",
        "params": {"notifications": {"taskIds": [created["taskId"]]}, "_meta": meta(WITH_TASKS)},
    }

    with raw.http.stream("POST", url, json=body, headers=raw.headers("subscriptions/listen"), timeout=60) as response:
        messages = list(event_stream_messages(response))

    assert messages[0]["params"]["notifications"] == {"taskIds": [created["taskId"]]}
    statuses = [m["params"]["status"] for m in messages if m.get("method") == "notifications/tasks"]
    assert statuses[0] == "working" and statuses[-1] == "completed"
    assert messages[-1]["result"]["resultType"] == "complete"


def _runs_logged(log: Path, since: int) -> Counter:
    """How many times each round of each call was run, by the server's log from byte `since` on."""
    with log.open("rb") as file:
        file.seek(since)
        text = file.read().decode(errors="replace")
    return Counter(re.findall(r"call ([0-9a-f-]{36}): round (\d+) running", text))


def test_the_embedded_default_completes_sixteen_concurrent_rounds_each_once_and_enqueues_none_twice(
    embedded_server,
):
    _, home, url, token = embedded_server
    log, start = home / "web.log", threading.Barrier(16)
    since = log.stat().st_size
    results: list[dict] = []

    def whole_round() -> None:
        raw = Raw(url, token)
        start.wait()
        asked = until_run_ends(raw, "choose_region", None, result_of(raw.call("choose_region")))
        (key,) = asked["inputRequests"]
        responses = {key: {"action": "accept", "content": {"response": "eu-west-1"}}}
        done = result_of(raw.call("choose_region", inputResponses=responses, requestState=asked["requestState"]))
        results.append(until_run_ends(raw, "choose_region", None, done))

    clients = [threading.Thread(target=whole_round) for _ in range(16)]
    for client in clients:
        client.start()
    for client in clients:
        client.join(120)

    assert [r.get("structuredContent") for r in results] == [{"region": "eu-west-1"}] * 16, results
    runs = _runs_logged(log, since)
    assert len({call for call, _ in runs}) == 16 and set(runs.values()) == {1}, runs
    assert sorted(number for _, number in runs) == ["0"] * 16 + ["1"] * 16
    assert "looks stalled" not in log.read_text(errors="replace")


def test_in_the_embedded_default_a_round_waiting_for_the_database_longer_than_its_lease_runs_once(tmp_path):
    # Another process (a `manage.py` command, a backup) holds SQLite's write lock for longer than
    # the round's lease: its heartbeat cannot renew the lease meanwhile. The round is still this
    # process's, on its own thread: it must not be taken for a dead one and run a second time.
    home, signals = tmp_path / "home", tmp_path / "signals"
    home.mkdir(), signals.mkdir()
    web, url, token = serve(home, RUN_LEASE_SECONDS="2", STALLED_CHECK_SECONDS="1")
    try:
        raw, arguments = Raw(url, token), {"signal_dir": str(signals), "tag": "once", "seconds": 1.0}
        running = result_of(raw.call("slow_effect", arguments))
        assert eventually((signals / "started").exists, timeout=60)
        other = sqlite3.connect(home / "db.sqlite3", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        time.sleep(6)  # three leases, and well within SQLite's busy timeout (20 s)
        other.execute("COMMIT")
        other.close()

        done = until_run_ends(raw, "slow_effect", arguments, running)

        assert done.get("structuredContent", {}).get("done") is True, done
        assert (signals / "effects").read_text().splitlines() == ["once"]
        assert "looks stalled" not in (home / "web.log").read_text(errors="replace")
    finally:
        web.stop()


def test_in_the_embedded_default_verify_audit_exits_1_naming_a_row_changed_with_sql(embedded_server):
    # The chain as the server wrote it on SQLite, checked by the command as cron or an operator
    # runs it (the rules of the chain are tests/inprocess/test_audit_chain.py).
    _, home, url, token = embedded_server
    paused = _call(Raw(url, token), "digital_twin", {"message": HIRE_ME})
    with contextlib.closing(sqlite3.connect(home / "db.sqlite3")) as db, db:
        db.execute(
            "UPDATE approvals_auditevent SET actor = 'mallory' WHERE kind = 'requested' AND approval_id = ?",
            [paused["structuredContent"]["approval_id"].replace("-", "")],
        )

    broken = python("manage.py", "verify_audit", env=embedded_env(home))

    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert re.search(r"breaks at event #\d+: its content \(requested\) does not match its hash", broken.stderr)


def test_in_the_embedded_default_a_call_while_another_process_holds_the_database_locked_gets_503_not_500(tmp_path):
    # Another process (a `manage.py` command, a backup) holds SQLite's write lock past the busy
    # timeout: the call's transaction gives up and rolls back. The client is told to come back.
    home = tmp_path / "home"
    home.mkdir()
    web, url, token = serve(home, SQLITE_BUSY_TIMEOUT_SECONDS="0.5")
    try:
        raw = Raw(url, token)
        other = sqlite3.connect(home / "db.sqlite3", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            busy = raw.call("greeter", {"name": "Ada"})
        finally:
            other.execute("COMMIT")
            other.close()

        assert busy.status_code == 503 and busy.headers["Retry-After"] == "2", busy.text
        assert busy.json()["error"]["code"] == -32603 and busy.json()["id"] is not None
        log = (home / "web.log").read_text(errors="replace")
        assert "database is locked" in log and "Traceback" not in log and "Internal error" not in log
        result_of(raw.call("greeter", {"name": "Ada"}))  # the same call, once the lock is let go
    finally:
        web.stop()


def test_in_the_embedded_default_a_slack_signed_approval_resumes_the_call_once_and_a_replay_is_refused(embedded_server):
    # SQLite and no Redis: the replayed signature is refused from the database, and the decision and
    # its resume run in the web process (the rules are tests/inprocess/test_decisions_from_slack_and_email.py).
    _, home, url, token = embedded_server
    approval_id = _call(Raw(url, token), "digital_twin", {"message": HIRE_ME})["structuredContent"]["approval_id"]
    with contextlib.closing(sqlite3.connect(home / "db.sqlite3")) as db, db:
        # A superuser of their own: the `staff` user made the call (the MCP token is theirs).
        db.execute(
            "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff, "
            "is_active, date_joined) VALUES ('!', 1, 'grace', '', '', '', 1, 1, '2026-12-01 00:00:00')"
        )
        db.execute(
            "INSERT INTO approvals_staffidentity (user_id, slack_user_id) "
            "SELECT id, 'U0GRACE' FROM auth_user WHERE username = 'grace'"
        )
    press = {
        "type": "block_actions",
        "user": {"id": "U0GRACE"},
        "actions": [{"action_id": "hitl_approve", "value": approval_id}],
    }
    body = urlencode({"payload": json.dumps(press)}).encode()
    stamp = str(int(time.time()))
    signed = hmac.new(SLACK_SIGNING_SECRET.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": f"v0={signed}",
    }
    interactions = f"{url.removesuffix('/mcp/')}/slack/interactions"

    pressed = httpx.post(interactions, content=body, headers=headers, timeout=60)
    replayed = httpx.post(interactions, content=body, headers=headers, timeout=60)

    assert (pressed.status_code, replayed.status_code) == (200, 409)
    assert eventually(lambda: _answer_of(home, approval_id) is not None, timeout=60)
    with contextlib.closing(sqlite3.connect(home / "db.sqlite3")) as db:
        decided = db.execute(
            "SELECT status, decided_via FROM approvals_approvalrequest WHERE id = ?", [approval_id.replace("-", "")]
        ).fetchone()
        archived = db.execute(
            "SELECT count(*) FROM approvals_contactmessage WHERE approval_id = ?", [approval_id.replace("-", "")]
        ).fetchone()
    assert (decided, archived) == (("approved", "slack"), (1,))
