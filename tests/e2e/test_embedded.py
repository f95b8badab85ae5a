"""The embedded default behind `make run`: no DATABASE_URL and no REDIS_URL, so SQLite for Django
and LangGraph's checkpoints, and rounds run in the web process. Served by uvicorn as `make run`
serves it, set up by the same `demo_setup --migrate` command, driven by the official SDK client,
the demo client the README starts with, and plain HTTP."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from tests.clients import (
    Raw,
    by_message,
    elicit_result_accepting,
    event_stream_messages,
    fastmcp_client,
    meta,
    run,
    sdk_client,
)
from tests.e2e.approvals import ADMIN_TOKEN, HIRE_ME
from tests.fakes import openai_server
from tests.processes import ROOT, Web, free_port, python
from tests.rounds import eventually, result_of, until_run_ends


def embedded_env(home: Path, **settings: str) -> dict[str, str]:
    """The environment `make run` gives its commands: no DATABASE_URL or REDIS_URL, data in `home`."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(HITL_VAR_DIR=str(home), **settings)
    return env


def manage(env: dict[str, str], *args: str) -> str:
    """`python manage.py ARGS` in `env`; its output, once it has succeeded."""
    done = python("manage.py", *args, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def printed_token(printed: str) -> str:
    """The MCP token from `make run`'s `export MCP_TOKEN=...` line."""
    return re.search(r"^export MCP_TOKEN=(\S+)$", printed, re.M).group(1)


def _serve(home: Path, **settings: str):
    """Set up and start an embedded server in `home` as `make run` does; (web, MCP URL, token)."""
    env = embedded_env(home, GRAPHS_CONFIG="tests/langgraph.json", MCP_RUN_WAIT_SECONDS="1", **settings)
    web = Web(env, home / "web.log")

    printed = manage(env, "demo_setup", "--migrate", "--url", web.url)
    token = printed_token(printed)
    web.start()
    return web, f"{web.url}/mcp/", token


@pytest.fixture(scope="module")
def embedded_server(tmp_path_factory):
    """(web server, its data directory, MCP URL, bearer token) of an embedded server with a data
    directory of its own."""
    home = tmp_path_factory.mktemp("embedded")
    web, url, token = _serve(home, ADMIN_TOKEN=ADMIN_TOKEN)
    yield web, home, url, token
    web.stop()


@pytest.fixture(scope="module")
def embedded(embedded_server):
    """(MCP URL, bearer token) of the module's embedded server."""
    _, _, url, token = embedded_server
    return url, token


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


def demo(url: str, token: str, *args: str, typed: str = "") -> subprocess.CompletedProcess:
    """`python -m mcp_gateway.demo URL TOKEN ...`, as the README runs it, with `typed` at its prompts."""
    return python("-m", "mcp_gateway.demo", url, token, *args, env=dict(os.environ), typed=typed)


def test_the_demo_client_lists_the_tools_with_their_arguments(embedded):
    url, token = embedded
    listed = demo(url, token)
    assert listed.returncode == 0, listed.stderr
    tools = dict(re.findall(r"^(\w+)\n    .*\n    (.*)$", listed.stdout, re.M))
    assert tools["digital_twin"] == "arguments: message"
    assert tools["send_email"] == "arguments: message"
    assert tools["choose_region"] == "no arguments"


def test_the_demo_client_asks_each_question_at_its_prompt_and_prints_the_result(embedded):
    url, token = embedded
    done = demo(url, token, "greeter", typed="Ada\n")
    assert done.returncode == 0, done.stderr
    assert "? What is your name?" in done.stdout
    assert '{"greeting":"Hello, Ada!"}' in done.stdout


def test_the_demo_client_asks_again_when_a_number_is_not_a_number_and_shows_the_range(embedded):
    url, token = embedded
    done = demo(url, token, "plan_deployment", typed="eu-west-1\nthree\n3\n")
    assert done.returncode == 0, done.stderr
    assert "'three' is not a whole number" in done.stdout
    assert "(1–10)" in done.stdout
    assert '"replicas":3' in done.stdout.replace(" ", "")


def test_the_demo_client_answers_a_multi_select_with_a_comma_separated_list(embedded):
    url, token = embedded
    colours = {"value": {"type": "array", "items": {"type": "string", "enum": ["red", "green", "blue"]}}}
    done = demo(url, token, "typed_from_input", json.dumps(colours), typed="red, blue\n")
    assert done.returncode == 0, done.stderr
    assert "any of red | green | blue, comma-separated" in done.stdout
    assert '"answer":["red","blue"]' in done.stdout.replace(" ", "")


@pytest.mark.parametrize(("typed", "action"), [("/decline\n", "decline"), ("/cancel\n", "cancel"), ("", "cancel")])
def test_the_demo_client_declines_or_cancels_a_question_as_typed(embedded, typed, action):
    # /decline and /cancel are the buttons a graphical client would show; end of input cancels.
    url, token = embedded
    done = demo(url, token, "choose_region", typed=typed)
    assert "? " in done.stdout
    said = done.stdout.split("?", 1)[1]
    assert {"decline": "declined", "cancel": "cancelled"}[action] in said.lower(), done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_the_demo_client_says_in_plain_words_what_is_wrong_with_a_field_as_it_is_typed(embedded):
    # Asked again at once, field by field: the server would refuse the form with -32602.
    url, token = embedded
    done = demo(url, token, "plan_deployment", typed="maybe\neu-west-1\n42\n4\n")
    assert done.returncode == 0, done.stderr
    assert "'maybe' is not one of the choices: us-east-1 | eu-west-1; try again" in done.stdout
    assert "42 is above 10, the largest allowed; try again" in done.stdout
    assert done.stdout.count("? Where should the service deploy?") == 1
    assert '"replicas":4' in done.stdout.replace(" ", "")


@pytest.mark.parametrize(
    ("tool", "arguments", "typed", "reason", "result"),
    [
        ("typed_validator", {}, "nobody\nAda\n", "nobody is not a nickname", '"answer":"Ada"'),
        (
            "review_letters_only_per_call",
            {"messages": "go"},
            'edit\n{"label": "1234"}\nedit\n{"label": "Grace"}\n',
            'The decision does not fit the tool: "1234" does not match',
            "tagged Grace",
        ),
    ],
)
def test_the_demo_client_asks_again_with_the_servers_reason_when_the_server_refuses_an_answer(
    embedded, tool, arguments, typed, reason, result
):
    url, token = embedded
    done = demo(url, token, tool, json.dumps(arguments), typed=typed)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "The server refused the answer: " in done.stdout
    assert reason in done.stdout.split("The server refused the answer: ", 1)[1]
    assert result in done.stdout.replace(" ", "") or result in done.stdout


def test_the_demo_client_asks_again_only_the_question_the_server_refused_and_keeps_the_rounds_other_answers(
    embedded,
):
    url, token = embedded
    ada, babbage = "Args: {'room': 'Ada'", "Args: {'room': 'Babbage'"
    typed = (
        'approve\nedit\n{"room": "Babbage", "start": "next Tuesday"}\n'
        'edit\n{"room": "Babbage", "start": "2026-12-01T12:00:00Z"}\n'
    )

    done = demo(url, token, "review_two_bookings_per_call", json.dumps({"messages": "go"}), typed=typed)

    assert done.returncode == 0, done.stdout + done.stderr
    assert 'The server refused the answer: The decision does not fit the tool: "next Tuesday"' in done.stdout
    assert done.stdout.count(ada) == 1 and done.stdout.count(babbage) == 2
    assert "booked Ada at 2026-12-01T10:00:00" in done.stdout
    assert "booked Babbage at 2026-12-01T12:00:00" in done.stdout


@pytest.mark.parametrize(
    ("typed", "said", "result"),
    [
        ("reject\nNot today\n", "Why you reject it (optional): ", "Not today"),
        ("respond\n\nSent it myself\n", "an answer is required here", "Sent it myself"),
        ('edit\n[1]\n{"to": "bob@example.com", "subject": "Launch"}\n', "must be a JSON object", "bob@example.com"),
    ],
)
def test_the_demo_client_asks_a_review_only_what_its_decision_uses(embedded, typed, said, result):
    url, token = embedded
    done = demo(url, token, "send_email", json.dumps({"message": "Send the launch email"}), typed=typed)
    assert done.returncode == 0, done.stdout + done.stderr
    assert said in done.stdout
    assert result in done.stdout
    if typed.startswith("reject"):
        assert "Arguments" not in done.stdout


def test_the_demo_client_shows_a_status_line_on_a_terminal_while_a_run_works(embedded):
    url, token = embedded
    terminal, stderr = os.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "mcp_gateway.demo", url, token, "slow", '{"value": 2.5}'],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            timeout=60,
        )
        os.close(stderr)
        shown = b""
        while chunk := _read_available(terminal):
            shown += chunk
    finally:
        os.close(terminal)
    assert done.returncode == 0
    assert "slow is running (2s)" in shown.decode()
    assert '"answer":"slept"' in done.stdout.replace(" ", "")


