"""What a tool call's request comes to, whatever the wire it arrived on: the core's answers.

The state machine (tool_calls.py) says what a request comes to; the wire that read the request
renders it (wires/rounds/replies.py for the 2026-07-28 revision, wires/sessions/replies.py for
older clients, the MCP task methods for a task). A new wire implements one renderer of these:

- `Asking`: the round's questions, for a client that can answer them (its capabilities checked,
  the call kept paused for it); with a `link` (MCP_ANSWER_PAGES=on), for a client that opens links
  but cannot answer the round's forms: each form question becomes a URL question that opens the
  round's answer page (links.py);
- `StillRunning`: the run outlasted the request's wait, and the call is kept for the handle the
  client comes back with;
- `Finished`: the call's CallToolResult (a result, an error result, a hand-over's notice);
- `BecameTask`: the call is to become an MCP task, which the wire records as it hands out the id.

While a run goes on, the answer is a `Waiting` instead (tool_calls.py), which waiting.py turns into
one of these once the run has moved on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp_gateway.calls import questions
from mcp_gateway.models import Round, ToolCall


@dataclass(frozen=True)
class Asking:
    round: Round
    link: str | None = None

    @property
    def requests(self) -> dict[str, Any]:
        """The round's questions, by key: elicitation/create requests (questions.py)."""
        requests = (self.round.outcome or {})["requests"]
        if self.link is None:
            return requests
        return {key: questions.by_link(request, self.link) for key, request in requests.items()}


@dataclass(frozen=True)
class StillRunning:
    round: Round


@dataclass(frozen=True)
class Finished:
    result: dict[str, Any]


@dataclass(frozen=True)
class BecameTask:
    call: ToolCall


Outcome = Asking | StillRunning | Finished | BecameTask
