"""Graphs that exist only to pin down rules of docs/rules.md in tests."""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from typing import Annotated, Any

from langgraph.graph import START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send, interrupt
from pydantic import BaseModel, Field, field_validator
from typing_extensions import TypedDict


class State(TypedDict, total=False):
    answer: Any
    answers: list
    first: Any
    after: Any
    value: Any


def _single(node) -> Any:
    return StateGraph(State).add_node("ask", node).add_edge(START, "ask").compile()


def _parallel(*nodes: tuple[str, Any], state: type = State) -> Any:
    """The nodes side by side, each started at START: their interrupts are pending together."""
    builder = StateGraph(state)
    for name, node in nodes:
        builder.add_node(name, node).add_edge(START, name)
    return builder.compile()


def _boom(state: State) -> State:
    raise ValueError("the agent broke")


boom = _single(_boom)


def _step(state: State) -> State:
    return {"value": "after the breakpoint"}


def _prepare_then_step() -> StateGraph:
    return (
        StateGraph(State)
        .add_node("prepare", lambda s: {"value": "before"})
        .add_node("step", _step)
        .add_edge(START, "prepare")
        .add_edge("prepare", "step")
    )


breakpoint_graph = _prepare_then_step().compile(interrupt_before=["step"])
# The same stop, set after the node before it.
breakpoint_after_graph = _prepare_then_step().compile(interrupt_after=["prepare"])


class Context(TypedDict, total=False):
    tag: str


def _context_echo(state: State, runtime: Runtime[Context]) -> State:
    first = (runtime.context or {}).get("tag")
    interrupt("Continue?")
    return {"first": first, "after": (runtime.context or {}).get("tag")}


context_echo = StateGraph(State, context_schema=Context).add_node("ask", _context_echo).add_edge(START, "ask").compile()


def _read_context(state: State, runtime: Runtime[Context]) -> State:
    return {"first": (runtime.context or {}).get("tag")}


def _ask_then_read_context(state: State, runtime: Runtime[Context]) -> State:
    interrupt("Continue?")
    return {"after": (runtime.context or {}).get("tag")}


# The first run reads its context in a node that ends before the question, so what it saw stays in
# the state after the resume (context_echo's node runs again, and reads the resumed run's context).
context_before_question = (
    StateGraph(State, context_schema=Context)
    .add_node("read", _read_context)
    .add_node("ask", _ask_then_read_context)
    .add_edge(START, "read")
    .add_edge("read", "ask")
    .compile()
)


class Pet(TypedDict):
    name: str
    age: int


@dataclasses.dataclass
class Seats:
    count: int


class Note(BaseModel):
    note: str | None = None
    priority: int = Field(default=1, ge=1, le=5)


typed_typeddict = _single(lambda s: {"answer": interrupt("Describe your pet.", response_schema=Pet)})
typed_dataclass = _single(lambda s: {"answer": dataclasses.asdict(interrupt("How many seats?", response_schema=Seats))})
typed_int = _single(lambda s: {"answer": interrupt("How many replicas?", response_schema=int)})
typed_optional = _single(lambda s: {"answer": interrupt("Any note?", response_schema=Note).model_dump()})
typed_dict_schema = _single(
    lambda s: {
        "answer": interrupt(
            {"question": "Pick a colour"},
            response_schema={"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]},
        )
    }
)
typed_pattern = _single(
    lambda s: {
        "answer": interrupt(
            "Code?",
            response_schema={"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]+$"}}},
        )
    }
)
typed_password = _single(
    lambda s: {
        "answer": interrupt(
            "Log in", response_schema={"type": "object", "properties": {"password": {"type": "string"}}}
        )
    }
)
not_a_question = _single(lambda s: {"answer": interrupt({"what": "no schema"})})
# Text decoded with surrogateescape (a file name of undecodable bytes, say) holds unpaired surrogates.
surrogate_output = _single(lambda s: {"answer": b"caf\xe9.txt".decode("utf-8", "surrogateescape")})


