"""The demo client the README starts with (`python -m demo_client`), against the embedded
default that `make run` serves: its prompts for each kind of question, its answers to a refused
answer, its status line, Ctrl-C and its one-line errors."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.processes import ROOT, free_port, python


def demo(url: str, token: str, *args: str, typed: str = "") -> subprocess.CompletedProcess:
    """`python -m demo_client URL TOKEN ...`, as the README runs it, with `typed` at its prompts."""
    return python("-m", "demo_client", url, token, *args, env=dict(os.environ), typed=typed)


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
            [sys.executable, "-m", "demo_client", url, token, "slow", '{"value": 2.5}'],
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
    done = python("-m", "demo_client", "--help", env=dict(os.environ))
    assert done.returncode == 0
    for said in ("list the tools", "/decline", "/cancel, Ctrl-D", "JSON_ARGS", "exit status"):
        assert said in done.stdout


def test_the_demo_client_stops_at_the_first_ctrl_c_at_a_prompt(embedded):
    url, token = embedded
    client = subprocess.Popen(
        [sys.executable, "-m", "demo_client", url, token, "choose_region"],
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


def test_the_demo_client_says_an_empty_token_is_empty_and_where_a_token_comes_from(embedded):
    # The `export MCP_TOKEN=...` line not pasted: "$MCP_TOKEN" is empty.
    url, _ = embedded
    done = demo(url, "", "greeter")
    assert done.returncode == 2
    assert done.stderr.startswith("error: TOKEN is empty: paste the `export MCP_TOKEN=...` line"), done.stderr
    assert "python manage.py mcp_token" in done.stderr


def test_the_demo_client_says_the_base_url_is_not_the_endpoint_and_names_the_endpoint(embedded):
    url, token = embedded
    base = url.removesuffix("mcp/")
    done = demo(base, token, "greeter")
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: {base} is not the MCP endpoint"), done.stderr
    assert f"try {url}\n" in done.stderr


def test_the_demo_client_names_the_url_nothing_answers_at_when_the_port_is_wrong(embedded):
    url, token = embedded
    port = int(url.split(":")[2].split("/")[0])
    wrong = url.replace(f":{port}/", f":{free_port()}/")  # nothing listens there
    done = demo(wrong, token, "greeter")
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: nothing answers at {wrong}"), done.stderr
    assert "check the host and port against the URL `make run` printed" in done.stderr
