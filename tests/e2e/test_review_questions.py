"""Review tool calls, the question: each tool call HumanInTheLoopMiddleware pauses on, batched or
per call (in Python or LangChain JS), is asked as one documented form question under a stable key."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.clients import Raw, elicit_result_accepting
from tests.e2e.review import (
    BATCHED,
    BOTH_MODES,
    DOCUMENTED_QUESTION,
    EMAIL,
    KEY,
    PER_CALL,
    TWICE,
    answer,
    ask,
    decide,
    last_words,
    only_key,
    review,
)
from tests.graphs_review import JS_BATCHED_REVIEW


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
    done = response.json()["result"]["structuredContent"]
    text = last_words(done)
    assert text.count("sent to ada@example.com") == 1
    assert done["sent"] == [{"to": "ada@example.com", "subject": "Launch"}]
    assert "with reason: Once" in text


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