def _relay(key: str, mode: str = "form", url: str | None = None, shape: str = "list", other: Any = dict):
    """A node relaying one request; `other()` gives more keys for the interrupt value."""

    def node(state: State) -> State:
        if shape == "map":
            requests: Any = {
                key: {
                    "message": f"Relayed {key}?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"ok": {"type": "boolean"}},
                        "required": ["ok"],
                    },
                }
            }
        elif mode == "url":
            requests = [{"key": key, "message": "Open this page.", "mode": "url", "url": url}]
        else:
            requests = [
                {
                    "key": key,
                    "message": f"Relayed {key}?",
                    "mode": "form",
                    "requested_schema": {
                        "type": "object",
                        "properties": {"ok": {"type": "boolean"}},
                        "required": ["ok"],
                    },
                }
            ]
        reply = interrupt({"type": "mcp_elicitation", "tool_name": "remote", **other(), "requests": requests})
        return {"answers": [reply["responses"]]}

    return node


class ListState(TypedDict, total=False):
    answers: list


def _collect(a: list, b: list) -> list:
    return (a or []) + (b or [])


class RelayState(TypedDict, total=False):
    answers: __import__("typing").Annotated[list, _collect]


relay_map = _single(_relay("confirm", shape="map"))
relay_twice = _parallel(("one", _relay("confirm")), ("two", _relay("confirm")), state=RelayState)


def _relay_tagged(node: str) -> Any:
    relay = _relay("confirm")

    def tagged(state: RelayState) -> RelayState:
        return {"answers": [{node: responses} for responses in relay(state)["answers"]]}

    return tagged


# relay_twice, with each answer kept under the node that got it.
relay_twice_tagged = _parallel(("one", _relay_tagged("one")), ("two", _relay_tagged("two")), state=RelayState)
# relay_twice, where each interrupt value also carries a key of another kind that is new on every
# run, as a call id would be.
relay_twice_with_fresh_ids = _parallel(
    ("one", _relay("confirm", other=lambda: {"call_id": uuid.uuid4().hex})),
    ("two", _relay("confirm", other=lambda: {"call_id": uuid.uuid4().hex})),
    state=RelayState,
)
relay_bad_url = _single(_relay("login", mode="url", url="http://example.com/login"))
relay_url_with_password = _single(_relay("login", mode="url", url="https://user:pw@example.com/login"))
same_text_twice = _parallel(
    ("one", lambda s: {"answers": [interrupt("Same question?")]}),
    ("two", lambda s: {"answers": [interrupt("Same question?")]}),
    state=RelayState,
)
form_then_url = (
    StateGraph(State)
    .add_node("ask", lambda s: {"first": interrupt("First, your name?")})
    .add_node("login", _relay("login", mode="url", url="https://example.com/oauth"))
    .add_edge(START, "ask")
    .add_edge("ask", "login")
    .compile()
)

# A node that blocks until the test releases it (restart and crash tests), or sleeps (load tests).
_release = threading.Event()


def _slow(state: State) -> State:
    time.sleep(float(state.get("value") or 0.2))
    return {"answer": "slept"}


slow = _single(_slow)


def _report_then_sleep(state: State) -> State:
    """Reports its progress through LangGraph's custom stream writer, then sleeps `value` seconds,
    or less if a test releases it first (`release`)."""
    from langgraph.config import get_stream_writer

    get_stream_writer()({"message": "Half way there"})
    _sleep_until_released(state)
    return {"first": "slept"}


def _sleep_until_released(state: State) -> None:
    import redis
    from django.conf import settings

    broker = redis.Redis.from_url(settings.REDIS_URL)
    deadline = time.monotonic() + float(state.get("value") or 0.2)
    while time.monotonic() < deadline and not broker.lpop(f"hitl-test:release:{state['value']}"):
        time.sleep(0.05)


def _report_twice(state: State) -> State:
    """Reports its progress, sleeps as _report_then_sleep does, reports again and sleeps again."""
    from langgraph.config import get_stream_writer

    for message in ("Half way there", "Nearly there"):
        get_stream_writer()({"message": message})
        _sleep_until_released(state)
    return {"answer": "done"}


reports_twice = _single(_report_twice)


def _report_then_ask(state: State) -> State:
    """Reports its progress, sleeps as _report_then_sleep does, then asks (a task cancelled while
    it sleeps must ask nothing)."""
    from langgraph.config import get_stream_writer

    get_stream_writer()({"message": "Half way there"})
    _sleep_until_released(state)
    return {"answer": interrupt("Still there?")}


