"""The MCP methods this server answers: a table of one small function each, and the wait of a
tools/call for its run."""

from __future__ import annotations

import time
from typing import Any

from mcp_types import LOG_LEVEL_META_KEY

from graph_runtime.registry import registry
from mcp_gateway import limits
from mcp_gateway.auth import Caller
from mcp_gateway.calls import request_state, tool_calls, waiter
from mcp_gateway.db_threads import in_db_thread
from mcp_gateway.models import Round, Session
from mcp_gateway.protocol import (
    INVALID_PARAMS,
    MODERN,
    Message,
    RpcError,
    invalid_request_state,
    negotiated_legacy_version,
    server_info,
)
from mcp_gateway.wires.mcp_tasks import mcp_task_handles, mcp_task_listen, mcp_task_methods
from mcp_gateway.wires.sessions import call_streams, older_tasks, sessions

INSTRUCTIONS = (
    "Each tool runs a LangGraph agent. When an agent needs a person, the call returns "
    "input_required with elicitation requests; answer them and call the tool again."
)


def tool_descriptors() -> list[dict[str, Any]]:
    return [
        {"name": g.name, "description": g.description, "inputSchema": g.input_schema}
        | ({"outputSchema": g.output_schema} if g.output_schema is not None else {})
        for g in registry().values()
    ]


def discover(message: Message) -> dict[str, Any]:
    return {
        "supportedVersions": [MODERN],
        # The MCP Tasks extension: a client that declares it on a request may get a task back.
        "capabilities": {"tools": {"listChanged": False}, "extensions": {mcp_task_handles.EXTENSION: {}}},
        "instructions": INSTRUCTIONS,
        "ttlMs": 0,
        "cacheScope": "private",
    }


def initialize(message: Message) -> dict[str, Any]:
    version = negotiated_legacy_version(message.params.get("protocolVersion"))
    capabilities: dict[str, Any] = {"tools": {"listChanged": False}}
    if older_tasks.served(version):
        capabilities["tasks"] = older_tasks.capability()
    return {
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS,
    }


def list_tools(message: Message) -> dict[str, Any]:
    # Tools are per deployment, not per caller, but lists are never shared between callers.
    tools = tool_descriptors()
    if older_tasks.served(message.version):
        graphs = registry()
        tools = [{**t, "execution": {"taskSupport": older_tasks.task_support(graphs[t["name"]])}} for t in tools]
    return {"tools": tools, "ttlMs": 0, "cacheScope": "private"}


def _tool_request(message: Message, caller: Caller, session: Session | None) -> tool_calls.ToolRequest:
    params = message.params
    context = params.get("context")
    if context is not None and not isinstance(context, dict):
        raise RpcError(INVALID_PARAMS, "context must be an object")
    responses = params.get("inputResponses") if message.modern else None
    state = params.get("requestState") if message.modern else None
    # Before anything is stored or resumed: answers within their limits, and no text PostgreSQL
    # cannot store in the JSON columns that keep arguments, context and answers.
    limits.check_input_responses(responses)
    limits.check_stored_values(arguments=params.get("arguments"), context=context, inputResponses=responses)
    on_stream = sessions.asks_on_stream(session)
    return tool_calls.ToolRequest(
        idempotency_key=_idempotency_key(params),
        caller=caller,
        name=params["name"],
        arguments=params.get("arguments") or {},
        context=context,
        responses=responses if isinstance(responses, dict) else None,
        # JSON null counts as absent.
        request_state=state,
        modern=message.modern,
        # An older revision declares its capabilities once, in its session's initialize.
        capabilities=session.capabilities if on_stream and session is not None else message.client_capabilities,
        session=session if on_stream else None,
        # The 2025-11-25 tasks utility: whether this call asked to be a task (None: it cannot).
        as_task=isinstance(params.get("task"), dict) if older_tasks.served(message.version) else None,
        log_level=log_level(message) or "",
    )


def progress_token(message: Message) -> str | int | None:
    meta = message.params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if isinstance(token, (str, int)) and not isinstance(token, bool) else None


def log_level(message: Message) -> str | None:
    """The level a 2026-07-28 request asked to hear log lines at (validate_params checked it)."""
    meta = message.params.get("_meta")
    level = meta.get(LOG_LEVEL_META_KEY) if message.modern and isinstance(meta, dict) else None
    return level if isinstance(level, str) else None


