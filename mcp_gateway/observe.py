"""What an operator sees of the gateway's work: each MCP request's span and count, each round's
run span, the phases of a round's time (metrics.ROUND_SECONDS) and what log lines are about.

    request ──► views (observed: the span, hitl_requests_total, the "back" phase at the response)
      parsed ──► request_parsed: the span starts, continuing the client's trace (`_meta.traceparent`,
                 else the HTTP traceparent header); the caller goes into the log context
      call found ──► call_known (a round's answer, or a Tasks extension request naming the call's
                 task): the call, round and tool into the log context; a link to the call's first
                 round. A request that brings no trace of its own starts its span here instead, in
                 the call's trace: one call, one trace
      round committed ──► round_enqueued: the "web" phase; the Celery task carries the trace on
    worker ──► running_round: the "queue" and "run" phases, the run's span, hitl_rounds_total
    another app's resume of a handed-over call (handover.resume_running) ──► resume_running: its
               task's span, a child of the staff request that decided, links to the first round

`/mcp/` is served without Django's middleware (hitl_project/asgi.py), so the Django
instrumentation never sees it: its span is opened here. The span starts in a database thread, once
the body is parsed, with the request's arrival as its start time; asgiref copies the context
variables of that thread back to the view, so the span stays current for the rest of the request
and every enqueue it makes. All of it costs nothing measurable when tracing is off: the API's
tracer is a no-op then.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.utils import timezone
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Link, Span, SpanKind, StatusCode

from graph_runtime import log_context
from mcp_gateway.metrics import REQUESTS, ROUND_SECONDS, ROUNDS, TOOL_CALLS
from mcp_gateway.models import Round, ToolCall
from mcp_gateway.protocol import MODERN_METHODS, OLDER_METHODS, RESOURCE_METHODS, TASK_METHODS

tracer = trace.get_tracer("mcp_gateway")

# The methods counted by name (those served, and the one notification); any other is counted as
# "other", so a client cannot add label values.
METHODS = MODERN_METHODS | OLDER_METHODS | TASK_METHODS | RESOURCE_METHODS | {"notifications/initialized"}
_CARRIER_KEYS = ("traceparent", "tracestate")
_MAX_NAME = 128


@dataclass
class _Request:
    arrived_ns: int
    method: str = "none"
    # A registered tool's name, once the request's call is known (never the client's word for it).
    tool: str | None = None
    span: Span | None = None
    # The span's name and attributes while its start waits for the call's trace (call_known).
    deferred: tuple[str, dict[str, Any]] | None = None
    # The end of the run this request's answer reports, when the request waited for it.
    reported_end: datetime | None = None


_request: ContextVar[_Request | None] = ContextVar("hitl_mcp_request", default=None)


def observed(
    view: Callable[[HttpRequest], Coroutine[Any, Any, HttpResponseBase]],
) -> Callable[[HttpRequest], Coroutine[Any, Any, HttpResponseBase]]:
    """The MCP view, counted and traced."""

    @functools.wraps(view)
    async def wrapper(request: HttpRequest) -> HttpResponseBase:
        seen = _Request(arrived_ns=time.time_ns())
        _request.set(seen)
        log_context.clear()
        status = 500
        try:
            response = await view(request)
            status = response.status_code
            return response
        except asyncio.CancelledError:
            status = 499  # the client went away while the request waited (nginx's word for it)
            raise
        finally:
            _respond(seen, status)

    return wrapper


def _respond(seen: _Request, status: int) -> None:
    REQUESTS.labels(seen.method, str(status)).inc()
    if seen.reported_end is not None and seen.tool is not None:
        back = time.time() - seen.reported_end.timestamp()
        ROUND_SECONDS.labels(seen.tool, "back").observe(max(0.0, back))
    span = seen.span
    if span is None and seen.deferred is not None:
        # An answer whose call was never found (an invalid requestState): a trace of its own.
        span = _start(seen, None)
    if span is None:
        # Refused before its body was read (401, 413, ...): a span of its own, so failures show too.
        span = tracer.start_span("mcp request", kind=SpanKind.SERVER, start_time=seen.arrived_ns)
    span.set_attribute("http.response.status_code", status)
    if status >= 500:
        span.set_status(StatusCode.ERROR)
    span.end()


def request_parsed(message: Any, headers: dict[str, str], caller: str) -> None:
    """The request's JSON-RPC message is known: start its span, continuing the client's trace."""
    log_context.about(caller=caller)
    seen = _request.get()
    if seen is None:
        return
    params = message.params if isinstance(message.params, dict) else {}
    seen.method = message.method if message.method in METHODS else "other"
    # What the client sent, cut short: a span name or attribute must not carry a body's worth.
    name = params.get("name") if message.method == "tools/call" else None
    name = name[:_MAX_NAME] if isinstance(name, str) else None
    attributes: dict[str, Any] = {"mcp.method.name": seen.method, "mcp.protocol.version": message.version}
    if message.id is not None:
        attributes["jsonrpc.request.id"] = str(message.id)[:_MAX_NAME]
    if name is not None:
        attributes |= {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    seen.deferred = (f"{seen.method} {name}" if name is not None else seen.method, attributes)
    client = _client_context(params.get("_meta"), headers)
    if client is None and _names_a_call(message.method, params):
        # An answer to a round, or a request about a task, in no trace of its client's: it belongs
        # in its call's, which only the round or the task it names knows (call_known starts it).
        return
    _start(seen, client)


def _names_a_call(method: str, params: dict[str, Any]) -> bool:
    """Whether the request is about a call it names: a tools/call's requestState, a Tasks
    extension method's taskId, or the tasks a subscriptions/listen watches."""
    if method == "tools/call":
        return isinstance(params.get("name"), str) and params.get("requestState") is not None
    if method in TASK_METHODS:
        return isinstance(params.get("taskId"), str)
    if method == "subscriptions/listen":
        notifications = params.get("notifications")
        return isinstance(notifications, dict) and bool(notifications.get("taskIds"))
    return False


