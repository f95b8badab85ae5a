"""The hand-over point for interrupts that are not meant for the MCP client.

An app registers a handler for an interrupt `type` (the staff approvals app registers
"staff_approval" in its AppConfig.ready). When a run pauses on such an interrupt, the gateway does
not ask the client: the handler takes the paused thread, and its result ends the tool call. The
gateway never imports the apps that register here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from langgraph.types import Interrupt


@dataclass(frozen=True)
class Handoff:
    """What the gateway knows when it hands a paused call over."""

    call_id: Any
    thread_id: str
    graph: str
    interrupts: tuple[Interrupt, ...]
    state: dict[str, Any]


@dataclass(frozen=True)
class HandoffResult:
    """How the tool call ends for the MCP client, and how long the thread stays paused."""

    text: str
    structured: dict[str, Any]
    keep_for: timedelta
    extra: dict[str, Any] = field(default_factory=dict)


Handler = Callable[[Handoff], HandoffResult]
_handlers: dict[str, Handler] = {}


def register(interrupt_type: str, handler: Handler) -> None:
    _handlers[interrupt_type] = handler


def handler_for(interrupt: Interrupt) -> Handler | None:
    value = interrupt.value
    if isinstance(value, dict) and isinstance(value.get("type"), str):
        return _handlers.get(value["type"])
    return None
