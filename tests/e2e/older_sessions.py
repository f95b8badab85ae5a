"""An older client's session (MCP_OLDER_CLIENTS=answer) over plain HTTP, and the events of its
streams as they arrive."""

from __future__ import annotations

import json
from typing import Any

import httpx

LEGACY = "2025-11-25"


class Session:
    """An older client's session over plain HTTP."""

    def __init__(self, url: str, token: str, capabilities: dict | None = None, version: str = LEGACY):
        self.url, self.http, self.version = url, httpx.Client(timeout=60), version
        self.auth = {"Authorization": f"Bearer {token}"}
        response = self.initialize(capabilities)
        assert response.status_code == 200, response.text
        self.id = response.headers["Mcp-Session-Id"]

    def initialize(self, capabilities: dict | None = None) -> httpx.Response:
        params = {
            "protocolVersion": self.version,
            "capabilities": {"elicitation": {"form": {}}} if capabilities is None else capabilities,
            "clientInfo": {"name": "plain", "version": "1"},
        }
        return self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}, session=False)

    def headers(self, session: bool = True, **extra: str) -> dict[str, str]:
        headers = {
            **self.auth,
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": self.version,
        }
        if session:
            headers["Mcp-Session-Id"] = self.id
        return {**headers, **extra}

    def post(self, body: dict[str, Any], session: bool = True, **extra: str) -> httpx.Response:
        return self.http.post(self.url, json=body, headers=self.headers(session, **extra))

    def stream_call(self, tool: str):
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": {}}}
        return self.http.stream("POST", self.url, json=body, headers=self.headers())

    def own_stream(self):
        """The session's own stream (GET without Last-Event-ID)."""
        return self.http.stream("GET", self.url, headers=self.headers())

    def resume(self, last_event_id: str):
        return self.http.stream("GET", self.url, headers=self.headers(**{"Last-Event-ID": last_event_id}))


def events(response: httpx.Response):
    """(id, data or None, comment) for each event of a stream, as it arrives."""
    event_id, data, comment = None, None, None
    for line in response.iter_lines():
        if line.startswith(":"):
            yield None, None, line
        elif line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data = line[5:].strip()
        elif line == "" and event_id is not None:
            yield event_id, json.loads(data) if data else None, comment
            event_id, data = None, None
