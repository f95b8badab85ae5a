"""Review of tool calls over MCP (issue 4): HumanInTheLoopMiddleware's pauses, batched and per
call, asked as one form question per tool call; each answer becomes the middleware's decision.

Each test reads what the agent was resumed with from the gateway's own rounds, so the decision
the middleware received is pinned down next to what the model then said."""

from __future__ import annotations

import asyncio
import copy
import re
import threading
import uuid
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from mcp_gateway.models import Round, ToolCall
from tests.clients import CANCEL, DECLINE, Raw, by_message, elicit_result_accepting, run, sdk_client
from tests.graphs_review import JS_BATCHED_REVIEW, SCHEMA_PORT, Proposes

BATCHED, PER_CALL = "send_email", "send_email_per_call"
BOTH_MODES = pytest.mark.parametrize("tool", [BATCHED, PER_CALL])
EMAIL = {"messages": "Send the launch email"}
TWICE = {"messages": "Send the launch email twice"}
# What the scripted model proposes.
EMAIL_ARGS = {"to": "ada@example.com", "subject": "Launch"}
KEY = re.compile(r"review-[0-9a-f]{16}\.[0-9]+")

# Document, "Review tool calls": the question for send_email(to="ada@example.com", subject="Launch").
DOCUMENTED_QUESTION = {
    "method": "elicitation/create",
    "params": {
        "message": "Tool execution requires approval\n\nTool: send_email\nArgs: {'to': 'ada@example.com', 'subject': "
        "'Launch'}",
        "mode": "form",
        "requestedSchema": {
            "properties": {
                "decision": {
                    "type": "string",
                    "title": "Decision",
                    "oneOf": [
                        {"const": "approve", "title": "Approve"},
                        {"const": "edit", "title": "Edit the arguments"},
                        {"const": "reject", "title": "Reject"},
                        {"const": "respond", "title": "Answer for the tool"},
                    ],
                },
                "message": {
                    "type": "string",
                    "title": "Message",
                    "description": "Why you reject the call, or the answer to send in its place",
                },
                "args": {
                    "type": "string",
                    "title": "Arguments",
                    "description": "The arguments to run the tool with, as a JSON object",
                    "default": '{"to":"ada@example.com","subject":"Launch"}',
                },
            },
            "required": ["decision"],
            "type": "object",
        },
    },
}


def decide(decision: str, **fields: str) -> dict[str, Any]:
    return {"action": "accept", "content": {"decision": decision, **fields}}


def review(mcp_url: str, token: str, tool: str, answer: Any, arguments: dict = EMAIL, about: str = "send_email"):
    """Call `tool` through the SDK client, answering each question about `about` with `answer`."""
    callback = by_message({about: answer})

    async def go():
        async with sdk_client(mcp_url, token, callback) as client:
            return await client.call_tool(tool, arguments)

    return run(go()), callback.asked


def final_text(result) -> str:
    assert not result.is_error, result.content
    return result.structured_content["messages"][-1]["content"]


def decisions_received() -> list[Any]:
    """What the middleware was resumed with, one decision per reviewed call, from every round
    resumed in this test."""
    received = []
    for round_ in Round.objects.exclude(resume=None).order_by("created_at"):
        for value in round_.resume.values():
            received.extend(value["decisions"] if "decisions" in value else [value])
    return received


def ask(raw: Raw, tool: str, arguments: dict = EMAIL) -> dict[str, Any]:
    response = raw.call(tool, arguments)
    assert response.status_code == 200, response.text
    asked = response.json()["result"]
    assert asked["resultType"] == "input_required", asked
    return asked


def answer(raw: Raw, tool: str, asked: dict, responses: dict, arguments: dict = EMAIL):
    return raw.call(tool, arguments, inputResponses=responses, requestState=asked["requestState"])


def only_key(asked: dict) -> str:
    (key,) = asked["inputRequests"]
    return key


def assert_invalid(response, message: str) -> None:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == -32602
    assert error["message"] == message


def assert_round_still_open(raw: Raw, tool: str, asked: dict, correct: dict) -> dict[str, Any]:
    response = answer(raw, tool, asked, {only_key(asked): correct})
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result["isError"] is False, result
    return result


# --- the question ---------------------------------------------------------------------------------


@BOTH_MODES
def test_each_tool_call_is_asked_as_the_documented_form_question(mcp_url, token, tool):
    asked = ask(Raw(mcp_url, token), tool)
    ((key, question),) = asked["inputRequests"].items()
    assert KEY.fullmatch(key) and key.endswith(".1")
    assert question == DOCUMENTED_QUESTION


