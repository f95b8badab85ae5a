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
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import httpx
import pytest
import time_machine

from mcp_gateway.models import MCPToken, Round, ToolCall
from tests.clients import ACCEPT, Raw, by_message, elicit_result_accepting, meta, run, sdk_client
from tests.processes import ROOT
from tests.rounds import (
    agent_answering,
    answer,
    asked,
    call_of,
    checkpoint_rows,
    input_response_accepting,
    only_key,
    result_of,
    text_of,
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


# Answers in the first call


# Repeated answers


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


# Invalid state


# Runtime context


# Lifetime


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


# --- Support clients without elicitation ------------------------------------------------------------


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


BREAKPOINTS = pytest.mark.parametrize("graph", ["breakpoint_graph", "breakpoint_after_graph"])


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