report_then_ask = _single(_report_then_ask)


def release(value: object) -> None:
    """Lets the first step of a two_steps run with this `value` go on at once."""
    import redis
    from django.conf import settings

    redis.Redis.from_url(settings.REDIS_URL).rpush(f"hitl-test:release:{value}", 1)


def _after_the_sleep(state: State) -> State:
    _count(f"second-step:{state['value']}")
    return {"after": "ran"}


# Two steps: the first reports progress and sleeps, the second counts that it ran (tasks:
# progress in statusMessage, and a cancelled run that stops before its next step).
two_steps = (
    StateGraph(State)
    .add_node("first", _report_then_sleep)
    .add_node("second", _after_the_sleep)
    .add_edge(START, "first")
    .add_edge("first", "second")
    .compile()
)


# --- paused calls ------------------------------------------------------------------------------------


class Positive(BaseModel):
    count: int = Field(gt=0)


# A Pydantic `gt` publishes exclusiveMinimum, which MCP forms do not allow.
typed_gt = _single(lambda s: {"answer": interrupt("How many?", response_schema=Positive).count})
# The response_schema / the relayed requests / the URL come from the tool arguments, so one graph
# covers every shape a rule names.
typed_from_input = _single(lambda s: {"answer": interrupt("Fill in the form.", response_schema=s["value"])})
relay_from_input = _single(
    lambda s: {"answers": [interrupt({"type": "mcp_elicitation", "tool_name": "remote", "requests": s["value"]})]}
)
relay_url = _single(
    lambda s: {
        "answers": [
            interrupt(
                {
                    "type": "mcp_elicitation",
                    "requests": [{"key": "page", "message": "Open this page.", "mode": "url", "url": s["value"]}],
                }
            )["responses"]
        ]
    }
)
# The same text question in two rounds, one after the other.
same_text_in_sequence = (
    StateGraph(RelayState)
    .add_node("one", lambda s: {"answers": [interrupt("Once more?")]})
    .add_node("two", lambda s: {"answers": [interrupt("Once more?")]})
    .add_edge(START, "one")
    .add_edge("one", "two")
    .compile()
)
# Round 0 asks a question; the run it resumes ends unaskable / at a static breakpoint.
text_then_unaskable = (
    StateGraph(State)
    .add_node("ask", lambda s: {"first": interrupt("First?")})
    .add_node("then", lambda s: {"after": interrupt({"what": "no schema"})})
    .add_edge(START, "ask")
    .add_edge("ask", "then")
    .compile()
)
text_then_breakpoint = (
    StateGraph(State)
    .add_node("ask", lambda s: {"first": interrupt("Ready?")})
    .add_node("step", _step)
    .add_edge(START, "ask")
    .add_edge("ask", "step")
    .compile(interrupt_before=["step"])
)


def _count(counter: str) -> None:
    """A side effect a test can count: one more in Redis under `hitl-test:<counter>`."""
    import redis
    from django.conf import settings

    redis.Redis.from_url(settings.REDIS_URL).incr(f"hitl-test:{counter}")


def _count_resume(state: State) -> State:
    """A side effect after the question: counts how often the agent was resumed."""
    answer = interrupt("Count this?")
    _count(f"resumes:{state['value']}")
    return {"answer": answer}


count_resumes = _single(_count_resume)


def _count_then_go_on(state: State) -> State:
    _count(f"before:{state['value']}")
    return {}


def _ask_then_count(state: State) -> State:
    answer = interrupt("Go on?")
    _count(f"after:{state['value']}")
    return {"answer": answer}


# A side effect in the node before the question, and one after it, each counted under the tool
# arguments' `value`.
effects_around_a_question = (
    StateGraph(State)
    .add_node("before", _count_then_go_on)
    .add_node("ask", _ask_then_count)
    .add_edge(START, "before")
    .add_edge("before", "ask")
    .compile()
)


class Nickname(BaseModel):
    nickname: str

    @field_validator("nickname")
    @classmethod
    def _not_nobody(cls, value: str) -> str:
        # A rule the published JSON schema cannot carry: only LangGraph's validation catches it.
        if value == "nobody":
            raise ValueError("nobody is not a nickname")
        return value