def _start(seen: _Request, parent: otel_context.Context | None) -> Span:
    assert seen.deferred is not None
    name, attributes = seen.deferred
    span = tracer.start_span(
        name, kind=SpanKind.SERVER, context=parent, start_time=seen.arrived_ns, attributes=attributes
    )
    seen.span, seen.deferred = span, None
    # Made current in this thread's copy of the request's context, which asgiref copies back.
    otel_context.attach(trace.set_span_in_context(span))
    return span


def _client_context(meta: Any, headers: dict[str, str]) -> otel_context.Context | None:
    """The trace a client's request belongs to: W3C trace context in `_meta` (MCP 2026-07-28),
    else in the HTTP headers; None (a new trace) for none, or for one that does not parse."""
    for carrier in (meta, headers):
        if not isinstance(carrier, dict):
            continue
        values = {k: v for k in _CARRIER_KEYS if isinstance(v := carrier.get(k), str) and len(v) <= 512}
        if "traceparent" not in values:
            continue
        context = propagate.extract(values)
        if trace.get_current_span(context).get_span_context().is_valid:
            return context
    return None


def traceparent() -> str:
    """The current span's W3C traceparent, kept on a new call for its later rounds to link to."""
    carrier: dict[str, str] = {}
    if trace.get_current_span().get_span_context().is_valid:
        propagate.inject(carrier)
    return carrier.get("traceparent", "")[:55]


def _first_round(call: ToolCall) -> otel_context.Context | None:
    """The context of the call's first request span, when traces were on for it."""
    if not call.traceparent:
        return None
    context = propagate.extract({"traceparent": call.traceparent})
    return context if trace.get_current_span(context).get_span_context().is_valid else None


def _first_round_link(call: ToolCall) -> list[Link]:
    first = _first_round(call)
    return [Link(trace.get_current_span(first).get_span_context(), {"hitl.link": "first round"})] if first else []


def call_known(call: ToolCall, round_number: int | None) -> None:
    """The request is about this call (this round of it; None for a request about its task): a
    request after the call's first links its span to the first's, and one that brought no trace
    of its own is a child of it."""
    log_context.about(call_id=str(call.id), round=round_number, tool=call.tool_name)
    seen = _request.get()
    if seen is None:
        return
    if seen.span is None and seen.deferred is not None:
        _start(seen, _first_round(call))
    if seen.span is None:
        return
    seen.tool = call.tool_name
    seen.span.set_attribute("hitl.call.id", str(call.id))
    if round_number is not None:
        seen.span.set_attribute("hitl.round.number", round_number)
    _link_to_first_round(seen.span, call)


