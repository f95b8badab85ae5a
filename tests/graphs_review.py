"""Agents for the review rules the send_email examples cannot reach: arguments too large to
prefill, calls that allow fewer decisions (respond without reject among them) and have no
description, a per-call schema that refers to a document outside itself, a turn that proposes
send_email beside another call, a turn of two per-call reviews of a tool with a date argument, and
LangChain JS's middleware, whose batched review is spelled in camelCase."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool, tool
from langgraph.graph import START, StateGraph
from langgraph.types import interrupt
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from example_agents.send_email import send_email

# Over review.MAX_PREFILL_BYTES once written as JSON.
BIG_TEXT = "x" * (20 * 1024)
# Nothing should ever ask this address for the schema: the test listens there and counts requests.
SCHEMA_PORT = 38917
TICKET_SCHEMA_URL = f"http://127.0.0.1:{SCHEMA_PORT}/ticket.json"


class Proposes(BaseChatModel):
    """A model that proposes one call of `tool_name` with `args` (and, in the same turn, a call
    of each tool in `also` with its arguments), then answers "Done: " and the tool results. It
    decides from the conversation alone, so a rerun proposes the same calls."""

    tool_name: str
    args: dict[str, Any]
    also: dict[str, dict[str, Any]] = {}

    @property
    def _llm_type(self) -> str:
        return "proposes"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        results = [m.text for m in messages if isinstance(m, ToolMessage)]
        if results:
            reply = AIMessage(content="Done: " + "; ".join(results))
        else:
            calls = [(self.tool_name, self.args), *self.also.items()]
            reply = AIMessage(
                content="",
                tool_calls=[
                    {"type": "tool_call", "id": f"call_{n}", "name": name, "args": args}
                    for n, (name, args) in enumerate(calls, start=1)
                ],
            )
        return ChatResult(generations=[ChatGeneration(message=reply)])


class ChangesOnRerun(Proposes):
    """Proposes as Proposes does on a conversation's first run; on every later run from the start
    (MCPAdapter's rerun), proposes `rerun_args` instead, or no call at all when it is None, as a
    model that is not deterministic may. Runs are counted in Redis under the user's message."""

    rerun_args: dict[str, Any] | None

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        if any(isinstance(m, ToolMessage) for m in messages) or self._run_number(messages) == 1:
            return super()._generate(messages, stop, run_manager, **kwargs)
        if self.rerun_args is None:
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content="Nothing to send after all."))])
        again = Proposes(tool_name=self.tool_name, args=self.rerun_args)
        return again._generate(messages, stop, run_manager, **kwargs)

    @staticmethod
    def _run_number(messages: list[BaseMessage]) -> int:
        import redis
        from django.conf import settings

        return int(redis.Redis.from_url(settings.REDIS_URL).incr(f"hitl-test:runs:{messages[0].text}"))


@tool
def publish(text: str) -> str:
    """Publish a text."""
    return f"published {len(text)} characters"


def _lookup(**kwargs: Any) -> str:
    return f"looked up {kwargs.get('ticket')}"


# A JSON-schema tool whose argument type lives in another document.
lookup = StructuredTool.from_function(
    _lookup,
    name="lookup",
    description="Look up a ticket.",
    args_schema={
        "type": "object",
        "properties": {"ticket": {"$ref": TICKET_SCHEMA_URL}},
        "required": ["ticket"],
    },
)


class Label(BaseModel):
    # Pydantic's regex engine reads \p{L} (any letter); Python's re module cannot compile it.
    label: str = Field(pattern=r"^\p{L}+$")


@tool(args_schema=Label)
def tag(label: str) -> str:
    """Tag the ticket with a label."""
    return f"tagged {label}"


@tool
def book(room: str, start: datetime) -> str:
    """Book a room."""
    return f"booked {room} at {start.isoformat()}"


def _agent(chosen_tool, args: dict[str, Any], review: Any, mode: str):
    return create_agent(
        model=Proposes(tool_name=chosen_tool.name, args=args),
        tools=[chosen_tool],
        middleware=[HumanInTheLoopMiddleware(interrupt_on={chosen_tool.name: review}, interrupt_mode=mode)],
    )