def _read_available(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:  # EIO: the terminal's other end is closed and everything was read
        return b""


def test_the_demo_clients_help_explains_its_arguments_and_the_prompt_commands():
    done = python("-m", "mcp_gateway.demo", "--help", env=dict(os.environ))
    assert done.returncode == 0
    for said in ("list the tools", "/decline", "/cancel, Ctrl-D", "JSON_ARGS", "exit status"):
        assert said in done.stdout


def test_the_demo_client_stops_at_the_first_ctrl_c_at_a_prompt(embedded):
    url, token = embedded
    client = subprocess.Popen(
        [sys.executable, "-m", "mcp_gateway.demo", url, token, "choose_region"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # input() flushes what was printed before its prompt: the question's line means it waits.
        assert client.stdout.readline() == "\n"
        assert client.stdout.readline().startswith("? Which region")
        time.sleep(0.5)
        client.send_signal(signal.SIGINT)
        assert client.wait(timeout=20) == 130
        assert client.stderr.read() == "\ninterrupted\n"
    finally:
        client.kill()
        client.wait()


@pytest.mark.parametrize(
    ("token", "args", "said"),
    [
        ("hitl_wrong", ["greeter"], "error: Unauthorized"),
        (None, ["no_such_tool"], "error: Unknown tool: no_such_tool"),
        (None, ["greeter", "[1]"], "error: JSON_ARGS must be a JSON object"),
        (None, ["greeter", "{"], "error: JSON_ARGS is not JSON"),
    ],
)
def test_the_demo_client_reports_a_mistake_in_one_line_without_a_traceback(embedded, token, args, said):
    url, good = embedded
    done = demo(url, token or good, *args)
    assert done.returncode in (1, 2)
    assert "Traceback" not in done.stdout + done.stderr
    assert done.stderr.startswith(said), done.stderr


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
    web, url, token = _serve(
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
        assert decided.json() == {
            "status": "approved",
            "approval_id": approval_id,
            "thread_id": thread_id,
            "answer": None,
            "approvals_given": 1,
            "approvals_required": 1,
        }
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
    port = free_port()
    env = embedded_env(tmp_path, HOST="0.0.0.0", PORT=str(port))
    log = tmp_path / "make.log"
    make = subprocess.Popen(
        ["make", "run"], cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 120
        # uvicorn binds its socket after the application's startup: "running on" is the line that
        # says it listens.
        while "Uvicorn running on" not in log.read_text() and time.monotonic() < deadline:
            assert make.poll() is None, log.read_text()
            time.sleep(0.2)
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
    web, url, token = _serve(tmp_path, MCP_DEFAULT_TTL_MINUTES="0.02", CLEANUP_INTERVAL_SECONDS="1")
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
    web, url, token = _serve(home)
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
    web, url, token = _serve(tmp_path)
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
    asked: list[str] = []

    async def answer(message, response_type, params, context):
        asked.append(message)
        return {"response": "eu-west"}

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