def tasks_known(calls: list[ToolCall]) -> None:
    """The request watches these calls' tasks (subscriptions/listen): one call's is as any request
    about it (call_known); several are a trace of their own, linked to each call's first round."""
    if len(calls) == 1:
        call_known(calls[0], None)
        return
    seen = _request.get()
    if seen is None or not calls:
        return
    if seen.span is None and seen.deferred is not None:
        _start(seen, None)
    if seen.span is not None:
        for call in calls:
            _link_to_first_round(seen.span, call)


def resume_running(call_id: Any) -> None:
    """Another app's resume of a handed-over call runs in the current span (its worker task's, a
    child of the staff request that decided): the span links to the call's first round. Nothing is
    read when tracing is off."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    call = ToolCall.objects.filter(pk=call_id).only("id", "traceparent").first()
    if call is not None:
        span.set_attribute("hitl.call.id", str(call.id))
        _link_to_first_round(span, call)


def _link_to_first_round(span: Span, call: ToolCall) -> None:
    if call.traceparent != traceparent():  # not the first round's own span
        for link in _first_round_link(call):
            span.add_link(link.context, link.attributes)


def round_enqueued(call: ToolCall) -> None:
    """A round this request created, to run: its "web" phase ends when it commits."""
    seen = _request.get()
    if seen is not None:
        arrived = seen.arrived_ns / 1e9
        transaction.on_commit(lambda: ROUND_SECONDS.labels(call.tool_name, "web").observe(time.time() - arrived))


def round_reported(round_: Round) -> None:
    """The request answers with where this round's run ended: its "back" phase, from that end to the
    response, if the run ended while the request waited."""
    seen = _request.get()
    if seen is None or round_.finished_at is None:
        return
    if round_.finished_at.timestamp() * 1e9 >= seen.arrived_ns:
        seen.reported_end, seen.tool = round_.finished_at, round_.call.tool_name


@contextmanager
def running_round(round_: Round, *, first_attempt: bool) -> Iterator[None]:
    """A worker runs the round: its log context, its span (a child of the task's, so of the request
    that enqueued it, and linked to the call's first round), its phases and its outcome."""
    call = round_.call
    tool = call.tool_name
    log_context.clear()
    log_context.about(call_id=str(call.id), round=round_.number, tool=tool, caller=call.caller, graph=call.graph)
    if first_attempt:
        ROUND_SECONDS.labels(tool, "queue").observe(max(0.0, (timezone.now() - round_.created_at).total_seconds()))
    attributes: dict[str, Any] = {
        "hitl.call.id": str(call.id),
        "hitl.round.number": round_.number,
        "gen_ai.tool.name": tool,
    }
    started = time.monotonic()
    with tracer.start_as_current_span(
        f"run round {tool}", attributes=attributes, links=_first_round_link(call) if round_.number else []
    ) as span:
        try:
            yield
        except BaseException:
            ROUNDS.labels(tool, "infrastructure_error").inc()
            raise
        ROUND_SECONDS.labels(tool, "run").observe(time.monotonic() - started)
        if (outcome := _outcome(round_)) is not None:
            span.set_attribute("hitl.round.outcome", outcome)
            ROUNDS.labels(tool, outcome).inc()
            if round_.state == Round.State.FINISHED:
                TOOL_CALLS.labels(tool, outcome).inc()


def _outcome(round_: Round) -> str | None:
    """Where a run that this worker recorded stopped; None when another run recorded the round."""
    outcome: dict[str, Any] = round_.outcome or {}  # type: ignore[assignment]  # a TypedDict union
    if round_.state == Round.State.RUNNING:
        return None
    if "rejected" in outcome:
        return "rejected"
    if round_.state == Round.State.ASKING:
        return "questions"
    if round_.call.status == ToolCall.Status.AWAITING_STAFF:
        return "handed_over"
    if outcome.get("kind") == "breakpoint":
        return "breakpoint"
    return "error" if outcome.get("result", {}).get("isError") else "success"
