"""Paused calls: the product document's sections "Pause and resume a tool call", "Support clients
without elicitation", "Answer from a LangChain agent" and "Secure paused calls", one test per rule,
through the HTTP endpoint against the real database, Redis and Celery worker. Questions themselves
(text, typed, relayed, URL) are in test_questions.py."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import httpx
import pytest
import time_machine
from django.utils import timezone

from mcp_gateway.models import MCPToken, Round, ToolCall
from tests.clients import ACCEPT, Raw, by_message, elicit_result_accepting, meta, run, sdk_client
from tests.processes import ROOT
from tests.rounds import (
    INVALID_STATE,
    agent_answering,
    answer,
    asked,
    call_of,
    checkpoint_rows,
    checkpoint_threads,
    error_of,
    eventually,
    input_response_accepting,
    only_key,
    result_of,
    text_of,
    until_run_ends,
)

NAME = {"user_name": input_response_accepting(name="Ada")}
TOKEN_SHAPE = re.compile(r"[0-9a-f-]{36}\.[A-Za-z0-9_-]{43}")
CANT_ANSWER = "This tool paused to ask for human input, and this client can't answer it."
CANT_RESUME = "This tool paused to ask for human input, and this call can't be resumed."
SERVER_INFO = "io.modelcontextprotocol/serverInfo"


def near(moment, expected, slack: float = 5.0) -> bool:
    return abs((moment - expected).total_seconds()) <= slack


def rounds_of(request_state: str) -> int:
    return Round.objects.filter(call=call_of(request_state)).count()


# --- Pause and resume a tool call -----------------------------------------------------------------


def test_a_pause_returns_input_required_with_one_elicitation_request_per_question_and_an_opaque_request_state(
    mcp_url, token
):
    result = asked(Raw(mcp_url, token), "greeter")

    assert set(result) == {"inputRequests", "requestState", "resultType", "_meta"}
    assert result["inputRequests"] == {
        "user_name": {
            "method": "elicitation/create",
            "params": {
                "message": "What is your name?",
                "mode": "form",
                "requestedSchema": {
                    "properties": {"name": {"type": "string"}},
                    "required": ["name"],
                    "type": "object",
                },
            },
        }
    }
    assert TOKEN_SHAPE.fullmatch(result["requestState"])
    assert result["_meta"][SERVER_INFO]["name"]


def test_calling_again_with_the_answers_and_the_request_state_resumes_the_agent_and_returns_its_output(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = asked(raw, "greeter")

    result = result_of(answer(raw, "greeter", {}, first, NAME))

    assert result["resultType"] == "complete"
    assert result["isError"] is False
    assert text_of(result) == '{"greeting":"Hello, Ada!"}'
    assert result["structuredContent"] == {"greeting": "Hello, Ada!"}


def test_a_resumed_run_that_asks_again_returns_a_new_round_with_a_new_request_state(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = asked(raw, "form_then_url")

    second = result_of(
        answer(raw, "form_then_url", {}, first, {only_key(first): input_response_accepting(response="Ada")})
    )

    assert second["resultType"] == "input_required"
    assert list(second["inputRequests"]) == ["login"]
    assert second["requestState"] != first["requestState"]
    done = result_of(answer(raw, "form_then_url", {}, second, {"login": {"action": "accept"}}))
    assert done["structuredContent"] == {"first": "Ada", "answers": [{"login": {"action": "accept"}}]}


def test_a_later_round_that_asks_the_same_question_again_is_asked_not_answered_with_the_earlier_answer(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = asked(raw, "same_text_in_sequence")
    key = only_key(first)

    second = result_of(
        answer(raw, "same_text_in_sequence", {}, first, {key: input_response_accepting(response="once")})
    )

    assert second["resultType"] == "input_required"
    assert list(second["inputRequests"]) == [key]
    done = result_of(
        answer(raw, "same_text_in_sequence", {}, second, {key: input_response_accepting(response="twice")})
    )
    assert done["structuredContent"] == {"answers": ["once", "twice"]}


def test_the_sdk_client_drives_a_multi_round_call_on_its_own(mcp_url, token):
    callback = by_message({"name": elicit_result_accepting(response="Ada"), "page": ACCEPT})

    async def go():
        async with sdk_client(mcp_url, token, callback) as client:
            return await client.call_tool("form_then_url", {})

    result = run(go())

    assert not result.is_error
    assert result.structured_content == {"first": "Ada", "answers": [{"login": {"action": "accept"}}]}
    assert [params.mode for _, params in callback.asked] == ["form", "url"]


def test_without_the_version_header_a_pause_returns_the_error_result_for_older_clients(mcp_url, token):
    raw = Raw(mcp_url, token)
    headers = raw.headers("tools/call", "greeter")
    del headers["MCP-Protocol-Version"]
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "greeter", "arguments": {}}}

    result = result_of(raw.post(body, headers))

    assert result["isError"] is True
    assert text_of(result) == CANT_ANSWER
    (pending,) = json.loads(result["content"][1]["text"])  # the second block: the pending interrupts
    assert set(pending) >= {"id", "value"}


# Several questions


def test_several_pending_interrupts_are_asked_in_one_round(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = asked(raw, "survey")

    messages = {key: request["params"]["message"] for key, request in first["inputRequests"].items()}
    assert sorted(messages.values()) == ["What is your favourite colour?", "What is your name?"]
    by_text = {text: key for key, text in messages.items()}
    result = result_of(
        answer(
            raw,
            "survey",
            {},
            first,
            {
                by_text["What is your name?"]: input_response_accepting(response="Ada"),
                by_text["What is your favourite colour?"]: input_response_accepting(response="green"),
            },
        )
    )
    assert result["structuredContent"] == {"name": "Ada", "colour": "green"}


def test_several_questions_are_listed_in_the_order_the_graph_asks_them(mcp_url, token):
    # survey's nodes ask the name, then the colour: LangGraph lists its interrupts so, and a client
    # shows the questions in the order it gets them, however their keys are numbered. Asked again
    # (no answers), the round keeps that order.
    raw = Raw(mcp_url, token)
    first = asked(raw, "survey")
    again = result_of(answer(raw, "survey", {}, first, {}))

    for round_ in (first, again):
        messages = [request["params"]["message"] for request in round_["inputRequests"].values()]
        assert messages == ["What is your name?", "What is your favourite colour?"]


def test_the_survey_agent_asks_both_questions_in_one_round_through_the_sdk_client(mcp_url, token):
    callback = by_message(
        {"name": elicit_result_accepting(response="Ada"), "colour": elicit_result_accepting(response="green")}
    )

    async def go():
        async with sdk_client(mcp_url, token, callback) as client:
            return await client.call_tool("survey", {})

    result = run(go())

    assert result.structured_content == {"name": "Ada", "colour": "green"}
    assert len(callback.asked) == 2
    call = ToolCall.objects.get(tool_name="survey")
    assert list(call.rounds.values_list("state", flat=True)) == [Round.State.ANSWERED, Round.State.DONE]


# Missing answers


def test_missing_answers_ask_the_same_questions_again_with_the_same_request_state(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = asked(raw, "survey")
    name_key, colour_key = sorted(first["inputRequests"], key=lambda k: first["inputRequests"][k]["params"]["message"])

    for partial in (
        {},
        {colour_key: input_response_accepting(response="Ada")},
        {name_key: input_response_accepting(response="green")},
    ):
        again = result_of(answer(raw, "survey", {}, first, partial))
        assert again == first
    assert rounds_of(first["requestState"]) == 1  # nothing was resumed


def test_answers_to_questions_that_were_not_asked_are_ignored(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = asked(raw, "greeter")

    responses = {**NAME, "not_asked": {"action": "decline"}, "user_name_2": input_response_accepting(name=5)}
    result = result_of(answer(raw, "greeter", {}, first, responses))

    assert result["structuredContent"] == {"greeting": "Hello, Ada!"}


def test_form_fields_that_were_not_asked_do_not_reach_the_agent(mcp_url, token):
    # A form cannot carry the agent's additionalProperties: false; the agent gets the asked fields only.
    raw = Raw(mcp_url, token)
    schema = {"type": "object", "properties": {"colour": {"type": "string"}}, "additionalProperties": False}
    first = asked(raw, "typed_from_input", {"value": schema})

    content = {"colour": "red", "admin": True, "colour_2": "blue"}
    done = result_of(
        answer(
            raw, "typed_from_input", {"value": schema}, first, {only_key(first): input_response_accepting(**content)}
        )
    )

    assert done["structuredContent"]["answer"] == {"colour": "red"}


# Answers in the first call


def test_answers_sent_in_the_first_call_answer_the_first_round(mcp_url, token):
    result = result_of(Raw(mcp_url, token).call("greeter", {}, inputResponses=NAME))

    assert result["structuredContent"] == {"greeting": "Hello, Ada!"}


def test_a_first_call_that_answers_no_question_of_the_first_round_gets_that_round_asked(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = asked(raw, "survey", inputResponses={"unrelated": input_response_accepting(response="x")})

    assert len(first["inputRequests"]) == 2
    result_of(
        answer(raw, "survey", {}, first, {k: input_response_accepting(response="x") for k in first["inputRequests"]})
    )


def test_a_first_call_that_answers_some_of_the_first_rounds_questions_gets_that_round_asked(mcp_url, token):
    raw = Raw(mcp_url, token)
    # The keys are derived from the questions, so an earlier call tells the client what they are.
    keys = asked(raw, "survey")["inputRequests"]
    name_key = next(k for k, request in keys.items() if request["params"]["message"] == "What is your name?")

    first = asked(raw, "survey", inputResponses={name_key: input_response_accepting(response="Ada")})

    assert first["inputRequests"] == keys
    assert rounds_of(first["requestState"]) == 1  # nothing was resumed
    answers = {k: input_response_accepting(response="Grace" if k == name_key else "green") for k in keys}
    result = result_of(answer(raw, "survey", {}, first, answers))
    assert result["structuredContent"] == {"name": "Grace", "colour": "green"}


def _key_of_the_held_question(raw: Raw, graph: str, tmp_path) -> str:
    """The key of a graphs_durability graph's question, from a run released at once (keys are derived
    from the question, so an earlier call tells the client what it is)."""
    released = tmp_path / "released"
    released.mkdir()
    (released / "release").touch()
    return only_key(asked(raw, graph, {"signal_dir": str(released)}))


def test_answers_sent_in_a_first_call_whose_run_outlasts_the_wait_answer_the_first_round(
    mcp_url, token, settings, tmp_path
):
    raw = Raw(mcp_url, token)
    key = _key_of_the_held_question(raw, "effect_then_ask", tmp_path)
    settings.MCP_RUN_WAIT_SECONDS = 0.5
    arguments = {"signal_dir": str(tmp_path)}

    still_running = result_of(
        raw.call("effect_then_ask", arguments, inputResponses={key: input_response_accepting(response="yes")})
    )
    assert set(still_running) - {"_meta"} == {"resultType", "requestState"}
    (tmp_path / "release").touch()  # the run goes on to its question
    # The client comes back as the SDK does after a result without questions: requestState only.
    result = still_running
    while result.get("resultType") == "input_required" and "inputRequests" not in result:
        result = result_of(raw.call("effect_then_ask", arguments, requestState=result["requestState"]))

    assert result.get("inputRequests") is None, result  # not asked again
    assert result["structuredContent"] == {"signal_dir": str(tmp_path), "done": True, "go": "yes"}
    assert rounds_of(still_running["requestState"]) == 2  # resumed once


def test_answers_sent_in_a_first_call_whose_run_outlasts_the_wait_resume_with_that_calls_context(
    mcp_url, token, settings, tmp_path
):
    raw = Raw(mcp_url, token)
    key = _key_of_the_held_question(raw, "effect_then_ask_context", tmp_path)
    settings.MCP_RUN_WAIT_SECONDS = 0.5
    arguments = {"signal_dir": str(tmp_path)}

    still_running = result_of(
        raw.call(
            "effect_then_ask_context",
            arguments,
            context={"tag": "first call"},
            inputResponses={key: input_response_accepting(response="yes")},
        )
    )
    (tmp_path / "release").touch()
    result = until_run_ends(raw, "effect_then_ask_context", arguments, still_running)

    assert result["structuredContent"]["after"] == "first call"


def test_invalid_answers_sent_in_a_first_call_whose_run_outlasts_the_wait_delete_its_thread(
    mcp_url, token, settings, tmp_path
):
    raw = Raw(mcp_url, token)
    key = _key_of_the_held_question(raw, "effect_then_ask", tmp_path)
    settings.MCP_RUN_WAIT_SECONDS = 0.5
    arguments = {"signal_dir": str(tmp_path)}

    still_running = result_of(
        raw.call("effect_then_ask", arguments, inputResponses={key: input_response_accepting(response=5)})
    )
    call = call_of(still_running["requestState"])
    (tmp_path / "release").touch()
    assert eventually(lambda: Round.objects.filter(call=call, state=Round.State.ASKING).exists())

    # The request that brings them back to the round learns they do not fit: -32602, as the
    # first call would have, and the thread is deleted as that call's would have been.
    retry = raw.call("effect_then_ask", arguments, requestState=still_running["requestState"])
    assert error_of(retry)["code"] == -32602 and error_of(retry)["data"]["key"] == key
    assert not ToolCall.objects.filter(pk=call.pk).exists()
    assert checkpoint_rows(call.thread_id) == 0
    again = raw.call("effect_then_ask", arguments, requestState=still_running["requestState"])
    assert error_of(again) == INVALID_STATE


# Repeated answers


def test_repeated_answers_resume_the_agent_once(mcp_url, token):
    import redis
    from django.conf import settings

    tag = uuid.uuid4().hex
    raw = Raw(mcp_url, token)
    first = asked(raw, "count_resumes", {"value": tag})
    responses = {only_key(first): input_response_accepting(response="yes")}

    results = [result_of(answer(raw, "count_resumes", {"value": tag}, first, responses)) for _ in range(3)]

    assert results[0]["structuredContent"] == {"value": tag, "answer": "yes"}
    assert results[1] == results[0] and results[2] == results[0]
    assert int(redis.Redis.from_url(settings.REDIS_URL).get(f"hitl-test:resumes:{tag}")) == 1
    assert rounds_of(first["requestState"]) == 2


def test_concurrent_identical_answers_resume_the_agent_once_and_all_get_the_same_result(mcp_url, token):
    import redis
    from django.conf import settings

    tag = uuid.uuid4().hex
    raw = Raw(mcp_url, token)
    first = asked(raw, "count_resumes", {"value": tag})
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {
            "name": "count_resumes",
            "arguments": {"value": tag},
            "_meta": meta(),
            "inputResponses": {only_key(first): input_response_accepting(response="yes")},
            "requestState": first["requestState"],
        },
    }
    headers = raw.headers("tools/call", "count_resumes")
    parallel = 20
    start = threading.Barrier(parallel)

    def send(_):
        with httpx.Client(timeout=120) as http:
            start.wait()
            return http.post(mcp_url, json=body, headers=headers)

    with ThreadPoolExecutor(parallel) as pool:
        responses = list(pool.map(send, range(parallel)))

    assert {r.status_code for r in responses} == {200}
    assert all(r.json() == responses[0].json() for r in responses)
    assert responses[0].json()["result"]["structuredContent"] == {"value": tag, "answer": "yes"}
    assert int(redis.Redis.from_url(settings.REDIS_URL).get(f"hitl-test:resumes:{tag}")) == 1
    assert rounds_of(first["requestState"]) == 2


# Invalid answers


@pytest.mark.parametrize(
    "bad",
    [
        input_response_accepting(name=5),
        input_response_accepting(),
        {"action": "accept"},
        {"action": "yes", "content": {"name": "Ada"}},
        "accept",
    ],
    ids=["wrong type", "required field missing", "no content", "unknown action", "not an object"],
)
def test_an_answer_that_does_not_fit_its_question_fails_with_32602_and_400_and_the_round_stays_open(
    mcp_url, token, bad
):
    raw = Raw(mcp_url, token)
    first = asked(raw, "greeter")

    error = error_of(answer(raw, "greeter", {}, first, {"user_name": bad}))

    assert error["code"] == -32602
    assert rounds_of(first["requestState"]) == 1
    assert result_of(answer(raw, "greeter", {}, first, NAME))["structuredContent"] == {"greeting": "Hello, Ada!"}


def test_an_invalid_answer_fails_with_32602_even_when_another_answer_is_missing(mcp_url, token):
    # Asking again would drop the invalid answer without a word; the round stays open all the same.
    raw = Raw(mcp_url, token)
    first = asked(raw, "survey")
    keys = sorted(first["inputRequests"])

    error = error_of(answer(raw, "survey", {}, first, {keys[0]: input_response_accepting(response=5)}))

    assert error["code"] == -32602
    assert error["data"]["key"] == keys[0]
    assert rounds_of(first["requestState"]) == 1
    result_of(answer(raw, "survey", {}, first, {k: input_response_accepting(response="x") for k in keys}))


def test_an_invalid_answer_in_a_first_call_deletes_that_calls_thread(mcp_url, token):
    raw = Raw(mcp_url, token)
    key = only_key(asked(raw, "plan_deployment"))  # the key is derived from the question
    calls_before, threads_before = set(ToolCall.objects.values_list("pk", flat=True)), checkpoint_threads()
    bad = {key: input_response_accepting(region="eu-west-1", replicas=20)}

    error = error_of(raw.call("plan_deployment", {}, inputResponses=bad))

    assert error["code"] == -32602
    assert error["message"] == "Form content does not match requestedSchema"
    assert set(ToolCall.objects.values_list("pk", flat=True)) == calls_before
    assert checkpoint_threads() == threads_before  # the attempt's thread is gone with it
    # Calling again from the start works.
    result = result_of(
        raw.call("plan_deployment", {}, inputResponses={key: input_response_accepting(region="eu-west-1", replicas=3)})
    )
    assert result["structuredContent"] == {"region": "eu-west-1", "replicas": 3}


# Invalid state


def _mutations(state: str) -> list[str]:
    round_id, _, mac = state.partition(".")
    flips = []
    for i, char in enumerate(state):
        flipped = chr(ord(char) ^ (1 << (i % 7)))
        flips.append(state[:i] + flipped + state[i + 1 :])
    return flips + [
        state[:-1],
        state[:-10],
        state[:36],
        state[:37],
        round_id,
        mac,
        "",
        ".",
        state + "A",
        state + "=",
        state + "." + mac,
        round_id.upper() + "." + mac,
        round_id.replace("-", "") + "." + mac,
        f"{uuid.uuid4()}.{mac}",
        state[::-1],
        state.replace(".", ":"),
        " " + state,
        state + "\n",
    ]


def test_a_modified_request_state_fails_with_32602_invalid_or_expired_request_state_and_400(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = asked(raw, "greeter")
    mutations = _mutations(first["requestState"])
    assert len(mutations) > 90 and first["requestState"] not in mutations

    bodies = []
    for state in mutations:
        response = raw.call("greeter", {}, inputResponses=NAME, requestState=state)
        assert response.status_code == 400, (state, response.text)
        body = response.json()
        assert body["id"] == raw._id
        bodies.append({k: v for k, v in body.items() if k != "id"})

    assert all(b == {"jsonrpc": "2.0", "error": INVALID_STATE} for b in bodies)
    # The real token still answers the round: nothing above touched it.
    assert result_of(answer(raw, "greeter", {}, first, NAME))["structuredContent"] == {"greeting": "Hello, Ada!"}


def test_a_request_state_with_the_round_id_of_another_round_fails_the_same_way(mcp_url, token):
    raw = Raw(mcp_url, token)
    mine, other = asked(raw, "greeter"), asked(raw, "greeter")
    spliced = other["requestState"].partition(".")[0] + "." + mine["requestState"].partition(".")[2]

    assert error_of(raw.call("greeter", {}, inputResponses=NAME, requestState=spliced)) == INVALID_STATE


def test_a_request_state_sent_with_another_tool_name_or_other_arguments_fails_the_same_way(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = asked(raw, "greeter")
    state = first["requestState"]

    # Arguments that the tool's input schema refuses, or another tool's required arguments missing,
    # fail as an invalid requestState too, not as the tool's "Invalid arguments" result.
    others = [("survey", {}), ("connect_calendar", {}), ("greeter", {"greeting": "hi"})]
    others += [("greeter", {"greeting": 5}), ("digital_twin", {})]
    # A name no tool has is another tool name too: the requestState is what fails, not the name.
    others += [("no_such_tool", {})]
    for name, arguments in others:
        response = raw.call(name, arguments, inputResponses=NAME, requestState=state)
        assert error_of(response) == INVALID_STATE, (name, arguments)
    assert result_of(answer(raw, "greeter", {}, first, NAME))["structuredContent"] == {"greeting": "Hello, Ada!"}


def test_a_request_state_of_an_expired_call_fails_the_same_way(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = asked(raw, "greeter")
    expires_at = call_of(first["requestState"]).expires_at

    with time_machine.travel(expires_at + timedelta(seconds=1)):
        response = answer(raw, "greeter", {}, first, NAME)

    assert error_of(response) == INVALID_STATE


def test_an_answered_call_does_not_expire_while_its_resumed_run_goes_on(mcp_url, token, settings, tmp_path):
    """Only a call that stays paused expires 24 hours after its latest round of questions."""
    raw = Raw(mcp_url, token)
    arguments = {"signal_dir": str(tmp_path)}
    first = asked(raw, "held_effect", arguments)
    paused_until = call_of(first["requestState"]).expires_at
    settings.MCP_RUN_WAIT_SECONDS = 0.5

    with time_machine.travel(paused_until - timedelta(seconds=1)):
        still_running = result_of(
            answer(raw, "held_effect", arguments, first, {only_key(first): input_response_accepting(response="y")})
        )
    assert set(still_running) - {"_meta"} == {"resultType", "requestState"}
    with time_machine.travel(paused_until + timedelta(minutes=1)):
        retry = result_of(raw.call("held_effect", arguments, requestState=still_running["requestState"]))
    assert set(retry) - {"_meta"} == {"resultType", "requestState"}  # still running, not expired

    (tmp_path / "release").touch()
    with time_machine.travel(paused_until + timedelta(minutes=2)):
        done = until_run_ends(raw, "held_effect", arguments, retry)
    assert done["structuredContent"]["done"] is True


# Runtime context


def test_a_context_next_to_the_arguments_becomes_the_agents_runtime_context(mcp_url, token):
    raw = Raw(mcp_url, token)

    first = asked(raw, "context_before_question", context={"tag": "first call"})
    responses = {only_key(first): input_response_accepting(response="yes")}
    result = result_of(answer(raw, "context_before_question", {}, first, responses, context={"tag": "answering call"}))

    # The first run saw the first call's context; the resumed run, the answering call's.
    assert result["structuredContent"] == {"first": "first call", "after": "answering call"}


def test_the_resumed_run_gets_the_context_of_the_request_that_answers_the_round(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = asked(raw, "context_echo", context={"tag": "first call"})
    responses = {only_key(first): input_response_accepting(response="yes")}

    result = result_of(answer(raw, "context_echo", {}, first, responses, context={"tag": "answering call"}))

    # The node runs again from its start when resumed, so both reads see the resumed run's context.
    assert result["structuredContent"] == {"first": "answering call", "after": "answering call"}


def test_answers_in_the_first_call_resume_with_that_calls_context(mcp_url, token):
    raw = Raw(mcp_url, token)
    key = only_key(asked(raw, "context_echo"))

    responses = {key: input_response_accepting(response="y")}
    result = result_of(raw.call("context_echo", {}, context={"tag": "only"}, inputResponses=responses))

    assert result["structuredContent"] == {"first": "only", "after": "only"}


# Lifetime


def test_a_call_finished_by_a_request_with_a_request_state_is_kept_ten_minutes_and_resending_gets_the_same_result(
    mcp_url, token
):
    raw = Raw(mcp_url, token)
    first = asked(raw, "greeter")
    done = result_of(answer(raw, "greeter", {}, first, NAME))
    call = call_of(first["requestState"])

    assert call.status == ToolCall.Status.FINISHED
    assert near(call.expires_at, timezone.now() + timedelta(minutes=10))
    assert checkpoint_rows(call.thread_id) > 0
    with time_machine.travel(call.expires_at - timedelta(seconds=30)):
        assert result_of(answer(raw, "greeter", {}, first, NAME)) == done
    with time_machine.travel(call.expires_at + timedelta(seconds=1)):
        assert error_of(answer(raw, "greeter", {}, first, NAME)) == INVALID_STATE


@pytest.mark.parametrize("graph", ["text_then_unaskable", "text_then_breakpoint"])
def test_a_call_that_ends_without_a_result_after_a_request_state_is_kept_ten_minutes_too(mcp_url, token, graph):
    raw = Raw(mcp_url, token)
    first = asked(raw, graph)
    responses = {only_key(first): input_response_accepting(response="yes")}
    done = result_of(answer(raw, graph, {}, first, responses))
    call = call_of(first["requestState"])

    assert done["isError"] is True
    assert near(call.expires_at, timezone.now() + timedelta(minutes=10))
    assert result_of(answer(raw, graph, {}, first, responses)) == done


def test_a_call_finished_by_a_request_without_a_request_state_deletes_its_thread(mcp_url, token):
    raw = Raw(mcp_url, token)
    region_key = only_key(asked(raw, "choose_region"))
    first_calls = [
        ("greeter", {}, {"inputResponses": NAME}),  # answered in the first call
        ("choose_region", {}, {"inputResponses": {region_key: {"action": "decline"}}}),  # ended by a decline
        ("digital_twin", {"message": "hello"}, {}),  # never paused
    ]
    for name, arguments, params in first_calls:
        result_of(raw.call(name, arguments, **params))
        call = ToolCall.objects.latest("created_at")
        assert call.tool_name == name
        assert call.status == ToolCall.Status.FINISHED and call.expires_at <= timezone.now()
        assert eventually(lambda thread=call.thread_id: checkpoint_rows(thread) == 0), name


def test_a_paused_call_expires_24_hours_after_its_latest_round_of_questions(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = asked(raw, "form_then_url")
    call = call_of(first["requestState"])
    round0 = Round.objects.get(call=call, number=0)
    assert near(call.expires_at, round0.finished_at + timedelta(hours=24), slack=1)

    time.sleep(1.5)  # so the two rounds' expiries are told apart
    second = result_of(
        answer(raw, "form_then_url", {}, first, {only_key(first): input_response_accepting(response="Ada")})
    )
    call.refresh_from_db()
    round1 = Round.objects.get(call=call, number=1)
    assert near(call.expires_at, round1.finished_at + timedelta(hours=24), slack=1)
    assert call.expires_at - round0.finished_at >= timedelta(hours=24, seconds=1.5)

    with time_machine.travel(call.expires_at - timedelta(minutes=1)):
        assert result_of(answer(raw, "form_then_url", {}, second, {})) == second
    with time_machine.travel(call.expires_at + timedelta(seconds=1)):
        assert error_of(answer(raw, "form_then_url", {}, second, {})) == INVALID_STATE


def test_a_shorter_default_ttl_shortens_both_lifetimes(mcp_url, token, settings, worker_with_env):
    settings.MCP_DEFAULT_TTL_MINUTES = 5
    worker_with_env(MCP_DEFAULT_TTL_MINUTES="5")
    raw = Raw(mcp_url, token)

    first = asked(raw, "greeter")
    call = call_of(first["requestState"])
    assert near(call.expires_at, timezone.now() + timedelta(minutes=5))  # not 24 hours

    done = result_of(answer(raw, "greeter", {}, first, NAME))
    call.refresh_from_db()
    assert near(call.expires_at, timezone.now() + timedelta(minutes=5))  # not 10 minutes
    with time_machine.travel(call.expires_at + timedelta(seconds=1)):
        assert error_of(answer(raw, "greeter", {}, first, NAME)) == INVALID_STATE
    assert done["structuredContent"] == {"greeting": "Hello, Ada!"}


def test_a_default_ttl_shortens_each_lifetime_only_where_it_is_shorter(mcp_url, token, settings, worker_with_env):
    settings.MCP_DEFAULT_TTL_MINUTES = 60
    worker_with_env(MCP_DEFAULT_TTL_MINUTES="60")
    raw = Raw(mcp_url, token)

    first = asked(raw, "greeter")
    call = call_of(first["requestState"])
    assert near(call.expires_at, timezone.now() + timedelta(minutes=60))  # shorter than 24 hours

    result_of(answer(raw, "greeter", {}, first, NAME))
    call.refresh_from_db()
    assert near(call.expires_at, timezone.now() + timedelta(minutes=10))  # not lengthened to 60 minutes


@pytest.mark.parametrize("where", ["langgraph.json", "LANGGRAPH_THREAD_TTL"])
def test_the_default_ttl_is_read_from_the_thread_ttl_configuration(tmp_path, where):
    config = json.loads((ROOT / "tests" / "langgraph.json").read_text())
    env = {k: v for k, v in os.environ.items() if k not in ("MCP_DEFAULT_TTL_MINUTES", "LANGGRAPH_THREAD_TTL")}
    if where == "langgraph.json":
        config["checkpointer"] = {"ttl": {"strategy": "delete", "default_ttl": 5}}
    else:
        env["LANGGRAPH_THREAD_TTL"] = '{"strategy": "delete", "default_ttl": 5}'
    (tmp_path / "langgraph.json").write_text(json.dumps(config))
    env["GRAPHS_CONFIG"] = str(tmp_path / "langgraph.json")

    shown = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "--no-imports",
            "-c",
            "from django.conf import settings; print(settings.MCP_DEFAULT_TTL_MINUTES)",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    assert shown.strip() == "5.0"  # the value test_a_shorter_default_ttl_shortens_both_lifetimes applies


def test_a_first_call_whose_run_outlasts_the_wait_gets_a_request_state_that_collects_its_result(
    mcp_url, token, settings
):
    settings.MCP_RUN_WAIT_SECONDS = 0.5
    raw = Raw(mcp_url, token)

    still_running = result_of(raw.call("slow", {"value": 2}))
    assert set(still_running) - {"_meta"} == {"resultType", "requestState"}
    assert still_running["resultType"] == "input_required"
    call = call_of(still_running["requestState"])
    assert eventually(lambda: ToolCall.objects.get(pk=call.pk).status == ToolCall.Status.FINISHED)

    # Finished after its requestState was handed out: kept for it (10 minutes), not deleted.
    done = result_of(raw.call("slow", {"value": 2}, requestState=still_running["requestState"]))
    assert done["isError"] is False and done["structuredContent"]["answer"] == "slept"


def test_a_call_that_cannot_keep_a_thread_is_kept_for_a_request_state_handed_out_while_it_ran(
    mcp_url, token, settings, tmp_path
):
    settings.MCP_THREADS_ENABLED = False
    settings.MCP_RUN_WAIT_SECONDS = 0.5
    raw = Raw(mcp_url, token)
    arguments = {"signal_dir": str(tmp_path)}

    still_running = result_of(raw.call("effect_then_ask", arguments))
    (tmp_path / "release").touch()  # the run goes on to its question, which this call cannot keep
    assert eventually(lambda: ToolCall.objects.get().status == ToolCall.Status.FINISHED)

    ended = still_running
    while ended.get("resultType") == "input_required" and "inputRequests" not in ended:
        ended = result_of(raw.call("effect_then_ask", arguments, requestState=ended["requestState"]))
    assert ended["isError"] is True and text_of(ended) == CANT_RESUME


def test_a_client_before_2026_whose_run_outlasts_the_wait_gets_an_error_result(mcp_url, token, settings):
    settings.MCP_RUN_WAIT_SECONDS = 0.5
    raw = Raw(mcp_url, token)
    headers = raw.headers("tools/call", "slow")
    del headers["MCP-Protocol-Version"]
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "slow", "arguments": {"value": 2}}}

    response = raw.post(body, headers)

    assert response.status_code == 200
    assert response.json()["result"]["isError"] is True
    assert text_of(response.json()["result"]) == "The tool did not finish within 0.5 seconds."


# --- Support clients without elicitation ------------------------------------------------------------


@pytest.mark.parametrize(
    "capabilities", [{}, {"sampling": {}}, {"elicitation": None}], ids=["none", "sampling", "null"]
)
def test_a_2026_client_without_elicitation_gets_32021_naming_form_with_http_400(mcp_url, token, capabilities):
    response = Raw(mcp_url, token).call("greeter", capabilities=capabilities)

    assert response.status_code == 400
    assert response.json()["error"] == {
        "code": -32021,
        "message": "This tool asks for human input and needs form elicitation.",
        "data": {"requiredCapabilities": {"elicitation": {"form": {}}}},
    }


@pytest.mark.parametrize(
    "tool, capabilities",
    [("greeter", {}), ("connect_calendar", {"elicitation": {"form": {}}})],
    ids=["no elicitation", "form only, needs url"],
)
def test_a_first_call_that_fails_with_32021_leaves_no_thread_behind_since_no_request_state_can_reach_it(
    mcp_url, token, tool, capabilities
):
    before = checkpoint_threads()  # the checkpoint tables are not flushed between tests

    response = Raw(mcp_url, token).call(tool, capabilities=capabilities)

    assert response.json()["error"]["code"] == -32021
    assert not ToolCall.objects.exists()
    assert checkpoint_threads() == before


def test_an_answer_with_a_request_state_that_fails_with_32021_leaves_the_round_open_for_a_capable_retry(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = asked(raw, "greeter")

    assert error_of(answer(raw, "greeter", {}, first, NAME, capabilities={}))["code"] == -32021

    assert result_of(answer(raw, "greeter", {}, first, NAME))["structuredContent"] == {"greeting": "Hello, Ada!"}


def test_required_capabilities_list_every_mode_the_round_needs(mcp_url, token):
    raw = Raw(mcp_url, token)
    requests = [
        {
            "key": "name",
            "message": "Name?",
            "mode": "form",
            "requested_schema": {"type": "object", "properties": {"name": {"type": "string"}}},
        },
        {"key": "login", "message": "Log in.", "mode": "url", "url": "https://example.com/login"},
    ]
    response = raw.call("relay_from_input", {"value": requests}, capabilities={})

    assert error_of(response)["data"] == {"requiredCapabilities": {"elicitation": {"form": {}, "url": {}}}}


def test_a_client_that_declares_elicitation_with_no_modes_supports_form(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = asked(raw, "greeter", capabilities={"elicitation": {}})

    result = result_of(answer(raw, "greeter", {}, first, NAME, capabilities={"elicitation": {}}))

    assert result["structuredContent"] == {"greeting": "Hello, Ada!"}


def test_a_client_without_elicitation_through_the_sdk_gets_an_mcp_error_32021(mcp_url, token):
    from mcp.shared.exceptions import MCPError

    async def go():
        async with sdk_client(mcp_url, token) as client:  # no callback: no elicitation capability
            try:
                await client.call_tool("greeter", {})
            except MCPError as error:
                return error.error
        raise AssertionError("the call did not fail")

    error = run(go())
    assert error.code == -32021
    assert error.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}


def test_a_2025_11_25_client_gets_an_error_result_with_the_pending_interrupts_as_json(mcp_url, token):
    async def go():
        async with sdk_client(mcp_url, token, by_message({}), mode="legacy") as client:
            assert client.protocol_version == "2025-11-25"
            return await client.call_tool("survey", {})

    result = run(go())

    assert result.is_error
    assert len(result.content) == 2
    assert result.content[0].text == CANT_ANSWER
    pending = json.loads(result.content[1].text)
    assert sorted(i["value"] for i in pending) == ["What is your favourite colour?", "What is your name?"]
    assert all(re.fullmatch(r"[0-9a-f]{32}", i["id"]) for i in pending)


@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26", "2024-11-05"])
def test_a_client_on_a_revision_before_2025_11_25_gets_the_same_error_result(mcp_url, token, version):
    raw = Raw(mcp_url, token)
    headers = raw.headers("tools/call", "survey", **{"MCP-Protocol-Version": version})
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "survey", "arguments": {}}}

    result = result_of(raw.post(body, headers))

    assert result["isError"] is True
    assert [block["type"] for block in result["content"]] == ["text", "text"]
    assert text_of(result) == CANT_ANSWER
    pending = json.loads(result["content"][1]["text"])
    assert sorted(i["value"] for i in pending) == ["What is your favourite colour?", "What is your name?"]


def test_a_call_that_cannot_keep_a_thread_because_threads_are_disabled_returns_the_cannot_be_resumed_error(
    mcp_url, token, settings
):
    # Whether a call can be resumed is decided when it starts, in the web process.
    settings.MCP_THREADS_ENABLED = False

    result = result_of(Raw(mcp_url, token).call("greeter"))

    assert result["isError"] is True
    assert text_of(result) == CANT_RESUME
    call = ToolCall.objects.get(tool_name="greeter")
    assert eventually(lambda: checkpoint_rows(call.thread_id) == 0)


def caller_without_thread_updates(request):
    """A custom auth handler that lets the caller create threads but not update them."""
    from mcp_gateway.auth import CREATE_THREADS, Caller, bearer_token_caller

    caller = bearer_token_caller(request)
    return caller and Caller(caller.identity, frozenset({CREATE_THREADS}), caller.user)


def test_a_call_that_cannot_keep_a_thread_because_auth_handlers_forbid_it_returns_the_cannot_be_resumed_error(
    mcp_url, token, settings
):
    from mcp_gateway import auth

    settings.MCP_AUTH_HANDLER = f"{__name__}.caller_without_thread_updates"
    auth._handler.cache_clear()  # the handler is imported once per process
    try:
        greeter = result_of(Raw(mcp_url, token).call("greeter"))
        twin = result_of(Raw(mcp_url, token).call("digital_twin", {"message": "hi"}))
    finally:
        settings.MCP_AUTH_HANDLER = "mcp_gateway.auth.bearer_token_caller"
        auth._handler.cache_clear()

    assert greeter["isError"] is True and text_of(greeter) == CANT_RESUME
    assert twin["isError"] is False  # a call that does not pause is unaffected


def caller_with_permissions_from_a_header(request):
    """A custom auth handler that grants the thread permissions named in X-Thread-Permissions."""
    from mcp_gateway.auth import Caller, bearer_token_caller

    caller = bearer_token_caller(request)
    granted = request.headers.get("X-Thread-Permissions")
    if caller is None or granted is None:
        return caller
    return Caller(caller.identity, frozenset(p for p in granted.split(",") if p), caller.user)


@pytest.fixture
def permissions_from_a_header(settings):
    from mcp_gateway import auth

    settings.MCP_AUTH_HANDLER = f"{__name__}.caller_with_permissions_from_a_header"
    auth._handler.cache_clear()  # the handler is imported once per process
    yield
    settings.MCP_AUTH_HANDLER = "mcp_gateway.auth.bearer_token_caller"
    auth._handler.cache_clear()


def test_answering_a_round_when_auth_handlers_forbid_updating_the_thread_returns_the_cannot_be_resumed_error(
    mcp_url, token, permissions_from_a_header
):
    raw = Raw(mcp_url, token)
    first = asked(raw, "greeter")  # every permission: the call can be kept

    params = {"name": "greeter", "arguments": {}, "_meta": meta(), "inputResponses": NAME}
    refused = raw.request(
        "tools/call",
        {**params, "requestState": first["requestState"]},
        **{"X-Thread-Permissions": "threads:create,threads:read"},
    )

    assert result_of(refused)["isError"] is True and text_of(result_of(refused)) == CANT_RESUME
    # Nothing was resumed: the same answers from a caller who may update the thread resume it.
    assert result_of(answer(raw, "greeter", {}, first, NAME))["structuredContent"] == {"greeting": "Hello, Ada!"}


@pytest.mark.parametrize(
    "granted", ["threads:read,threads:update", "threads:create,threads:read"], ids=["no create", "no update"]
)
def test_a_call_whose_auth_handlers_do_not_let_the_caller_create_or_update_its_thread_cannot_keep_a_pause(
    mcp_url, token, permissions_from_a_header, granted
):
    raw = Raw(mcp_url, token)
    params = {"name": "greeter", "arguments": {}, "_meta": meta()}

    paused = raw.request("tools/call", params, **{"X-Thread-Permissions": granted})

    assert result_of(paused)["isError"] is True and text_of(result_of(paused)) == CANT_RESUME


def test_a_call_whose_caller_may_not_read_its_thread_cannot_keep_a_pause(mcp_url, token, permissions_from_a_header):
    raw = Raw(mcp_url, token)
    params = {"name": "greeter", "arguments": {}, "_meta": meta()}

    paused = raw.request("tools/call", params, **{"X-Thread-Permissions": "threads:create,threads:update"})

    # A requestState it could never use: the call ends at its pause instead.
    assert result_of(paused)["isError"] is True and text_of(result_of(paused)) == CANT_RESUME


def test_a_request_state_fails_with_32602_when_auth_handlers_forbid_reading_the_thread(
    mcp_url, token, permissions_from_a_header
):
    raw = Raw(mcp_url, token)
    first = asked(raw, "greeter")

    params = {"name": "greeter", "arguments": {}, "_meta": meta(), "inputResponses": NAME}
    refused = raw.request(
        "tools/call",
        {**params, "requestState": first["requestState"]},
        **{"X-Thread-Permissions": "threads:create,threads:update"},
    )

    assert error_of(refused) == INVALID_STATE
    assert result_of(answer(raw, "greeter", {}, first, NAME))["structuredContent"] == {"greeting": "Hello, Ada!"}


BREAKPOINTS = pytest.mark.parametrize("graph", ["breakpoint_graph", "breakpoint_after_graph"])


@BREAKPOINTS
def test_a_static_breakpoint_ends_the_call_with_an_error_result_for_a_client_that_can_elicit(mcp_url, token, graph):
    result = result_of(Raw(mcp_url, token).call(graph))

    assert result["isError"] is True
    assert text_of(result) == (
        "This tool stopped at a breakpoint (interrupt_before/interrupt_after), which can't be resumed over MCP."
    )


@BREAKPOINTS
@pytest.mark.parametrize("capabilities", [{}, {"elicitation": None}], ids=["none", "null"])
def test_a_static_breakpoint_gives_other_clients_the_state_at_the_breakpoint_as_a_normal_result(
    mcp_url, token, capabilities, graph
):
    modern_without_elicitation = result_of(Raw(mcp_url, token).call(graph, capabilities=capabilities))

    async def go():
        async with sdk_client(mcp_url, token, mode="legacy") as client:
            return await client.call_tool(graph, {})

    legacy = run(go())

    assert modern_without_elicitation["isError"] is False
    assert modern_without_elicitation["structuredContent"] == {"value": "before"}
    assert not legacy.is_error
    assert json.loads(legacy.content[0].text) == {"value": "before"}


# --- Answer from a LangChain agent ------------------------------------------------------------------


def test_an_agent_using_mcp_adapter_answers_the_greeter_through_mcp_elicitation_interrupts(mcp_url, token):
    message, seen = agent_answering(mcp_url, token, "greeter", {"name": input_response_accepting(name="Ada")})

    assert message.status == "success"
    assert "Hello, Ada!" in str(message.content)
    assert [r["key"] for r in seen[0]["requests"]] == ["user_name"]
    # The adapter called again from the start: the earlier attempt stays paused until it expires.
    calls = ToolCall.objects.filter(tool_name="greeter")
    assert sorted(c.status for c in calls) == [ToolCall.Status.FINISHED, ToolCall.Status.PAUSED]


def test_an_agent_using_mcp_adapter_answers_both_survey_questions_in_one_round(mcp_url, token):
    answers = {"name": input_response_accepting(response="Ada"), "colour": input_response_accepting(response="green")}
    message, seen = agent_answering(mcp_url, token, "survey", answers)

    assert message.status == "success"
    assert json.loads(message.content[0]["text"] if isinstance(message.content, list) else message.content) == {
        "name": "Ada",
        "colour": "green",
    }
    assert len(seen) == 1 and len(seen[0]["requests"]) == 2


def test_an_agent_using_mcp_adapter_replays_earlier_answers_when_the_tool_asks_them_again(mcp_url, token):
    answers = {"name": input_response_accepting(response="Ada"), "page": {"action": "accept"}}
    message, seen = agent_answering(mcp_url, token, "form_then_url", answers)

    assert message.status == "success"
    assert '"first":"Ada"' in str(message.content)
    # One interrupt per round; each rerun from the start asked the earlier round under the same key.
    assert [[r["key"] for r in value["requests"]] for value in seen] == [[seen[0]["requests"][0]["key"]], ["login"]]
    statuses = sorted(ToolCall.objects.filter(tool_name="form_then_url").values_list("status", flat=True))
    assert statuses == [ToolCall.Status.FINISHED, ToolCall.Status.PAUSED, ToolCall.Status.PAUSED]


def _counted(counter: str) -> int:
    import redis
    from django.conf import settings

    return int(redis.Redis.from_url(settings.REDIS_URL).get(f"hitl-test:{counter}") or 0)


def test_through_mcp_adapter_the_agent_behind_the_tool_reruns_up_to_each_question(mcp_url, token):
    tag = uuid.uuid4().hex

    message, seen = agent_answering(
        mcp_url, token, "effects_around_a_question", {"Go on": input_response_accepting(response="yes")}, {"value": tag}
    )

    assert message.status == "success" and len(seen) == 1
    # The work before the question ran once per attempt: the first, and the adapter's call from the
    # start that answered it. The work after it ran once.
    assert (_counted(f"before:{tag}"), _counted(f"after:{tag}")) == (2, 1)


def test_through_mcp_adapter_the_thread_of_the_earlier_attempt_stays_paused_until_it_expires(mcp_url, token):
    from mcp_gateway.cleanup import remove_expired_calls

    agent_answering(mcp_url, token, "greeter", {"name": input_response_accepting(name="Ada")})

    earlier = ToolCall.objects.get(tool_name="greeter", status=ToolCall.Status.PAUSED)
    asked_at = Round.objects.get(call=earlier, number=0).finished_at
    assert near(earlier.expires_at, asked_at + timedelta(hours=24), slack=1)
    with time_machine.travel(earlier.expires_at - timedelta(minutes=1)):
        remove_expired_calls()
    earlier.refresh_from_db()
    assert earlier.status == ToolCall.Status.PAUSED
    assert checkpoint_rows(earlier.thread_id) > 0
    with time_machine.travel(earlier.expires_at + timedelta(seconds=1)):
        remove_expired_calls()
    assert not ToolCall.objects.filter(pk=earlier.pk).exists()
    assert checkpoint_rows(earlier.thread_id) == 0


def test_through_mcp_adapter_a_rerun_that_asks_a_different_question_changes_the_key_and_the_adapter_raises(
    mcp_url, token
):
    # The model behind the tool proposes other arguments when the adapter calls it again.
    arguments = {"messages": f"Send the launch email ({uuid.uuid4().hex})"}
    seen: list[dict] = []

    with pytest.raises(ValueError, match="needs an answer for every elicitation request") as raised:
        agent_answering(
            mcp_url,
            token,
            "review_other_args_on_rerun",
            {"send_email": input_response_accepting(decision="approve")},
            arguments,
            seen,
        )

    ((first,),) = [value["requests"] for value in seen]
    assert "'subject': 'Launch'" in first["message"]
    (new_key,) = re.findall(r"review-[0-9a-f]{16}\.[0-9]+", str(raised.value))
    assert new_key != first["key"]
    rerun = ToolCall.objects.filter(tool_name="review_other_args_on_rerun").latest("created_at")
    (question,) = Round.objects.get(call=rerun, number=0).outcome["requests"].values()
    assert "'subject': 'Relaunch'" in question["params"]["message"]
    assert Round.objects.exclude(resume=None).count() == 0  # nothing was approved


def test_through_mcp_adapter_a_rerun_that_asks_no_question_finishes_without_the_stored_answer_and_no_error(
    mcp_url, token
):
    # The model behind the tool skips, on the adapter's rerun, the call the user approved.
    arguments = {"messages": f"Send the launch email ({uuid.uuid4().hex})"}

    message, seen = agent_answering(
        mcp_url,
        token,
        "review_nothing_on_rerun",
        {"send_email": input_response_accepting(decision="approve")},
        arguments,
    )

    assert len(seen) == 1
    assert message.status == "success"
    assert "Nothing to send after all." in message.text and "sent to" not in message.text
    assert Round.objects.exclude(resume=None).count() == 0  # the stored answer was never sent
    statuses = sorted(ToolCall.objects.values_list("status", flat=True))
    assert statuses == [ToolCall.Status.FINISHED, ToolCall.Status.PAUSED]


# --- Secure paused calls ----------------------------------------------------------------------------


def test_a_request_state_works_only_for_the_agent_tool_name_and_arguments_of_its_call(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = asked(raw, "context_echo", {"value": "a"})
    key = only_key(first)

    for name, arguments in [("context_echo", {"value": "b"}), ("context_echo", {}), ("choose_region", {"value": "a"})]:
        response = raw.call(
            name,
            arguments,
            inputResponses={key: input_response_accepting(response="y")},
            requestState=first["requestState"],
        )
        assert error_of(response) == INVALID_STATE, (name, arguments)
    assert result_of(answer(raw, "context_echo", {"value": "a"}, first, {key: input_response_accepting(response="y")}))


def test_a_request_state_from_another_user_fails_with_32602(mcp_url, token, make_token):
    mine = Raw(mcp_url, token)
    first = asked(mine, "greeter")
    theirs = Raw(mcp_url, make_token("bob"))

    assert error_of(answer(theirs, "greeter", {}, first, NAME)) == INVALID_STATE
    assert result_of(answer(mine, "greeter", {}, first, NAME))["structuredContent"] == {"greeting": "Hello, Ada!"}


def test_the_database_stores_no_usable_request_state_and_no_raw_bearer_token(mcp_url, token):
    from django.core import serializers
    from django.db import connection

    raw = Raw(mcp_url, token)
    first = asked(raw, "form_then_url")
    second = result_of(
        answer(raw, "form_then_url", {}, first, {only_key(first): input_response_accepting(response="Ada")})
    )
    states = [first["requestState"], second["requestState"]]

    dump = serializers.serialize("json", [*MCPToken.objects.all(), *ToolCall.objects.all(), *Round.objects.all()])
    with connection.cursor() as cursor:
        for table in ("checkpoints", "checkpoint_writes"):
            cursor.execute(f"SELECT * FROM {table}")
            dump += repr(cursor.fetchall())
    assert Round.objects.count() == 2
    secrets = [token, token.removeprefix(MCPToken.PREFIX), *states, *(s.partition(".")[2] for s in states)]
    secrets += [hashlib.sha256(s.encode()).hexdigest() for s in states]  # the stored hash is a keyed one
    for secret in secrets:
        assert secret not in dump
