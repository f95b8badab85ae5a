"""Staff approvals, for both layers: the digital_twin message that pauses for staff, the draft the
fake model writes from it, and what the model was told by its tools."""

from __future__ import annotations

from typing import Any

HIRE_ME = "Please pass a message to the owner: I would like to hire you for a Django project."

DRAFT = {"name": "Visitor", "email": "visitor@example.com", "message": HIRE_ME}

SECOND_DRAFT = {"name": "Visitor", "email": "visitor@example.com", "message": "And a second one, never shown to staff."}


def tool_messages(request: dict[str, Any]) -> list[str]:
    """The tool results in one request to the model."""
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]
