"""Review tool calls, helpers for the end-to-end tests: the documented question, calling a
reviewing tool through the SDK client or raw HTTP, and what the middleware was resumed with."""

from __future__ import annotations

import re
from typing import Any

import pytest

from mcp_gateway.models import Round
from tests.clients import Raw, by_message, run, sdk_client

BATCHED = "send_email"


PER_CALL = "send_email_per_call"


BOTH_MODES = pytest.mark.parametrize("tool", [BATCHED, PER_CALL])


EMAIL = {"message": "Send the launch email"}


TWICE = {"message": "Send the launch email twice"}


# What the scripted model proposes.
EMAIL_ARGS = {"to": "ada@example.com", "subject": "Launch"}


KEY = re.compile(r"review-[0-9a-f]{16}\.[0-9]+")


# docs/rules.md, "Review tool calls": the question for send_email(to="ada@example.com", subject="Launch").
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
    return last_words(result.structured_content)


def last_words(structured: dict[str, Any]) -> str:
    """What the agent said last: the e-mail agents' declared `answer`; a create_agent graph, which
    declares its messages as its output, its last message."""
    return structured["answer"] if "answer" in structured else structured["messages"][-1]["content"]


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