@BOTH_MODES
def test_the_key_stays_the_same_when_the_call_starts_over(mcp_url, token, tool):
    raw = Raw(mcp_url, token)
    assert only_key(ask(raw, tool)) == only_key(ask(raw, tool))


@pytest.mark.parametrize("arguments", [EMAIL, TWICE])
def test_both_modes_ask_the_same_call_under_the_same_key(mcp_url, token, arguments):
    raw = Raw(mcp_url, token)
    batched = ask(raw, BATCHED, arguments)["inputRequests"]
    per_call = ask(raw, PER_CALL, arguments)["inputRequests"]
    assert sorted(batched) == sorted(per_call)


def test_in_batched_mode_a_call_is_asked_under_the_same_key_whatever_else_the_turn_proposes(mcp_url, token):
    # MCPAdapter replays its stored answers by key; a rerun whose model proposes only some of the
    # earlier calls must still find each call's answer under that call's key.
    raw = Raw(mcp_url, token)
    alone = only_key(ask(raw, BATCHED))
    beside_another = ask(raw, "review_email_and_publish", {"messages": "go"})["inputRequests"]
    assert len(beside_another) == 2
    (email_key,) = [key for key, question in beside_another.items() if question == DOCUMENTED_QUESTION]
    assert email_key == alone
    # Only the suffix separates identical calls.
    assert sorted(ask(raw, BATCHED, TWICE)["inputRequests"]) == [alone, alone.removesuffix(".1") + ".2"]


@pytest.mark.parametrize("tool", ["review_approve_only", "review_approve_only_per_call"])
def test_a_call_without_a_description_is_asked_as_run_tool_with_only_the_fields_its_decisions_need(
    mcp_url, token, tool
):
    (question,) = ask(Raw(mcp_url, token), tool, {"messages": "go"})["inputRequests"].values()
    assert question["params"]["message"] == "Run publish?"
    schema = question["params"]["requestedSchema"]
    assert list(schema["properties"]) == ["decision"]
    assert schema["properties"]["decision"]["oneOf"] == [{"const": "approve", "title": "Approve"}]


@pytest.mark.parametrize("tool", ["review_approve_or_respond", "review_approve_or_respond_per_call"])
def test_a_call_that_allows_respond_but_not_reject_is_asked_with_the_message_field(mcp_url, token, tool):
    (question,) = ask(Raw(mcp_url, token), tool, {"messages": "go"})["inputRequests"].values()
    schema = question["params"]["requestedSchema"]
    assert list(schema["properties"]) == ["decision", "message"]
    assert schema["properties"]["message"] == DOCUMENTED_QUESTION["params"]["requestedSchema"]["properties"]["message"]
    assert schema["properties"]["decision"]["oneOf"] == [
        {"const": "approve", "title": "Approve"},
        {"const": "respond", "title": "Answer for the tool"},
    ]


@pytest.mark.parametrize("tool", ["review_big_args", "review_big_args_per_call"])
def test_arguments_too_large_to_prefill_are_asked_without_the_edit_choice(mcp_url, token, tool):
    (question,) = ask(Raw(mcp_url, token), tool, {"messages": "go"})["inputRequests"].values()
    schema = question["params"]["requestedSchema"]
    assert [c["const"] for c in schema["properties"]["decision"]["oneOf"]] == ["approve", "reject", "respond"]
    assert "args" not in schema["properties"]