def _idempotency_key(params: dict[str, Any]) -> str | None:
    meta = params.get("_meta")
    key = meta.get(tool_calls.IDEMPOTENCY_KEY) if isinstance(meta, dict) else None
    if key is None or params.get("requestState") is not None:
        return None  # only a first call starts a call
    if not isinstance(key, str) or not 1 <= len(key) <= 255 or "\x00" in key:
        raise RpcError(INVALID_PARAMS, f"_meta[{tool_calls.IDEMPOTENCY_KEY!r}] must be a string of 1 to 255 characters")
    return key


METHODS = {"server/discover": discover, "initialize": initialize, "tools/list": list_tools}


Started = dict[str, Any] | tool_calls.Waiting | mcp_task_listen.Listening | call_streams.Streaming


def start(message: Message, caller: Caller, session: Session | None = None) -> Started:
    """Answer the request, start its tool call, or accept its listen stream: runs in a database
    thread, with the caller's authentication in the same hop (views.py). `session`: an older
    client's, when the request named one."""
    if message.method == "tools/call":
        req = _tool_request(message, caller, session)
        if req.on_stream:
            call_streams.check_capacity(caller)
        step = tool_calls.begin(req)
        if isinstance(step, tool_calls.Waiting):
            if req.session is not None and (token := progress_token(message)) is not None:
                # Progress goes on the call's stream: it starts now, while the graph runs.
                return call_streams.open_stream(
                    req.session, message.id, caller, step.round.call_id, progress_token=token
                )
            return step
        if req.as_task and step.get("resultType") == "task":
            if req.session is not None and (token := progress_token(message)) is not None:
                # 2025-11-25: the token stays valid for the task's life; its tasks/result stream uses it.
                older_tasks.keep_progress_token(step["taskId"], token)
            return older_tasks.created(step)
        return on_stream(message, req, step)
    if message.method == mcp_task_listen.METHOD:
        return mcp_task_listen.listen(message, caller)
    if not message.modern and (older_task_method := older_tasks.METHODS.get(message.method)) is not None:
        answer = older_task_method(message, caller, session)
        if not isinstance(answer, older_tasks.ResultStream):
            return answer
        assert session is not None  # older_tasks.result asks for one
        return call_streams.open_stream(
            session, message.id, caller, answer.call_id, for_task=True, progress_token=answer.progress_token
        )
    if (task_method := mcp_task_methods.METHODS.get(message.method)) is not None:
        return task_method(message, caller)
    handler = METHODS.get(message.method)
    return handler(message) if handler else {}


def on_stream(
    message: Message, req: tool_calls.ToolRequest, reply: dict[str, Any]
) -> dict[str, Any] | call_streams.Streaming:
    """An older client asked on its stream gets the call's stream for a round of questions (or a
    run still going), and the reply itself otherwise."""
    if req.session is None or reply.get("resultType") != "input_required":
        return reply
    round_id = request_state.id_of(reply.get("requestState"))
    call_id = Round.objects.filter(pk=round_id).values_list("call_id", flat=True).first() if round_id else None
    if call_id is None:
        raise invalid_request_state()  # removed meanwhile
    return call_streams.open_stream(req.session, message.id, req.caller, call_id)


async def reply_after_run(
    waiting: tool_calls.Waiting, message: Message, *, moved: waiter.Moved | None = None
) -> dict[str, Any] | call_streams.Streaming:
    """Wait for the run without holding a thread, then answer as the round it stopped at says.
    `moved`: what a wait for the round that the caller made already ended with."""
    step: dict[str, Any] | tool_calls.Waiting = waiting
    while isinstance(step, tool_calls.Waiting):
        req = step.req
        if moved is None:
            remaining = max(0.0, req.deadline - time.monotonic())
            moved = await waiter.wait_for(step.round.id, remaining, since=req.received_at)
        recorded = moved if isinstance(moved, dict) else None
        # The common answers need only the record the notification carried: no hop to a thread.
        if recorded is not None and (reply := tool_calls.reply_from_record(step, recorded)) is not None:
            return reply
        step = await in_db_thread(tool_calls.after_wait)(step, timed_out=moved is False, recorded=recorded)
        moved = None
    if waiting.req.session is not None and step.get("resultType") == "input_required":
        return await in_db_thread(on_stream)(message, waiting.req, step)
    return step
