"""Pause and resume a tool call, end to end: the wire shape of a round and of its result, the SDK
client driving rounds on its own, clients before the requestState, identical answers sent at once
to a live server, the thread-TTL configuration of a real process, and what an auth handler and
the database see (Secure paused calls). The rules themselves are checked in tests/inprocess/."""

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

import httpx
import pytest

from mcp_gateway.models import MCPToken, Round, ToolCall
from tests.clients import ACCEPT, Raw, by_message, elicit_result_accepting, meta, run, sdk_client
from tests.processes import ROOT
from tests.rounds import (
    INVALID_STATE,
    answer,
    asked,
    call_of,
    input_response_accepting,
    only_key,
    result_of,
    text_of,
)


def test_an_invalid_request_state_is_answered_with_http_400_and_the_requests_own_id(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = asked(raw, "greeter")
    round_id, _, mac = first["requestState"].partition(".")

    response = raw.call("greeter", {}, inputResponses=NAME, requestState=f"{round_id}.{mac[::-1]}")

    assert response.status_code == 400, response.text
    assert response.json() == {"jsonrpc": "2.0", "id": raw._id, "error": INVALID_STATE}


NAME = {"user_name": input_response_accepting(name="Ada")}


TOKEN_SHAPE = re.compile(r"[0-9a-f-]{36}\.[A-Za-z0-9_-]{43}")


CANT_ANSWER = "This tool paused to ask for human input, and this client can't answer it."


CANT_RESUME = "This tool paused to ask for human input, and this call can't be resumed."


SERVER_INFO = "io.modelcontextprotocol/serverInfo"


def rounds_of(request_state: str) -> int:
    return Round.objects.filter(call=call_of(request_state)).count()


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
    assert list(call.rounds.values_list("state", flat=True)) == [Round.State.ANSWERED, Round.State.FINISHED]


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