@pytest.mark.parametrize("tool", ["review_big_args_edit_only", "review_big_args_edit_only_per_call"])
def test_a_call_that_allows_only_an_edit_of_arguments_too_large_to_prefill_cannot_be_asked(mcp_url, token, tool):
    result = Raw(mcp_url, token).call(tool, {"messages": "go"}).json()["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("This tool needs input that can't be asked over MCP")
    assert "too large to prefill" in result["content"][0]["text"]


@BOTH_MODES
def test_two_identical_calls_are_asked_as_two_questions_in_one_round(mcp_url, token, tool):
    raw = Raw(mcp_url, token)
    asked = ask(raw, tool, TWICE)
    keys = sorted(asked["inputRequests"])
    assert len(keys) == 2 and all(KEY.fullmatch(k) for k in keys)
    first, second = asked["inputRequests"].values()
    assert first == second
    response = answer(raw, tool, asked, {keys[0]: decide("approve"), keys[1]: decide("reject", message="Once")}, TWICE)
    text = response.json()["result"]["structuredContent"]["messages"][-1]["content"]
    assert text.count("sent to ada@example.com") == 1
    assert "with reason: Once" in text


# --- answers to decisions -------------------------------------------------------------------------


@BOTH_MODES
def test_an_approval_runs_the_tool(mcp_url, token, tool):
    result, asked = review(mcp_url, token, tool, elicit_result_accepting(decision="approve"))
    assert len(asked) == 1
    assert decisions_received() == [{"type": "approve"}]
    assert final_text(result) == "Done: sent to ada@example.com: Launch"


@BOTH_MODES
def test_an_edit_runs_the_tool_with_the_edited_arguments(mcp_url, token, tool):
    edited = '{"to": "bob@example.com", "subject": "Launch, take two"}'
    result, _ = review(mcp_url, token, tool, elicit_result_accepting(decision="edit", args=edited))
    assert decisions_received() == [
        {
            "type": "edit",
            "edited_action": {"name": "send_email", "args": {"to": "bob@example.com", "subject": "Launch, take two"}},
        }
    ]
    text = final_text(result)
    assert "sent to bob@example.com: Launch, take two" in text
    assert "sent to ada@example.com" not in text


@BOTH_MODES
def test_an_edit_that_leaves_the_prefilled_arguments_out_runs_the_model_arguments(mcp_url, token, tool):
    result, _ = review(mcp_url, token, tool, elicit_result_accepting(decision="edit"))
    assert decisions_received() == [{"type": "edit", "edited_action": {"name": "send_email", "args": EMAIL_ARGS}}]
    assert "sent to ada@example.com: Launch" in final_text(result)


@BOTH_MODES
def test_a_rejection_gives_the_model_the_reason_and_the_tool_does_not_run(mcp_url, token, tool):
    result, _ = review(mcp_url, token, tool, elicit_result_accepting(decision="reject", message="Not before Monday"))
    assert decisions_received() == [{"type": "reject", "message": "Not before Monday"}]
    text = final_text(result)
    assert text == "Done: User rejected the tool call for `send_email` with reason: Not before Monday"


@BOTH_MODES
def test_a_rejection_with_a_blank_message_leaves_the_message_out(mcp_url, token, tool):
    result, _ = review(mcp_url, token, tool, elicit_result_accepting(decision="reject", message="   "))
    assert decisions_received() == [{"type": "reject"}]
    text = final_text(result)
    assert "The tool was not executed" in text
    assert "sent to" not in text


@BOTH_MODES
def test_a_response_is_given_to_the_model_in_place_of_the_tool(mcp_url, token, tool):
    result, _ = review(
        mcp_url, token, tool, elicit_result_accepting(decision="respond", message="Ada is on holiday; not sent.")
    )
    assert decisions_received() == [{"type": "respond", "message": "Ada is on holiday; not sent."}]
    assert final_text(result) == "Done: Ada is on holiday; not sent."


@BOTH_MODES
def test_a_decline_is_a_rejection_when_the_call_allows_reject(mcp_url, token, tool):
    result, _ = review(mcp_url, token, tool, DECLINE)
    assert decisions_received() == [{"type": "reject"}]
    text = final_text(result)
    assert "User rejected the tool call for `send_email`" in text
    assert "sent to" not in text


@pytest.mark.parametrize("tool", ["review_approve_only", "review_approve_only_per_call"])
def test_a_decline_ends_the_call_with_an_error_result_when_the_call_does_not_allow_reject(mcp_url, token, tool):
    result, _ = review(mcp_url, token, tool, DECLINE, {"messages": "go"}, about="publish")
    assert result.is_error
    assert result.content[0].text == "The request for input was declined."
    assert decisions_received() == []


@BOTH_MODES
def test_a_cancel_ends_the_call_with_an_error_result(mcp_url, token, tool):
    result, _ = review(mcp_url, token, tool, CANCEL)
    assert result.is_error
    assert result.content[0].text == "The request for input was cancelled."
    assert decisions_received() == []


@BOTH_MODES
def test_in_batched_and_per_call_mode_an_edit_keeps_the_reviewed_tool(mcp_url, token, tool):
    # The form has no field for the tool: whatever else the answer carries, the edit names it.
    raw = Raw(mcp_url, token)
    asked = ask(raw, tool)
    edit = {
        "action": "accept",
        "content": {"decision": "edit", "args": '{"to": "bob@example.com", "subject": "Hi"}', "name": "another_tool"},
    }
    response = answer(raw, tool, asked, {only_key(asked): edit})
    assert response.status_code == 200
    assert decisions_received()[0]["edited_action"]["name"] == "send_email"


# --- answers that fail with -32602, the round left open ------------------------------------------


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
    assert result["structuredContent"]["messages"][-1]["content"] == "Done: Not needed"


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


# --- LangChain JS's middleware: the same questions, its own spelling ------------------------------

JS_BATCHED = "review_js_batched"


def resumed_in_js(mcp_url: str, token: str, answer: Any) -> Any:
    """What the JavaScript middleware is resumed with when its one call is answered with `answer`."""
    result, asked = review(mcp_url, token, JS_BATCHED, answer, {})
    assert len(asked) == 1
    assert not result.is_error, result.content
    return result.structured_content["resumed_with"]


def test_a_javascript_batched_review_is_asked_as_the_documented_question_with_its_own_description(mcp_url, token):
    ((key, question),) = ask(Raw(mcp_url, token), JS_BATCHED, {})["inputRequests"].items()
    assert KEY.fullmatch(key)
    (action,) = JS_BATCHED_REVIEW["actionRequests"]
    assert question["params"]["message"] == action["description"]
    # The JavaScript middleware has no respond decision, so the form offers the other three.
    schema = copy.deepcopy(DOCUMENTED_QUESTION["params"]["requestedSchema"])
    schema["properties"]["decision"]["oneOf"] = [
        choice for choice in schema["properties"]["decision"]["oneOf"] if choice["const"] != "respond"
    ]
    assert question["params"]["requestedSchema"] == schema


def test_in_batched_mode_the_javascript_middleware_receives_an_approval(mcp_url, token):
    assert resumed_in_js(mcp_url, token, elicit_result_accepting(decision="approve")) == {
        "decisions": [{"type": "approve"}]
    }


def test_in_batched_mode_the_javascript_middleware_receives_edited_action_with_the_reviewed_tool(mcp_url, token):
    edited = '{"to": "bob@example.com", "subject": "Launch, take two"}'
    assert resumed_in_js(mcp_url, token, elicit_result_accepting(decision="edit", args=edited)) == {
        "decisions": [
            {
                "type": "edit",
                "editedAction": {
                    "name": "send_email",
                    "args": {"to": "bob@example.com", "subject": "Launch, take two"},
                },
            }
        ]
    }


def test_in_batched_mode_the_javascript_middleware_receives_a_rejection_with_its_message(mcp_url, token):
    resumed = resumed_in_js(mcp_url, token, elicit_result_accepting(decision="reject", message="Not before Monday"))
    assert resumed == {"decisions": [{"type": "reject", "message": "Not before Monday"}]}


# --- an agent answering through langchain's MCPAdapter ---------------------------------------------


def test_an_agent_using_mcp_adapter_answers_the_review_by_key_and_the_replayed_call_finishes(mcp_url, token):
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport
    from langchain.agents import create_agent
    from langchain.mcp import MCPAdapter
    from langchain_core.messages import ToolMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    async def go():
        transport = StreamableHttpTransport(mcp_url, headers={"Authorization": f"Bearer {token}"})
        tools = await MCPAdapter(Client(transport, timeout=120)).list_tools()
        agent = create_agent(Proposes(tool_name="send_email", args=EMAIL), tools, checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        out = await agent.ainvoke({"messages": [{"role": "user", "content": "email Ada"}]}, config, version="v2")
        (paused,) = out.interrupts
        (question,) = paused.value["requests"]
        answers = {question["key"]: {"action": "accept", "content": {"decision": "approve"}}}
        # The adapter calls the tool again from the start and replays the stored answer by key.
        out = await agent.ainvoke(Command(resume={paused.id: {"responses": answers}}), config, version="v2")
        return paused.value, out

    relayed, out = asyncio.run(go())
    assert relayed["type"] == "mcp_elicitation" and relayed["tool_name"] == "send_email"
    (question,) = relayed["requests"]
    assert KEY.fullmatch(question["key"])
    assert question["message"] == DOCUMENTED_QUESTION["params"]["message"]
    assert question["requested_schema"] == DOCUMENTED_QUESTION["params"]["requestedSchema"]
    assert not out.interrupts
    (tool_message,) = [m for m in out.value["messages"] if isinstance(m, ToolMessage)]
    assert tool_message.status == "success"
    assert "Done: sent to ada@example.com: Launch" in tool_message.text
    assert "Done: sent to ada@example.com: Launch" in out.value["messages"][-1].text
    assert decisions_received() == [{"type": "approve"}]
    # The first attempt stays paused until it expires; the rerun that got the answer finished.
    assert sorted(ToolCall.objects.values_list("status", flat=True)) == [
        ToolCall.Status.FINISHED,
        ToolCall.Status.PAUSED,
    ]
