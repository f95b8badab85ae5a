"""Support clients without elicitation, end to end: what the SDK client gets without the
capability, clients of earlier revisions, and static breakpoints for clients that cannot elicit.
The rules for each declared capability are checked in tests/inprocess/."""

from __future__ import annotations

import json
import re

import pytest

from tests.clients import Raw, by_message, run, sdk_client
from tests.rounds import (
    result_of,
    text_of,
)

CANT_ANSWER = "This tool paused to ask for human input, and this client can't answer it."


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
