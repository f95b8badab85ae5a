"""A small MCP client for load: JSON-RPC over keep-alive HTTP/1.1 on asyncio streams.

httpx works too, but on a 2-core machine the load generator shares the CPU with the server, so it
should cost as little as possible: this one builds a request with one f-string and reads a
Content-Length (or chunked) body. Only 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}, "url": {}}},
}
_ids = itertools.count(1)


class HttpError(Exception):
    pass


class Connection:
    """One keep-alive HTTP/1.1 connection; reconnects when the server closed it."""

    def __init__(self, url: str, token: str, timeout: float = 120):
        parts = urlsplit(url)
        if parts.hostname not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("the bench only talks to 127.0.0.1")
        self.host, self.port, self.path = parts.hostname, parts.port or 80, parts.path or "/"
        self.token, self.timeout = token, timeout
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        # The headers of the latest response (an older client reads its Mcp-Session-Id there).
        self.headers: dict[str, str] = {}
        self._buffer = b""

    async def _connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port, limit=1 << 22)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except (ConnectionError, OSError):
                pass
        self.reader = self.writer = None

    def _head(self, body: bytes, headers: dict[str, str]) -> bytes:
        return (
            f"POST {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: keep-alive\r\n"
            + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
            + "\r\n"
        ).encode("latin-1")

    async def post(self, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        head = self._head(body, headers)
        for attempt in (1, 2):
            if self.writer is None:
                await self._connect()
            try:
                assert self.writer is not None
                self.writer.write(head + body)
                return await asyncio.wait_for(self._response(), self.timeout)
            except (ConnectionError, asyncio.IncompleteReadError) as exc:
                # A keep-alive connection the server closed between requests: retry once on a new one.
                await self.close()
                if attempt == 2:
                    raise HttpError(f"connection failed: {exc!r}") from exc
        raise AssertionError("unreachable")

    async def _status_and_headers(self) -> tuple[int, dict[str, str]]:
        assert self.reader is not None
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
        self.headers = headers
        return status, headers

    async def open_stream(self, body: bytes, headers: dict[str, str]) -> int:
        """POST and read the response's head: its chunked body is then read with `events()`."""
        if self.writer is None:
            await self._connect()
        assert self.writer is not None
        self.writer.write(self._head(body, headers) + body)
        status, _ = await asyncio.wait_for(self._status_and_headers(), self.timeout)
        self._buffer = b""
        return status

    async def events(self):
        """The data of each event of the open stream's chunked body (comment lines and events
        without data skipped), until the body ends."""
        assert self.reader is not None
        while True:
            while b"\r\n\r\n" in self._buffer:
                event, _, self._buffer = self._buffer.partition(b"\r\n\r\n")
                data = [line[5:].strip() for line in event.split(b"\r\n") if line.startswith(b"data:")]
                if data and data[0]:
                    yield json.loads(data[0])
            size = int((await asyncio.wait_for(self.reader.readuntil(b"\r\n"), self.timeout)).split(b";")[0], 16)
            chunk = await self.reader.readexactly(size + 2)
            if size == 0:
                return
            self._buffer += chunk[:-2]

    async def _response(self) -> tuple[int, bytes]:
        assert self.reader is not None
        status, headers = await self._status_and_headers()
        if "content-length" in headers:
            body = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                chunk = await self.reader.readexactly(size + 2)
                if size == 0:
                    break
                chunks.append(chunk[:-2])
            body = b"".join(chunks)
        else:
            body = await self.reader.read()
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return status, body


