"""Server-sent events as the SDK's servers write them: the one encoder of every stream /mcp/
answers with (an older client's call, a session's own, a task listen, a 2026-07-28 call's
notifications), and the progress notification a call's stream carries."""

from __future__ import annotations

import json
from typing import Any

# A comment line: proxies keep an idle stream open, and clients ignore it.
PING = b": ping\r\n\r\n"


def frame(message: dict[str, Any] | None, *, event_id: str | None = None, retry: int | None = None) -> bytes:
    """One event: `event: message` with a JSON-RPC message, or, for a stream's first event, an id
    and no data (with `retry`), so that a client cut before anything else still reconnects
    (2025-11-25, "Resumability")."""
    lines = [f"id: {event_id}"] if event_id is not None else []
    if retry is not None:
        lines.append(f"retry: {retry}")
    if message is None:
        lines.append("data: ")
    else:
        lines += ["event: message", f"data: {json.dumps(message, separators=(',', ':'), ensure_ascii=False)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


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
