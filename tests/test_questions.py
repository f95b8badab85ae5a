"""Questions: the product document's sections "Ask a text question", "Ask for typed input", "Relay
elicitation requests" and "Send the user to a URL", one test per rule, with the example agents
choose_region, plan_deployment, greeter and connect_calendar, through the HTTP endpoint against the
real database, Redis and Celery worker."""

from __future__ import annotations

import enum
import json
import re

import pytest
from pydantic import BaseModel, Field

from tests.clients import ACCEPT, CANCEL, DECLINE, Raw, by_message, elicit_result_accepting, run, sdk_client
from tests.rounds import (
    UNASKABLE,
    agent_answering,
    answer,
    asked,
    drive,
    form_only_session,
    input_response_accepting,
    only_key,
    result_of,
    text_of,
)

TEXT_KEY = re.compile(r"answer-[0-9a-f]{16}")
TEXT_FORM = {"properties": {"response": {"type": "string"}}, "required": ["response"], "type": "object"}
OK_FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
DECLINED = "The request for input was declined."
CANCELLED = "The request for input was cancelled."


def form_request(message: str, schema: dict) -> dict:
    return {"method": "elicitation/create", "params": {"message": message, "mode": "form", "requestedSchema": schema}}


def url_request(message: str, url: str) -> dict:
    return {"method": "elicitation/create", "params": {"message": message, "mode": "url", "url": url}}


def unaskable(result: dict) -> bool:
    return result.get("isError") is True and text_of(result).startswith(UNASKABLE)


# --- Ask a text question ----------------------------------------------------------------------------


def test_the_choose_region_agent_through_the_sdk_client(mcp_url, token):
    callback = by_message({"region": elicit_result_accepting(response="eu-west-1")})

    async def go():
        async with sdk_client(mcp_url, token, callback) as client:
            return await client.call_tool("choose_region", {})

    assert run(go()).structured_content == {"region": "eu-west-1"}
    assert TEXT_KEY.fullmatch(callback.asked[0][0])


def test_a_decline_answer_to_a_text_question_through_the_sdk_client_ends_the_call(mcp_url, token):
    async def go():
        async with sdk_client(mcp_url, token, by_message({"region": DECLINE})) as client:
            return await client.call_tool("choose_region", {})

    result = run(go())
    assert result.is_error and result.content[0].text == DECLINED


# --- Ask for typed input ----------------------------------------------------------------------------

DEPLOYMENT_FORM = {
    "properties": {
        "region": {"enum": ["us-east-1", "eu-west-1"], "title": "Region", "type": "string"},
        "replicas": {"maximum": 10, "minimum": 1, "title": "Replicas", "type": "integer"},
    },
    "required": ["region", "replicas"],
    "type": "object",
}


def test_the_plan_deployment_agent_through_the_sdk_client_answers_again_after_an_invalid_answer(mcp_url, token):
    from mcp.shared.exceptions import MCPError

    async def go():
        async with sdk_client(mcp_url, token, by_message({})) as client:
            session = client.session
            first = await session.call_tool("plan_deployment", {}, allow_input_required=True)
            key = only_key({"inputRequests": first.input_requests})
            try:
                await session.call_tool(
                    "plan_deployment",
                    {},
                    input_responses={key: elicit_result_accepting(region="eu-west-1", replicas=20)},
                    request_state=first.request_state,
                    allow_input_required=True,
                )
            except MCPError as exc:
                error = exc.error
            else:
                raise AssertionError("replicas 20 was accepted")
            done = await session.call_tool(
                "plan_deployment",
                {},
                input_responses={key: elicit_result_accepting(region="eu-west-1", replicas=3)},
                request_state=first.request_state,
                allow_input_required=True,
            )
            return error, done

    error, done = run(go())
    assert (error.code, error.message) == (-32602, "Form content does not match requestedSchema")
    assert done.structured_content == {"region": "eu-west-1", "replicas": 3}


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


class Paint(BaseModel):
    """Paint to order."""

    colour: Colour
    litres: int | None = Field(default=None, ge=1, le=20, description="How much")


# --- Relay elicitation requests ---------------------------------------------------------------------


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
    """Document: Agent Server ignores other keys in the interrupt value, and derives each key from
    its question, which is what lets MCPAdapter replay its stored answers: here each value carries a
    call id that is new on every run, and the adapter's call from the start must find the same keys."""
    message, seen = agent_answering(
        mcp_url, token, "relay_twice_with_fresh_ids", {"confirm": input_response_accepting(ok=True)}
    )

    (first,) = seen
    assert sorted(r["key"].split(".", 1)[1] for r in first["requests"]) == ["1/confirm", "2/confirm"]
    assert message.status == "success"
    assert message.text.count('"confirm":{"action":"accept","content":{"ok":true}}') == 2


# --- Send the user to a URL -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "action, status", [(ACCEPT, "connected"), (DECLINE, "not connected")], ids=["accept", "decline"]
)
def test_the_connect_calendar_agent_through_the_sdk_client(mcp_url, token, action, status):
    callback = by_message({"calendar": action})

    async def go():
        async with sdk_client(mcp_url, token, callback) as client:
            return await client.call_tool("connect_calendar", {})

    assert run(go()).structured_content == {"status": status}
    ((key, params),) = callback.asked
    assert (key, params.mode, params.url) == ("calendar_auth", "url", "https://example.com/oauth/calendar/start")


NEEDS_URL = {
    "code": -32021,
    "message": "This tool asks for human input and needs url elicitation.",
    "data": {"requiredCapabilities": {"elicitation": {"url": {}}}},
}
FORM_ONLY = {"elicitation": {"form": {}}}


def test_a_form_only_sdk_client_gets_an_mcp_error_32021_naming_url(mcp_url, token):
    from mcp.shared.exceptions import MCPError

    async def go():
        async with form_only_session(mcp_url, token, by_message({})) as session:
            try:
                await drive(session, "connect_calendar", {})
            except MCPError as exc:
                return exc.error
        raise AssertionError("the call did not fail")

    error = run(go())
    assert (error.code, error.message, error.data) == (NEEDS_URL["code"], NEEDS_URL["message"], NEEDS_URL["data"])


def test_a_form_only_sdk_client_answers_form_questions(mcp_url, token):
    async def go():
        async with form_only_session(
            mcp_url, token, by_message({"name": elicit_result_accepting(name="Ada")})
        ) as session:
            return await drive(session, "greeter", {})

    assert run(go()).structured_content == {"greeting": "Hello, Ada!"}


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
