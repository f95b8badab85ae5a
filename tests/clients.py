"""The clients that really call this service: the official mcp SDK client (pinned to a revision,
never `auto`, whose fallback hides failures) and raw HTTP for exact-byte checks."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

MODERN = "2026-07-28"
ACCEPT = types.ElicitResult(action="accept")
DECLINE = types.ElicitResult(action="decline")
CANCEL = types.ElicitResult(action="cancel")


def elicit_result_accepting(**content: Any) -> types.ElicitResult:
    """What an SDK elicitation callback returns to accept a form with `content`."""
    return types.ElicitResult(action="accept", content=content)


def by_message(answers: dict[str, types.ElicitResult]) -> Callable:
    """An elicitation callback answering each question by a word of its message (a person reads
    the message, not the key); records what it was asked."""
    asked: list[tuple[str, Any]] = []

    async def callback(ctx, params):
        asked.append((str(ctx.request_id), params))
        for word, answer in answers.items():
            if word in params.message:
                return answer
        raise AssertionError(f"unexpected question {params.message!r}")

    callback.asked = asked  # type: ignore[attr-defined]
    return callback


@contextlib.asynccontextmanager
async def sdk_client(
    url: str,
    token: str,
    callback: Callable | None = None,
    *,
    mode: str = MODERN,
    sent: list | None = None,
    message_handler: Callable | None = None,
    client_info: types.Implementation | None = None,
):
    """The official SDK's client; `sent`: a list that gets each HTTP request it sends;
    `message_handler`: the SDK's hook for the server's notifications; `client_info`: what it says
    it is (the SDK's own name and version unless given)."""
    hooks = {"request": [_appending_to(sent)]} if sent is not None else {}
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120, event_hooks=hooks)
    async with Client(
        streamable_http_client(url, http_client=http),
        mode=mode,
        cache=None,
        elicitation_callback=callback,
        message_handler=message_handler,
        client_info=client_info,
    ) as client:
        yield client


def _appending_to(sent: list) -> Callable:
    async def append(request) -> None:
        sent.append(request)

    return append


def recording_handler(respond: Callable[[str], dict[str, Any]]) -> tuple[list[str], Callable]:
    """An elicitation handler for FastMCP's client that answers each question with
    `respond(message)`, and the list of the messages it was asked, in order."""
    asked: list[str] = []

    async def handler(message, response_type, params, context):
        asked.append(message)
        return respond(message)

    return asked, handler


def fastmcp_client(url: str, token: str, handler=None):
    """FastMCP's client at 2026-07-28 (with the tasks_client fixture, it declares the MCP Tasks
    extension and resolves tasks); `handler`: its elicitation handler."""
    from fastmcp import Client as FastMCPClient
    from fastmcp.client.transports import StreamableHttpTransport

    transport = StreamableHttpTransport(url, headers={"Authorization": f"Bearer {token}"})
    return FastMCPClient(transport, timeout=120, elicitation_handler=handler, mode="2026-07-28")


def event_stream_messages(response: httpx.Response) -> Iterator[dict[str, Any]]:
    """The JSON-RPC messages of a text/event-stream response, as they arrive (comments skipped)."""
    data: list[str] = []
    for line in response.iter_lines():
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and data:
            yield json.loads("\n".join(data))
            data = []


def run(coro):
    return asyncio.run(coro)


def meta(capabilities: dict | None = None, version: str = MODERN) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}, "url": {}}}
        if capabilities is None
        else capabilities,
    }


def plain_http(timeout: float = 120) -> httpx.Client:
    """An httpx client that sends only the headers a test gives it: httpx would add `Accept: */*`
    to a request without one, and the server's answer to a missing Accept would go untested."""
    http = httpx.Client(timeout=timeout)
    del http.headers["Accept"]
    return http


class Raw:
    """JSON-RPC over plain HTTP with the 2026-07-28 headers, for exact statuses and bodies."""

    def __init__(self, url: str, token: str | None):
        self.url, self.token, self._id = url, token, 0
        self.http = plain_http()

    def headers(self, method: str, name: str | None = None, **extra: str) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": method,
        }
        if name is not None:
            headers["Mcp-Name"] = name
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        headers.update(extra)
        return headers

    def post(self, body: Any, headers: dict[str, str]) -> httpx.Response:
        return self.http.post(self.url, json=body, headers=headers)

    def request(self, method: str, params: dict[str, Any], **headers: str) -> httpx.Response:
        self._id += 1
        body = {"jsonrpc": "2.0", "id": self._id, "method": method, "params": params}
        return self.post(body, self.headers(method, params.get("name"), **headers))

    def call(
        self, name: str, arguments: dict | None = None, *, capabilities: dict | None = None, **params: Any
    ) -> httpx.Response:
        return self.request(
            "tools/call", {"name": name, "arguments": arguments or {}, "_meta": meta(capabilities), **params}
        )
