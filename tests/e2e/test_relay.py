"""Relay elicitation requests, end to end: the greeter through the SDK client, and agents that
relay the questions of tools they call through MCPAdapter. The rules are checked in
tests/inprocess/."""

from __future__ import annotations

import json

import pytest

from tests.asking import form_request
from tests.clients import CANCEL, DECLINE, Raw, by_message, elicit_result_accepting, run, sdk_client
from tests.rounds import (
    agent_answering,
    answer,
    asked,
    input_response_accepting,
    result_of,
)


def test_the_greeter_relays_its_request_under_its_own_key_and_resumes_with_the_answer(mcp_url, token):
    callback = by_message({"name": elicit_result_accepting(name="Ada")})

    async def go():
        async with sdk_client(mcp_url, token, callback) as client:
            return await client.call_tool("greeter", {})

    result = run(go())
    assert result.structured_content == {"greeting": "Hello, Ada!"}
    assert result.content[0].text == '{"greeting":"Hello, Ada!"}'
    assert [key for key, _ in callback.asked] == ["user_name"]


@pytest.mark.parametrize("action", [DECLINE, CANCEL], ids=["decline", "cancel"])
def test_declined_and_cancelled_relay_answers_are_passed_to_the_agent(mcp_url, token, action):
    async def go():
        async with sdk_client(mcp_url, token, by_message({"name": action})) as client:
            return await client.call_tool("greeter", {})

    result = run(go())
    assert not result.is_error
    assert result.structured_content == {"greeting": "Hello, stranger!"}


def test_other_keys_in_the_interrupt_values_leave_the_keys_of_several_pending_requests_unchanged(mcp_url, token):
    """Other keys in the interrupt value are ignored, and each key is derived from its question,
    which is what lets MCPAdapter replay its stored answers
    (docs/rules.md, "Answer from a LangChain agent"): here each value carries a call id that is new
    on every run, and the adapter's call from the start must find the same keys."""
    message, seen = agent_answering(
        mcp_url, token, "relay_twice_with_fresh_ids", {"confirm": input_response_accepting(ok=True)}
    )

    (first,) = seen
    assert sorted(r["key"].split(".", 1)[1] for r in first["requests"]) == ["1/confirm", "2/confirm"]
    assert message.status == "success"
    assert message.text.count('"confirm":{"action":"accept","content":{"ok":true}}') == 2


def test_an_agent_relays_the_question_of_a_tool_it_calls_through_mcp_adapter_to_its_own_client(mcp_url, token):
    # The agent behind relay_through_adapter calls greeter on this same server through MCPAdapter.
    arguments = {"value": {"url": mcp_url, "token": token, "tool": "greeter"}}
    raw = Raw(mcp_url, token)
    first = asked(raw, "relay_through_adapter", arguments)

    assert first["inputRequests"] == {
        "user_name": form_request(
            "What is your name?", {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        )
    }
    result = result_of(
        answer(raw, "relay_through_adapter", arguments, first, {"user_name": input_response_accepting(name="Ada")})
    )
    assert result["isError"] is False
    assert "Hello, Ada!" in json.dumps(result["structuredContent"])
