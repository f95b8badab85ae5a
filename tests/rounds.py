"""Helpers for the paused-call tests: one round of a tool call over raw HTTP, what the database
holds about a call, an SDK client session that declares form elicitation only, and an agent that
calls a tool through langchain's MCPAdapter."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import httpx2
import mcp_types as types
from mcp.client._input_required import run_input_required_driver
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.clients import MODERN, Raw, run

CHECKPOINT_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
UNASKABLE = "This tool needs input that can't be asked over MCP"
INVALID_STATE = {
    "code": -32602,
    "message": "Invalid or expired requestState",
    "data": {"reason": "invalid_request_state"},
}


def result_of(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body = response.json()
    assert "result" in body, body
    return body["result"]


def error_of(response: httpx.Response, status: int = 400) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert "error" in body, body
    return body["error"]


def asked(raw: Raw, name: str, arguments: dict | None = None, **params: Any) -> dict[str, Any]:
    """Call the tool and expect a round of questions."""
    result = result_of(raw.call(name, arguments, **params))
    assert result["resultType"] == "input_required", result
    return result


def answer(raw: Raw, name: str, arguments: dict | None, round_: dict, responses: dict, **params: Any) -> httpx.Response:
    """Call the tool again with the answers to `round_` and its requestState."""
    return raw.call(name, arguments, inputResponses=responses, requestState=round_["requestState"], **params)


def until_run_ends(raw: Raw, name: str, arguments: dict | None, result: dict[str, Any], timeout: float = 120) -> dict:
    """Come back with the requestState of a result that says only "still running", as a client does,
    until the run has asked its questions or ended (`timeout` seconds at most)."""
    deadline = time.monotonic() + timeout
    while "requestState" in result and "inputRequests" not in result and time.monotonic() < deadline:
        result = result_of(raw.call(name, arguments, requestState=result["requestState"]))
    return result


def only_key(round_: dict[str, Any]) -> str:
    (key,) = round_["inputRequests"]
    return key


def input_response_accepting(**content: Any) -> dict[str, Any]:
    """An inputResponses entry, as sent on the wire, that accepts a form with `content`."""
    return {"action": "accept", "content": content}


def text_of(result: dict[str, Any]) -> str:
    return result["content"][0]["text"]


def call_of(request_state: str):
    """The ToolCall row behind a requestState (its first part is the round id)."""
    from mcp_gateway.models import Round

    return Round.objects.select_related("call").get(pk=request_state.partition(".")[0]).call


def checkpoint_rows(thread_id: str) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        total = 0
        for table in CHECKPOINT_TABLES:
            cursor.execute(f"SELECT count(*) FROM {table} WHERE thread_id = %s", [thread_id])
            total += cursor.fetchone()[0]
    return total


def checkpoint_threads() -> set[str]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(" UNION ".join(f"SELECT DISTINCT thread_id FROM {t}" for t in CHECKPOINT_TABLES))
        return {row[0] for row in cursor.fetchall()}


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> bool:
    """True once `check()` holds (for work the worker does after it has answered)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class FormOnlySession(ClientSession):
    """Declares elicitation {"form": {}} only. The SDK always declares form and url when it has an
    elicitation callback; this private hook is the narrowest place to change that."""

    def _build_capabilities(self, version: str) -> types.ClientCapabilities:
        caps = super()._build_capabilities(version)
        if caps.elicitation is not None:
            caps = caps.model_copy(
                update={"elicitation": types.ElicitationCapability(form=types.FormElicitationCapability())}
            )
        return caps


@contextlib.asynccontextmanager
async def form_only_session(url: str, token: str, callback: Callable):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
    async with streamable_http_client(url, http_client=http) as (read, write):
        async with FormOnlySession(read, write, elicitation_callback=callback) as session:
            await session.discover()
            yield session


async def drive(session: ClientSession, name: str, arguments: dict[str, Any]):
    """What `Client.call_tool` does, for a bare session: answer every round through the callback."""
    first = await session.call_tool(name, arguments, allow_input_required=True)
    if not isinstance(first, types.InputRequiredResult):
        return first

    async def dispatch(key: str, request: types.InputRequest):
        return await session.dispatch_input_request(ClientRequestContext(session=session, request_id=key), request)

    async def retry(responses, state):
        return await session.call_tool(
            name, arguments, input_responses=responses, request_state=state, allow_input_required=True
        )

    return await run_input_required_driver(first, dispatch=dispatch, retry=retry)


def agent_answering(
    mcp_url: str,
    token: str,
    tool: str,
    answers: dict[str, dict],
    arguments: dict[str, Any] | None = None,
    seen: list[dict[str, Any]] | None = None,
):
    """A create_agent agent with a scripted model that calls `tool` once, with `arguments`, through
    MCPAdapter over HTTP, answering each mcp_elicitation interrupt by message. Returns (tool message,
    interrupts seen); `seen`, when given, collects the interrupts as they come (for a call that
    raises)."""
    import warnings

    from fastmcp.client.transports import StreamableHttpTransport
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langchain.mcp import MCPAdapter

    class ScriptedModel(GenericFakeChatModel):
        def bind_tools(self, tools, **kwargs):
            return self

    seen = [] if seen is None else seen

    async def go():
        transport = StreamableHttpTransport(mcp_url, headers={"Authorization": f"Bearer {token}"})
        async with MCPAdapter(transport) as adapter:
            assert adapter.client.protocol_version == MODERN
            tools = await adapter.list_tools()
        model = ScriptedModel(
            messages=iter(
                [
                    AIMessage(content="", tool_calls=[{"name": tool, "args": arguments or {}, "id": "call-1"}]),
                    AIMessage(content="done"),
                ]
            )
        )
        agent = create_agent(model, [t for t in tools if t.name == tool], checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        out = await agent.ainvoke({"messages": [{"role": "user", "content": "go"}]}, config, version="v2")
        while out.interrupts:
            resume = {}
            for pending in out.interrupts:
                assert pending.value["type"] == "mcp_elicitation"
                seen.append(pending.value)
                resume[pending.id] = {
                    "responses": {
                        r["key"]: next(a for word, a in answers.items() if word in r["message"])
                        for r in pending.value["requests"]
                    }
                }
            out = await agent.ainvoke(Command(resume=resume), config, version="v2")
        (message,) = [m for m in out.value["messages"] if isinstance(m, ToolMessage)]
        return message, seen

    return run(go())
