"""The limits of a request: JSON depth, numbers and text that JSON or PostgreSQL cannot hold,
integers beyond 64 bits, the number and size of inputResponses, and the rate per caller."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
import time_machine
from django.conf import settings as django_settings

from mcp_gateway import limits
from mcp_gateway.models import Round, ToolCall
from tests.clients import Raw, meta
from tests.e2e.fuzzing import clean
from tests.rounds import (
    asked,
    error_of,
    input_response_accepting,
    only_key,
    result_of,
)


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def test_json_nested_deeper_than_the_limit_is_an_invalid_request(mcp_url, token, settings):
    raw = Raw(mcp_url, token)
    limit = settings.MCP_MAX_JSON_DEPTH
    # The body itself is one level, params two, arguments three, the value four.
    within = raw.call("digital_twin", {"message": "hi", "x": _nested(limit - 4)})
    assert within.status_code == 200
    for depth in (limit, 5000, 200_000):
        body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"x": ' + b"[" * depth
        body += b"]" * depth + b"}}"
        response = raw.http.post(mcp_url, content=body, headers=raw.headers("tools/list"))
        error = error_of(response)
        assert error["code"] == -32600 and "nested deeper" in error["message"], depth


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"])
def test_numbers_that_are_not_json_are_a_parse_error(mcp_url, token, literal):
    raw = Raw(mcp_url, token)
    body = (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "typed_from_input", '
        f'"arguments": {{"value": {literal}}}, "_meta": {json.dumps(meta())}}}}}'
    ).encode()
    response = raw.http.post(mcp_url, content=body, headers=raw.headers("tools/call", "typed_from_input"))
    assert error_of(response)["code"] == -32700
    assert not ToolCall.objects.exists()


def test_an_unpaired_surrogate_is_a_parse_error(mcp_url, token):
    raw = Raw(mcp_url, token)
    body = (
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "greeter", "arguments": '
        b'{"greeting": "\\ud800"}, "_meta": ' + json.dumps(meta()).encode() + b"}}"
    )
    response = raw.http.post(mcp_url, content=body, headers=raw.headers("tools/call", "greeter"))
    assert error_of(response)["code"] == -32700
    assert not ToolCall.objects.exists()


@pytest.mark.parametrize("where", ["arguments", "argument key", "context", "answer"])
def test_text_postgresql_cannot_store_is_refused_with_32602(mcp_url, token, where):
    raw = Raw(mcp_url, token)
    if where == "answer":
        first = asked(raw, "greeter")
        response = raw.call(
            "greeter",
            {},
            requestState=first["requestState"],
            inputResponses={"user_name": input_response_accepting(name="A\x00da")},
        )
    elif where == "context":
        response = raw.call("greeter", {}, context={"tag": "\x00"})
    else:
        response = raw.call("greeter", {"greeting": "hi\x00"} if where == "arguments" else {"greeting\x00": "hi"})
    error = error_of(response)
    assert error["code"] == -32602 and "U+0000" in error["message"]
    assert ToolCall.objects.count() == (1 if where == "answer" else 0)


def test_more_input_responses_than_the_limit_get_32602(mcp_url, token, settings):
    settings.MCP_MAX_INPUT_RESPONSES = 3
    raw = Raw(mcp_url, token)
    first = asked(raw, "greeter")
    responses = {
        "user_name": input_response_accepting(name="Ada"),
        **{f"k{i}": input_response_accepting() for i in range(3)},
    }

    error = error_of(raw.call("greeter", {}, requestState=first["requestState"], inputResponses=responses))

    assert error == {
        "code": -32602,
        "message": "Invalid params: at most 3 inputResponses per request",
        "data": {"limit": 3, "received": 4},
    }
    assert Round.objects.get(pk=first["requestState"].partition(".")[0]).state == Round.State.ASKING
    done = result_of(
        raw.call(
            "greeter",
            {},
            requestState=first["requestState"],
            inputResponses={"user_name": input_response_accepting(name="Ada")},
        )
    )
    assert done["structuredContent"] == {"greeting": "Hello, Ada!"}


def test_an_answer_larger_than_the_limit_gets_32602(mcp_url, token, settings):
    settings.MCP_MAX_ANSWER_BYTES = 1000
    raw = Raw(mcp_url, token)
    first = asked(raw, "greeter")

    error = error_of(
        raw.call(
            "greeter",
            {},
            requestState=first["requestState"],
            inputResponses={"user_name": input_response_accepting(name="é" * 600)},
        )
    )

    assert error["code"] == -32602 and error["data"] == {"key": "user_name", "limit": 1000}
    assert Round.objects.get(pk=first["requestState"].partition(".")[0]).state == Round.State.ASKING


def test_an_edit_whose_args_nest_too_deeply_for_python_is_a_32602_not_a_500(mcp_url, token):
    raw = Raw(mcp_url, token)
    arguments = {"message": "Send the launch email"}
    first = asked(raw, "send_email", arguments)

    response = raw.call(
        "send_email",
        arguments,
        requestState=first["requestState"],
        inputResponses={only_key(first): input_response_accepting(decision="edit", args="[" * 5000)},
    )

    clean(response)
    assert error_of(response)["code"] == -32602


@pytest.mark.parametrize("where", ["arguments", "answer", "id"])
def test_integers_beyond_64_bits_are_an_invalid_request_and_the_round_stays_open(mcp_url, token, where):
    # LangGraph's checkpoints (msgpack) hold at most 64-bit integers: a larger one would end the
    # call with a serializer error after its round was claimed.
    raw = Raw(mcp_url, token)
    first = asked(raw, "typed_int")
    if where == "id":
        body = {"jsonrpc": "2.0", "id": 10**5000, "method": "tools/list", "params": {}}
        response = raw.http.post(mcp_url, content=limits_free_dumps(body), headers=raw.headers("tools/list"))
    elif where == "arguments":
        response = raw.call("typed_int", {"x": 2**64})
    else:
        response = raw.call(
            "typed_int",
            {},
            requestState=first["requestState"],
            inputResponses={only_key(first): input_response_accepting(response=-(2**63) - 1)},
        )

    error = error_of(response)
    assert error["code"] == -32600 and "64" in error["message"]
    assert ToolCall.objects.count() == 1
    done = raw.call(
        "typed_int",
        {},
        requestState=first["requestState"],
        inputResponses={only_key(first): input_response_accepting(response=2**64 - 1)},
    )
    assert result_of(done)["structuredContent"]["answer"] == 2**64 - 1


def limits_free_dumps(body: Any) -> bytes:
    import sys

    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        return json.dumps(body).encode()
    finally:
        sys.set_int_max_str_digits(old)


@pytest.mark.parametrize(
    "args",
    ['{"to": "a", "x": 1e999}', '{"to": "a\\u0000"}', '{"to": "\\ud800"}', '{"to": "a", "x": 100000000000000000000}'],
    ids=["infinity", "nul", "surrogate", "integer"],
)
def test_edited_arguments_that_cannot_be_stored_are_a_32602_and_the_round_stays_open(mcp_url, token, args):
    raw = Raw(mcp_url, token)
    arguments = {"message": "Send the launch email"}
    first = asked(raw, "send_email", arguments)
    key = only_key(first)

    response = raw.call(
        "send_email",
        arguments,
        requestState=first["requestState"],
        inputResponses={key: input_response_accepting(decision="edit", args=args)},
    )

    clean(response)
    assert error_of(response)["code"] == -32602
    approved = raw.call(
        "send_email",
        arguments,
        requestState=first["requestState"],
        inputResponses={key: input_response_accepting(decision="approve")},
    )
    assert result_of(approved)["isError"] is False


@pytest.fixture
def rate_limit(settings):
    """A limit of 3 a minute on the configured cache backend (Redis), in a key space of this test's
    own, with the test's requests starting as a minute starts: the window is the clock's minute, and
    requests that straddled two minutes would be counted in both."""
    settings.CACHES = {"default": {**django_settings.CACHES["default"], "KEY_PREFIX": f"hitl-test-{uuid.uuid4()}"}}
    settings.MCP_RATE_LIMIT_PER_MINUTE = 3
    with time_machine.travel((int(time.time()) // 60 + 1) * 60, tick=True):
        yield 3


def test_more_requests_a_minute_than_the_limit_get_429_with_retry_after(mcp_url, token, make_token, rate_limit):
    raw = Raw(mcp_url, token)
    for _ in range(rate_limit):
        assert raw.request("tools/list", {"_meta": meta()}).status_code == 200

    response = raw.request("tools/list", {"_meta": meta()})

    assert response.status_code == 429
    assert 1 <= int(response.headers["Retry-After"]) <= 60
    error = clean(response)["error"]
    assert error["code"] == -32003
    assert error["data"] == {"retryAfterSeconds": int(response.headers["Retry-After"]), "limitPerMinute": 3}
    # Per caller: someone else is not held up, and a wrong token is still a 401, not a 429.
    assert Raw(mcp_url, make_token("bob")).request("tools/list", {"_meta": meta()}).status_code == 200
    assert Raw(mcp_url, "hitl_wrong").request("tools/list", {"_meta": meta()}).status_code == 401


def test_a_subscriptions_listen_request_counts_against_the_rate_limit_like_any_request(mcp_url, token, rate_limit):
    raw = Raw(mcp_url, token)
    listen = {"notifications": {"taskIds": []}, "_meta": meta({"extensions": {"io.modelcontextprotocol/tasks": {}}})}
    for _ in range(rate_limit - 1):
        assert raw.request("tools/list", {"_meta": meta()}).status_code == 200
    assert raw.request("subscriptions/listen", listen).status_code == 200

    refused = raw.request("subscriptions/listen", listen)

    assert refused.status_code == 429
    assert clean(refused)["error"]["code"] == -32003


def test_the_rate_window_resets_each_minute():
    from django.test import override_settings

    with override_settings(
        MCP_RATE_LIMIT_PER_MINUTE=2,
        CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": str(uuid.uuid4())}},
    ):
        start = 1_000_000 * 60 + 50.2
        assert limits.retry_after("user:1", start) is None
        assert limits.retry_after("user:1", start + 1) is None
        assert limits.retry_after("user:1", start + 2) == 8  # the window ends at the next full minute
        assert limits.retry_after("user:2", start + 2) is None
        assert limits.retry_after("user:1", start + 10) is None  # a new window
    with override_settings(MCP_RATE_LIMIT_PER_MINUTE=0):
        assert all(limits.retry_after("user:1") is None for _ in range(100))