typed_validator = _single(lambda s: {"answer": interrupt("Your nickname?", response_schema=Nickname).nickname})


def _through_adapter(state: State) -> State:
    """Calls the `tool` of the MCP server at `url` through langchain's MCPAdapter, as an agent with an
    MCP tool does: when that tool asks for input, the adapter raises an mcp_elicitation interrupt."""
    import asyncio
    import warnings

    from fastmcp.client.transports import StreamableHttpTransport

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langchain.mcp import MCPAdapter

    target = state["value"]

    async def call() -> Any:
        headers = {"Authorization": f"Bearer {target['token']}"}
        tools = await MCPAdapter(StreamableHttpTransport(target["url"], headers=headers)).list_tools()
        return await next(t for t in tools if t.name == target["tool"]).ainvoke({})

    return {"answer": asyncio.run(call())}


relay_through_adapter = _single(_through_adapter)


class FanOutState(TypedDict, total=False):
    value: int
    answers: __import__("typing").Annotated[list, _collect]


# As many different text questions at once as the tool arguments' `value` says, one Send each.
fan_out_questions = (
    StateGraph(FanOutState)
    .add_node("ask", lambda s: {"answers": [interrupt(f"Question {s['value']}?")]})
    .add_conditional_edges(START, lambda s: [Send("ask", {"value": i}) for i in range(s["value"])], ["ask"])
    .compile()
)
# An interrupt value that is not JSON as it stands: JSON has no NaN.
typed_nan = _single(
    lambda s: {
        "answer": interrupt(
            {"ratio": float("nan")},
            response_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
        )
    }
)


class ContentState(TypedDict, total=False):
    content: Any
    note: Any


# Its output is what it is called with: a `content` of blocks (good or bad, MCP's or LangChain's),
# or anything else a state may hold under that key.
content_echo = StateGraph(ContentState).add_node("echo", lambda state: state).add_edge(START, "echo").compile()


def _mcp_image(state: ContentState) -> ContentState:
    from mcp_types import ImageContent

    return {"content": [ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png")]}


# Blocks given as the mcp SDK's own models.
content_as_mcp_models = StateGraph(ContentState).add_node("draw", _mcp_image).add_edge(START, "draw").compile()


class HeaderParams(TypedDict, total=False):
    """Arguments mirrored in Mcp-Param-* headers: one of each type a header may carry."""

    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]
    replicas: Annotated[int, Field(json_schema_extra={"x-mcp-header": "Replicas"})]
    dry_run: Annotated[bool, Field(json_schema_extra={"x-mcp-header": "Dry-Run"})]
    note: str


# Answers at once with the arguments it got.
param_headers = (
    StateGraph(HeaderParams).add_node("echo", lambda state: {"note": "ran"}).add_edge(START, "echo").compile()
)


def _report_and_sleep(state: State) -> State:
    """Reports twice through LangGraph's custom stream writer, sleeping `value` seconds after each
    (no broker needed: the embedded default runs it too)."""
    from langgraph.config import get_stream_writer

    for message in ("Half way there", "Nearly there"):
        get_stream_writer()({"message": message})
        time.sleep(float(state.get("value") or 0.2))
    return {"answer": "done"}


reports_and_sleeps = _single(_report_and_sleep)


def _log_at_each_level(state: State) -> State:
    """Logs a line at each level, and one through a library's logger (not the graph's own)."""
    import logging

    own = logging.getLogger(__name__)
    own.debug("looking closely")
    own.info("started")
    own.warning("running low")
    own.error("one region failed")
    logging.getLogger("httpx").warning("a library's line")
    return {"answer": "logged"}


logs_at_each_level = _single(_log_at_each_level)


def _ask_then_staff(state: State) -> State:
    """A question for the person, then the action it leads to, for staff to approve."""
    answer = interrupt("Ship it?")
    decision = interrupt({"type": "staff_approval", "tool_calls": [{"name": "ship", "input": {"answer": answer}}]})
    return {"answer": answer, "after": "shipped" if decision.get("approved") is True else "held"}


text_then_staff = _single(_ask_then_staff)
