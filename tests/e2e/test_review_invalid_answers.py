"""Review tool calls, invalid answers: a decision that fails its checks fails with -32602, no
reviewed tool runs, and the round stays open."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from tests.clients import Raw, elicit_result_accepting
from tests.e2e.review import (
    BATCHED,
    BOTH_MODES,
    PER_CALL,
    TWICE,
    answer,
    ask,
    assert_invalid,
    assert_round_still_open,
    decide,
    decisions_received,
    final_text,
    last_words,
    only_key,
    review,
)
from tests.graphs_review import SCHEMA_PORT


@BOTH_MODES
@pytest.mark.parametrize("args", ["[1, 2]", "not json", '"ada@example.com"', '{"to": NaN}'])
def test_arguments_that_are_not_a_json_object_fail_with_32602_and_the_round_stays_open(mcp_url, token, tool, args):
    raw = Raw(mcp_url, token)
    asked = ask(raw, tool)
    response = answer(raw, tool, asked, {only_key(asked): decide("edit", args=args)})
    assert_invalid(response, "Invalid answer: args must be a JSON object")
    assert decisions_received() == []
    result = assert_round_still_open(raw, tool, asked, decide("approve"))
    assert "sent to ada@example.com" in result["content"][0]["text"]


@BOTH_MODES
@pytest.mark.parametrize("message", [None, "", "  "])
def test_a_respond_decision_without_a_message_fails_with_32602_and_the_round_stays_open(mcp_url, token, tool, message):
    raw = Raw(mcp_url, token)
    asked = ask(raw, tool)
    respond = decide("respond") if message is None else decide("respond", message=message)
    response = answer(raw, tool, asked, {only_key(asked): respond})
    assert_invalid(response, "Invalid answer: a respond decision needs a message")
    result = assert_round_still_open(raw, tool, asked, decide("respond", message="Not needed"))
    assert last_words(result["structuredContent"]) == "Done: Not needed"


@pytest.mark.parametrize("bad", ["edit", "respond"])
def test_in_per_call_mode_a_decision_that_fails_its_own_check_fails_with_32602_even_when_another_is_missing(
    mcp_url, token, bad
):
    # Each call is its own interrupt, so its decision is checked as soon as it is answered.
    raw = Raw(mcp_url, token)
    asked = ask(raw, PER_CALL, TWICE)
    keys = sorted(asked["inputRequests"])
    wrong = decide("edit", args="[1]") if bad == "edit" else decide("respond")

    response = answer(raw, PER_CALL, asked, {keys[0]: wrong}, TWICE)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32602
    assert decisions_received() == []


@pytest.mark.parametrize("tool", ["review_approve_only", "review_approve_only_per_call"])
@pytest.mark.parametrize("decision", ["reject", "edit", "maybe"])
def test_a_decision_the_call_does_not_allow_fails_with_32602_and_the_round_stays_open(mcp_url, token, tool, decision):
    raw = Raw(mcp_url, token)
    arguments = {"messages": "go"}
    asked = ask(raw, tool, arguments)
    response = answer(raw, tool, asked, {only_key(asked): decide(decision, message="no")}, arguments)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32602
    response = answer(raw, tool, asked, {only_key(asked): decide("approve")}, arguments)
    assert response.json()["result"]["structuredContent"]["messages"][-1]["content"] == "Done: published 5 characters"


def test_in_per_call_mode_an_edit_that_breaks_the_tool_arguments_fails_with_32602_and_no_tool_runs(mcp_url, token):
    raw = Raw(mcp_url, token)
    asked = ask(raw, PER_CALL)
    response = answer(raw, PER_CALL, asked, {only_key(asked): decide("edit", args='{"to": "bob@example.com"}')})
    assert_invalid(response, 'The decision does not fit the tool: "subject" is a required property')
    assert response.json()["error"]["data"]["path"] == "edited_action/args"
    assert decisions_received() == []
    fixed = decide("edit", args='{"to": "bob@example.com", "subject": "Launch"}')
    result = assert_round_still_open(raw, PER_CALL, asked, fixed)
    assert "sent to bob@example.com: Launch" in result["content"][0]["text"]


def test_in_per_call_mode_an_edit_that_breaks_a_date_argument_fails_with_32602_and_no_call_of_the_round_runs(
    mcp_url, token
):
    # Pydantic writes a datetime argument as a string of format date-time and parses it when
    # LangGraph checks the decision; had the gateway let "next Tuesday" through, the round would
    # resume and the approved call's tool would run before LangGraph refused the edit.
    raw = Raw(mcp_url, token)
    tool, arguments = "review_two_bookings_per_call", {"messages": "go"}
    asked = ask(raw, tool, arguments)
    key_of = {
        ("Ada" if "'Ada'" in question["params"]["message"] else "Babbage"): key
        for key, question in asked["inputRequests"].items()
    }
    approve_ada = {key_of["Ada"]: decide("approve")}
    broken = decide("edit", args='{"room": "Babbage", "start": "next Tuesday"}')
    response = answer(raw, tool, asked, {**approve_ada, key_of["Babbage"]: broken}, arguments)
    assert_invalid(response, 'The decision does not fit the tool: "next Tuesday" is not a "date-time"')
    assert decisions_received() == []
    # The gateway is not stricter than the tool: Pydantic reads a date-time without a time zone.
    fixed = decide("edit", args='{"room": "Babbage", "start": "2026-12-01T12:00"}')
    response = answer(raw, tool, asked, {**approve_ada, key_of["Babbage"]: fixed}, arguments)
    assert response.status_code == 200, response.text
    text = response.json()["result"]["structuredContent"]["messages"][-1]["content"]
    assert text.count("booked Ada at 2026-12-01T10:00:00+00:00") == 1
    assert "booked Babbage at 2026-12-01T12:00:00" in text


def test_in_batched_mode_the_tool_itself_checks_the_edited_arguments(mcp_url, token):
    result, _ = review(
        mcp_url, token, BATCHED, elicit_result_accepting(decision="edit", args='{"to": "bob@example.com"}')
    )
    assert decisions_received() == [
        {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "bob@example.com"}}}
    ]
    text = final_text(result)
    assert "subject" in text and "Field required" in text
    assert "sent to" not in text


class _Recorder(BaseHTTPRequestHandler):
    paths: list[str] = []

    def do_GET(self):
        self.paths.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"type": "string"}')

    def log_message(self, *args):
        pass


def test_a_per_call_schema_that_refers_outside_itself_is_asked_without_the_check_and_never_fetched(mcp_url, token):
    server = HTTPServer(("127.0.0.1", SCHEMA_PORT), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        raw = Raw(mcp_url, token)
        arguments = {"messages": "go"}
        asked = ask(raw, "review_remote_ref_per_call", arguments)
        # The referenced document says a ticket is a string; unchecked, 42 goes through.
        response = answer(
            raw,
            "review_remote_ref_per_call",
            asked,
            {only_key(asked): decide("edit", args='{"ticket": 42}')},
            arguments,
        )
        assert response.status_code == 200, response.text
        assert "looked up 42" in response.json()["result"]["structuredContent"]["messages"][-1]["content"]
    finally:
        server.shutdown()
        server.server_close()
    assert _Recorder.paths == []


def test_in_per_call_mode_an_edit_that_breaks_a_pattern_python_cannot_compile_fails_with_32602_and_the_round_stays_open(
    mcp_url, token
):
    # The tool's label is `^\\p{L}+$`, which Pydantic's regex engine reads and Python's re cannot:
    # the gateway matches it as Pydantic does, before anything resumes.
    raw = Raw(mcp_url, token)
    tool, arguments = "review_letters_only_per_call", {"messages": "go"}
    asked = ask(raw, tool, arguments)
    response = answer(raw, tool, asked, {only_key(asked): decide("edit", args='{"label": "1234"}')}, arguments)
    assert_invalid(response, 'The decision does not fit the tool: "1234" does not match "^\\\\p{L}+$"')
    assert decisions_received() == []
    response = answer(raw, tool, asked, {only_key(asked): decide("edit", args='{"label": "Grace"}')}, arguments)
    assert response.status_code == 200, response.text
    assert "tagged Grace" in response.json()["result"]["structuredContent"]["messages"][-1]["content"]
