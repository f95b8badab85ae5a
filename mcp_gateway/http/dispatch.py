"""The MCP methods this server answers: a table of one small function each; a tools/call goes to the
state machine (calls/tool_calls.py) and its outcome to the request's wire to render
(wires/rounds/replies.py for 2026-07-28, wires/sessions/replies.py for older revisions)."""

from __future__ import annotations

from typing import Any

from graph_runtime.registry import registry
from mcp_gateway import limits
from mcp_gateway.auth import Caller
from mcp_gateway.calls import links, tool_calls
from mcp_gateway.calls.outcomes import Outcome
from mcp_gateway.models import Session
from mcp_gateway.protocol import INVALID_PARAMS, MODERN, Message, RpcError, negotiated_older_version, server_info
from mcp_gateway.wires.apps import answer_app
from mcp_gateway.wires.mcp_tasks import mcp_task_handles, mcp_task_listen, mcp_task_methods
from mcp_gateway.wires.rounds import call_notifications
from mcp_gateway.wires.rounds import replies as rounds
from mcp_gateway.wires.sessions import call_streams, older_tasks
from mcp_gateway.wires.sessions import replies as older

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


def _apps(capabilities: dict[str, Any]) -> dict[str, Any]:
    """With answer pages on, the answer App's resource and the MCP Apps extension (wires/apps/)."""
    if not links.available():
        return capabilities
    extensions = {**capabilities.get("extensions", {}), answer_app.EXTENSION: {"mimeTypes": [answer_app.MIME_TYPE]}}
    return {**capabilities, "resources": {"listChanged": False}, "extensions": extensions}


def discover(message: Message, session: Session | None) -> dict[str, Any]:
    return {
        "supportedVersions": [MODERN],
        # The MCP Tasks extension: a client that declares it on a request may get a task back.
        "capabilities": _apps({"tools": {"listChanged": False}, "extensions": {mcp_task_handles.EXTENSION: {}}}),
        "instructions": INSTRUCTIONS,
        "ttlMs": 0,
        "cacheScope": "private",
    }


def initialize(message: Message, session: Session | None) -> dict[str, Any]:
    version = negotiated_older_version(message.params.get("protocolVersion"))
    capabilities: dict[str, Any] = {"tools": {"listChanged": False}}
    if older_tasks.served(version):
        capabilities["tasks"] = older_tasks.capability()
    return {
        "protocolVersion": version,
        "capabilities": _apps(capabilities),
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS,
    }


def list_tools(message: Message, session: Session | None) -> dict[str, Any]:
    # Tools are per deployment, not per caller, but lists are never shared between callers.
    tools = tool_descriptors()
    if older_tasks.served(message.version):
        graphs = registry()
        tools = [{**t, "execution": {"taskSupport": older_tasks.task_support(graphs[t["name"]])}} for t in tools]
    if links.available():
        tools.append(links.status_descriptor())
    if answer_app.served(_client_capabilities(message, session)):
        tools = answer_app.with_app(tools)
    return {"tools": tools, "ttlMs": 0, "cacheScope": "private"}


def _client_capabilities(message: Message, session: Session | None) -> dict[str, Any]:
    """What the client declared: on the request at 2026-07-28, in its session's initialize before."""
    if message.modern or session is None:
        return message.client_capabilities
    return session.capabilities if isinstance(session.capabilities, dict) else {}


def list_resources(message: Message, session: Session | None) -> dict[str, Any]:
    return answer_app.list_resources()


def read_resource(message: Message, session: Session | None) -> dict[str, Any]:
    return answer_app.read_resource(message.params.get("uri"))


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
    return tool_calls.ToolRequest(
        idempotency_key=_idempotency_key(params),
        caller=caller,
        name=params["name"],
        arguments=params.get("arguments") or {},
        context=context,
        responses=responses if isinstance(responses, dict) else None,
        # JSON null counts as absent.
        request_state=state,
        client=rounds.client(message) if message.modern else older.client(message, session),
        log_level=message.log_level or "",
    )


def _idempotency_key(params: dict[str, Any]) -> str | None:
    meta = params.get("_meta")
    key = meta.get(tool_calls.IDEMPOTENCY_KEY) if isinstance(meta, dict) else None
    if key is None or params.get("requestState") is not None:
        return None  # only a first call starts a call
    if not isinstance(key, str) or not 1 <= len(key) <= 255 or "\x00" in key:
        raise RpcError(INVALID_PARAMS, f"_meta[{tool_calls.IDEMPOTENCY_KEY!r}] must be a string of 1 to 255 characters")
    return key


METHODS = {
    "server/discover": discover,
    "initialize": initialize,
    "tools/list": list_tools,
    # Served with MCP_ANSWER_PAGES=on only (protocol.validate_params refuses them otherwise).
    "resources/list": list_resources,
    "resources/read": read_resource,
}


Started = dict[str, Any] | tool_calls.Waiting | mcp_task_listen.Listening | call_streams.Streaming


def start(message: Message, caller: Caller, session: Session | None = None) -> Started:
    """Answer the request, start its tool call, or accept its listen stream: runs in a database
    thread, with the caller's authentication in the same hop (views.py). `session`: an older
    client's, when the request named one."""
    if message.method == "tools/call":
        req = _tool_request(message, caller, session)
        if req.client.on_stream:
            call_streams.check_capacity(caller)
        step = tool_calls.begin(req)
        if not isinstance(step, tool_calls.Waiting):
            return render(message, req, session, step)
        if session is not None and step.req.client.on_stream and (token := message.progress_token) is not None:
            # Progress goes on the call's stream: it starts now, while the graph runs.
            return call_streams.open_stream(session, message.id, caller, step.round.call_id, progress_token=token)
        return step
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
    return handler(message, session) if handler else {}


def render(
    message: Message, req: tool_calls.ToolRequest, session: Session | None, outcome: Outcome
) -> dict[str, Any] | call_streams.Streaming:
    """The outcome as the request's wire answers it."""
    if message.modern:
        return rounds.reply(outcome)
    return older.reply(message, req.caller, session if req.client.on_stream else None, outcome)


async def reply_after_run(
    waiting: tool_calls.Waiting, message: Message, session: Session | None, *, can_stream: bool
) -> dict[str, Any] | call_streams.Streaming | call_notifications.Notifying:
    """Wait for the run without holding a thread, then answer as the round it stopped at says, in
    the request's wire."""
    if message.modern:
        return await call_notifications.reply_after_run(waiting, message, can_stream=can_stream)
    return await older.reply_after_run(waiting, message, session if waiting.req.client.on_stream else None)