APPROVE_ONLY = {"allowed_decisions": ["approve"], "description": ""}
APPROVE_OR_RESPOND = {"allowed_decisions": ["approve", "respond"], "description": ""}

big_args = _agent(publish, {"text": BIG_TEXT}, True, "batched")
big_args_per_call = _agent(publish, {"text": BIG_TEXT}, True, "per_call")
big_args_edit_only = _agent(publish, {"text": BIG_TEXT}, {"allowed_decisions": ["edit"]}, "batched")
big_args_edit_only_per_call = _agent(publish, {"text": BIG_TEXT}, {"allowed_decisions": ["edit"]}, "per_call")
approve_only = _agent(publish, {"text": "hello"}, APPROVE_ONLY, "batched")
approve_only_per_call = _agent(publish, {"text": "hello"}, APPROVE_ONLY, "per_call")
approve_or_respond = _agent(publish, {"text": "hello"}, APPROVE_OR_RESPOND, "batched")
approve_or_respond_per_call = _agent(publish, {"text": "hello"}, APPROVE_OR_RESPOND, "per_call")
remote_ref_per_call = _agent(lookup, {"ticket": "T-1"}, True, "per_call")
letters_only_per_call = _agent(tag, {"label": "Ada"}, True, "per_call")
# Two calls of book in one turn: per call, each is its own interrupt, and both are asked in one round.
two_bookings_per_call = create_agent(
    model=Proposes(
        tool_name="book",
        args={"room": "Ada", "start": "2026-12-01T10:00:00Z"},
        also={"book": {"room": "Babbage", "start": "2026-12-01T11:00:00Z"}},
    ),
    tools=[book],
    middleware=[HumanInTheLoopMiddleware(interrupt_on={"book": True}, interrupt_mode="per_call")],
)

# What the send_email agent proposes.
EMAIL_ARGS = {"to": "ada@example.com", "subject": "Launch"}

# send_email as the send_email agent proposes it, beside a call of another tool in the same turn.
email_and_publish = create_agent(
    model=Proposes(tool_name="send_email", args=EMAIL_ARGS, also={"publish": {"text": "hello"}}),
    tools=[send_email, publish],
    middleware=[HumanInTheLoopMiddleware(interrupt_on={"send_email": True, "publish": True})],
)


# send_email as the send_email agent proposes it on the first run; the next run from the start
# proposes other arguments, or nothing.
other_args_on_rerun = create_agent(
    model=ChangesOnRerun(tool_name="send_email", args=EMAIL_ARGS, rerun_args={**EMAIL_ARGS, "subject": "Relaunch"}),
    tools=[send_email],
    middleware=[HumanInTheLoopMiddleware(interrupt_on={"send_email": True})],
)
nothing_on_rerun = create_agent(
    model=ChangesOnRerun(tool_name="send_email", args=EMAIL_ARGS, rerun_args=None),
    tools=[send_email],
    middleware=[HumanInTheLoopMiddleware(interrupt_on={"send_email": True})],
)


# What LangChain JS's humanInTheLoopMiddleware({interruptOn: {send_email: true}}) pauses with, in
# batched mode, for the call the send_email agent proposes (libs/langchain/src/agents/middleware/
# hitl.ts: createActionAndConfig writes the default description with JSON.stringify(args, null, 2),
# and `true` allows approve, edit and reject). This service hosts Python graphs: a Python graph
# that raises the same value stands in for the JavaScript agent.
JS_EMAIL_ARGS = {"to": "ada@example.com", "subject": "Launch"}
JS_BATCHED_REVIEW = {
    "actionRequests": [
        {
            "name": "send_email",
            "args": JS_EMAIL_ARGS,
            "description": "Tool execution requires approval\n\nTool: send_email\nArgs: "
            + json.dumps(JS_EMAIL_ARGS, indent=2),
        }
    ],
    "reviewConfigs": [{"actionName": "send_email", "allowedDecisions": ["approve", "edit", "reject"]}],
}


class Resumed(TypedDict, total=False):
    resumed_with: Any


def _js_batched(state: Resumed) -> Resumed:
    # The tool's result is the value the middleware would have been resumed with.
    return {"resumed_with": interrupt(JS_BATCHED_REVIEW)}


js_batched = StateGraph(Resumed).add_node("review", _js_batched).add_edge(START, "review").compile()