@dataclass
class Mcp:
    """tools/call over one connection, with the 2026-07-28 headers."""

    url: str
    token: str
    timeout: float = 120
    conn: Connection = field(init=False)

    def __post_init__(self) -> None:
        self.conn = Connection(self.url, self.token, self.timeout)

    async def call(
        self, name: str, arguments: dict[str, Any] | None = None, *, meta: dict[str, Any] | None = None, **params: Any
    ) -> dict[str, Any]:
        """`meta`: what the request's _meta carries beside the envelope's keys (a progressToken)."""
        params = {"name": name, "arguments": arguments or {}, **params}
        return await self.request("tools/call", params, name=name, meta=meta)

    async def list_tools(self) -> dict[str, Any]:
        """The cheapest authenticated request: HTTP, Django, the token, the protocol checks, no call state."""
        return await self.request("tools/list", {})

    async def request(
        self, method: str, params: dict[str, Any], name: str | None = None, meta: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        meta = meta or {}
        body = json.dumps(
            {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": {**params, "_meta": {**META, **meta}}},
            separators=(",", ":"),
        ).encode()
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": method,
            "Authorization": f"Bearer {self.token}",
        }
        if name is not None:
            headers["Mcp-Name"] = name
        status, raw = await self.conn.post(body, headers)
        if status != 200:
            raise HttpError(f"HTTP {status}: {raw[:300]!r}")
        reply = json.loads(raw)
        if "error" in reply:
            raise HttpError(f"JSON-RPC error: {reply['error']}")
        return reply["result"]

    async def close(self) -> None:
        await self.conn.close()


def answers_for(result: dict[str, Any], text: str = "eu-west-1") -> dict[str, Any]:
    """Accept every question of an input_required round, filling each string field with `text`."""
    responses = {}
    for key, request in result["inputRequests"].items():
        schema = request["params"].get("requestedSchema") or {}
        content = {
            name: text for name, prop in (schema.get("properties") or {}).items() if prop.get("type") == "string"
        }
        responses[key] = {"action": "accept", "content": content}
    return responses


@dataclass
class RoundTimes:
    pause: float  # round 1: the call until input_required
    resume: float  # round 2: the answer until the result

    @property
    def total(self) -> float:
        return self.pause + self.resume


async def pause_and_resume(mcp: Mcp, tool: str = "choose_region", arguments: dict | None = None) -> RoundTimes:
    """One whole elicitation round trip: call, get input_required, answer, get the result."""
    t0 = time.perf_counter()
    first = await mcp.call(tool, arguments)
    t1 = time.perf_counter()
    if first.get("resultType") != "input_required" or "inputRequests" not in first:
        raise HttpError(f"expected input_required with questions, got {str(first)[:300]}")
    final = await mcp.call(tool, arguments, inputResponses=answers_for(first), requestState=first["requestState"])
    t2 = time.perf_counter()
    if final.get("resultType") == "input_required" or final.get("isError"):
        raise HttpError(f"expected the tool's result, got {str(final)[:300]}")
    return RoundTimes(t1 - t0, t2 - t1)


async def pause_only(mcp: Mcp, tool: str = "choose_region", arguments: dict | None = None) -> dict[str, Any]:
    first = await mcp.call(tool, arguments)
    if first.get("resultType") != "input_required" or "inputRequests" not in first:
        raise HttpError(f"expected input_required with questions, got {str(first)[:300]}")
    return first


OLDER = "2025-11-25"


@dataclass
class OlderMcp:
    """A 2025-11-25 client that answers questions (the service run with MCP_OLDER_CLIENTS=answer):
    a session, each tools/call's event stream on one connection, its answers POSTed on another."""

    url: str
    token: str
    timeout: float = 120
    session: str = ""
    stream: Connection = field(init=False)
    answers: Connection = field(init=False)

    def __post_init__(self) -> None:
        self.stream = Connection(self.url, self.token, self.timeout)
        self.answers = Connection(self.url, self.token, self.timeout)

    def _headers(self) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": OLDER,
            "Authorization": f"Bearer {self.token}",
        }
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        return headers

    async def initialize(self) -> None:
        params = {
            "protocolVersion": OLDER,
            "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "bench", "version": "1"},
        }
        body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}).encode()
        status, raw = await self.answers.post(body, self._headers())
        if status != 200 or "mcp-session-id" not in self.answers.headers:
            raise HttpError(f"initialize: HTTP {status}: {raw[:300]!r}")
        self.session = self.answers.headers["mcp-session-id"]
        notified = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        await self.answers.post(notified, self._headers())

    async def round(self, tool: str = "choose_region", text: str = "eu-west-1") -> tuple[RoundTimes, dict[str, Any]]:
        """One round: the call until its question arrives on the stream, then the answer POSTed
        until the result arrives on the same stream."""
        request_id = next(_ids)
        body = json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": tool, "arguments": {}}}
        ).encode()
        t0 = time.perf_counter()
        status = await self.stream.open_stream(body, self._headers())
        if status != 200 or not self.stream.headers.get("content-type", "").startswith("text/event-stream"):
            raise HttpError(f"expected the call's event stream, got HTTP {status} {self.stream.headers}")
        events = self.stream.events()
        question = await anext(events)
        t1 = time.perf_counter()
        if question.get("method") != "elicitation/create":
            raise HttpError(f"expected elicitation/create, got {str(question)[:300]}")
        answer = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"response": text}}}
        status, raw = await self.answers.post(json.dumps(answer).encode(), self._headers())
        if status != 202:
            raise HttpError(f"the answer: HTTP {status}: {raw[:300]!r}")
        final = await anext(events)
        t2 = time.perf_counter()
        async for _ in events:  # the end of the body, so the connection serves the next round
            pass
        if final.get("id") != request_id or "result" not in final:
            raise HttpError(f"expected the call's response, got {str(final)[:300]}")
        return RoundTimes(t1 - t0, t2 - t1), final["result"]

    async def close(self) -> None:
        await self.stream.close()
        await self.answers.close()
