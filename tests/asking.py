"""What the service's questions look like in a result, for the tests of both layers: an
elicitation request of each mode, the one-field form of a text question, and the error result of
a question that cannot be asked."""

from __future__ import annotations

import re
from typing import Any

UNASKABLE = "This tool needs input that can't be asked over MCP"
TEXT_KEY = re.compile(r"answer-[0-9a-f]{16}")
TEXT_FORM = {"properties": {"response": {"type": "string"}}, "required": ["response"], "type": "object"}
OK_FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
DECLINED = "The request for input was declined."
CANCELLED = "The request for input was cancelled."


def form_request(message: str, schema: dict) -> dict:
    return {"method": "elicitation/create", "params": {"message": message, "mode": "form", "requestedSchema": schema}}


def url_request(message: str, url: str) -> dict:
    return {"method": "elicitation/create", "params": {"message": message, "mode": "url", "url": url}}


CALENDAR = url_request("Connect your calendar to continue.", "https://example.com/oauth/calendar/start")


def unaskable(result: dict[str, Any]) -> bool:
    return result.get("isError") is True and result["content"][0]["text"].startswith(UNASKABLE)
