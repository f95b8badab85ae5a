"""What the event streams of /mcp/ write: server-sent events as the SDK's streamable HTTP
transport writes them (one `event: message` per JSON-RPC message, an `id:` where the stream can be
resumed, and a comment line to keep an idle stream open), and the request-scoped notifications
a call's stream carries."""

from __future__ import annotations

import json
from typing import Any

# A comment line: proxies keep an idle stream open, and clients ignore it.
PING = b": ping\r\n\r\n"


def frame(message: dict[str, Any], event_id: str | None = None) -> bytes:
    """One JSON-RPC message as an SSE event; `event_id` where the stream can be resumed."""
    body = json.dumps({"jsonrpc": "2.0", **message}, separators=(",", ":"), ensure_ascii=False)
    head = f"id: {event_id}\r\n" if event_id is not None else ""
    return f"{head}event: message\r\ndata: {body}\r\n\r\n".encode()


def progress_notification(
    token: str | int, progress: float, message: str | None = None, total: float | None = None
) -> dict[str, Any]:
    """notifications/progress for the request that sent `token`; `progress` grows with each one
    (the protocol's rule), `total` and `message` only where the run gives them."""
    params: dict[str, Any] = {"progressToken": token, "progress": progress}
    if total is not None:
        params["total"] = total
    if message:
        params["message"] = message
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}
