"""Send the user to a URL, end to end: the connect_calendar agent through the SDK client, and an
SDK client that declares form elicitation only. The rules are checked in tests/inprocess/."""

from __future__ import annotations

import pytest

from tests.clients import ACCEPT, DECLINE, by_message, elicit_result_accepting, run, sdk_client
from tests.rounds import (
    drive,
    form_only_session,
)


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
