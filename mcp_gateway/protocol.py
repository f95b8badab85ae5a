"""The JSON-RPC envelope of MCP over streamable HTTP, for revision 2026-07-28 and the 2025-11-25
older revisions. The SDK's pure pieces do the checking: `classify_inbound_request` (the -32602 /
-32020 / -32022 ladder), `parse_client_request` and `serialize_server_result` (each revision's
wire shapes), and its table of HTTP statuses per error code."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    InboundLadderRejection,
    classify_inbound_request,
    decode_header_value,
    find_duplicated_routing_header,
    unsupported_protocol_version_rejection,
)
from mcp_types import CLIENT_INFO_META_KEY, LOG_LEVEL_META_KEY, SERVER_INFO_META_KEY, methods
from mcp_types.jsonrpc import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

MODERN = "2026-07-28"
OLDER_DEFAULT = LATEST_HANDSHAKE_VERSION
# The MCP Tasks extension's methods (mcp_task_methods.py), at 2026-07-28 only.
TASK_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
# subscriptions/listen serves task status notifications only (mcp_task_listen.py).
MODERN_METHODS = frozenset({"server/discover", "tools/list", "tools/call", "subscriptions/listen"}) | TASK_METHODS
OLDER_METHODS = frozenset({"initialize", "ping", "tools/list", "tools/call"})
# The MCP Apps extension's resources (wires/apps/), served with MCP_ANSWER_PAGES=on only, in every
# revision: a host reads the App as any resource.
RESOURCE_METHODS = frozenset({"resources/list", "resources/read"})
# The 2025-11-25 tasks utility (older_tasks.py), served with MCP_OLDER_CLIENTS=answer only.
OLDER_TASK_METHODS = frozenset({"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"})
OLDER_TASKS_REVISION = "2025-11-25"

__all__ = [
    "HEADER_MISMATCH",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "MISSING_REQUIRED_CLIENT_CAPABILITY",
    "PARSE_ERROR",
]


class RpcError(Exception):
    """A JSON-RPC error answer. `http_status` is its status on 2026-07-28: one the transport chose
    (401, 413, 429, ...), else the SDK's table for its code; `status_for` gives it per revision.
    `retry_after`: the seconds a client should wait before it tries again (a 429 or a 503), sent as
    the Retry-After header."""

    def __init__(
        self,
        code: int,
        message: str,
        data: Any = None,
        *,
        http_status: int | None = None,
        retry_after: int | None = None,
    ):
        super().__init__(message)
        self.code, self.message, self.data = code, message, data
        self.retry_after = retry_after
        self.http_status = http_status or ERROR_CODE_HTTP_STATUS.get(code, 200)
        self._transport_status = http_status is not None

    def status_for(self, message: Message | None) -> int:
        """The HTTP status of this error in answer to `message` (None: the body was no request).

        The status table belongs to 2026-07-28. Before it, a request that reached its method is
        answered 200 whatever the JSON-RPC error, as the SDK's handshake-era server answers: the
        older clients (the TypeScript SDK's among them) read a 4xx as a failed transport and never
        see the error in the body. A body that is no request (-32700, -32600) keeps its 400 there too."""
        if message is not None and not message.modern and not self._transport_status:
            return 200
        return self.http_status

    def body(self, request_id: Any = None) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return {"jsonrpc": "2.0", "id": request_id, "error": error}


def invalid_request_state() -> RpcError:
    # One frozen answer for every reason (tampered, expired, another caller, tool or arguments).
    return RpcError(INVALID_PARAMS, "Invalid or expired requestState", {"reason": "invalid_request_state"})


@dataclass(frozen=True)
class Message:
    """One parsed JSON-RPC message and the revision it speaks."""

    id: Any
    method: str
    params: dict[str, Any]
    version: str
    is_notification: bool = False
    client_capabilities: dict[str, Any] = field(default_factory=dict)

    @property
    def modern(self) -> bool:
        return self.version in MODERN_PROTOCOL_VERSIONS

    @property
    def progress_token(self) -> str | int | None:
        """The `_meta.progressToken` the request asked for progress with, if it is a usable one."""
        meta = self.params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        return token if isinstance(token, (str, int)) and not isinstance(token, bool) else None

    @property
    def client_info(self) -> dict[str, str] | None:
        """What a 2026-07-28 request says its client is (`_meta` clientInfo, which it SHOULD send
        with every request), as declared_client keeps it. An older client says it once, in its
        session's initialize (sessions.py)."""
        meta = self.params.get("_meta")
        return declared_client(meta.get(CLIENT_INFO_META_KEY)) if self.modern and isinstance(meta, dict) else None

    @property
    def log_level(self) -> str | None:
        """The level a 2026-07-28 request asked to hear log lines at (validate_params checked it)."""
        meta = self.params.get("_meta")
        level = meta.get(LOG_LEVEL_META_KEY) if self.modern and isinstance(meta, dict) else None
        return level if isinstance(level, str) else None


# A client's name, version or title is shown to a person (the answer page): kept this long at most.
CLIENT_INFO_MOST = 100


def declared_client(info: Any) -> dict[str, str] | None:
    """The client's declared Implementation (clientInfo) as a call keeps it: its name, version and
    title where they are strings, without control or format characters (a right-to-left override
    would turn the words around) and each cut to CLIENT_INFO_MOST characters: the client's own
    word, shown to a person, never trusted. None without a name."""
    if not isinstance(info, dict):
        return None
    kept = {}
    for field_ in ("name", "version", "title"):
        value = info.get(field_)
        # Cut before it is read through: a name can be as long as the request.
        if isinstance(value, str) and (text := _printable(value[: 4 * CLIENT_INFO_MOST])):
            kept[field_] = text if len(text) <= CLIENT_INFO_MOST else text[: CLIENT_INFO_MOST - 1] + "…"
    return kept if "name" in kept else None


def _printable(text: str) -> str:
    return "".join(c for c in text if not unicodedata.category(c).startswith("C")).strip()


def request_object(body: Any) -> dict[str, Any]:
    """The decoded body (limits.loads) as one JSON-RPC request object."""
    if not isinstance(body, dict):
        # Batches were removed from the protocol; a bare value is no request either.
        raise RpcError(INVALID_REQUEST, "Invalid Request: expected one JSON-RPC request object")
    return body


def is_response(body: dict[str, Any]) -> bool:
    """A JSON-RPC response (a client's answer to a server's request), not a request."""
    return "method" not in body and "id" in body and ("result" in body or "error" in body)


def parse(body: dict[str, Any], headers: dict[str, str], raw_headers: list[tuple[str, str]]) -> Message:
    if body.get("jsonrpc") != "2.0" or not isinstance(body.get("method"), str):
        raise RpcError(INVALID_REQUEST, "Invalid Request")
    request_id = body.get("id")
    is_notification = "id" not in body
    if not is_notification and (isinstance(request_id, bool) or not isinstance(request_id, (str, int))):
        raise RpcError(INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
    params = body.get("params", {})
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, "params must be an object")
    method = body["method"]

    version_header = headers.get(MCP_PROTOCOL_VERSION_HEADER)
    if version_header is None or version_header in HANDSHAKE_PROTOCOL_VERSIONS:
        # Like the SDK, route by the header only: no header or a handshake version is the old era.
        return Message(request_id, method, params, version_header or OLDER_DEFAULT, is_notification)

    if (duplicated := find_duplicated_routing_header(raw_headers)) is not None:
        raise RpcError(HEADER_MISMATCH, f"{duplicated} header appears more than once")
    if is_notification:
        # As the SDK does for a notification: only the version header is checked, and a version
        # not served is told so as a request would be (-32022), not acknowledged.
        if (unsupported := unsupported_protocol_version_rejection(version_header)) is not None:
            raise RpcError(unsupported.code, unsupported.message, unsupported.data)
        return Message(None, method, params, version_header, True)
    route = classify_inbound_request(body, headers=headers)
    if isinstance(route, InboundLadderRejection):
        raise RpcError(route.code, route.message, route.data)
    if method in TASK_METHODS:
        _check_task_route(headers.get(MCP_NAME_HEADER.lower()), params)
    capabilities = route.client_capabilities if isinstance(route.client_capabilities, dict) else {}
    return Message(request_id, method, params, route.protocol_version, False, capabilities)


def _check_task_route(header: str | None, params: dict[str, Any]) -> None:
    """The extension's routing header rule: `Mcp-Name` carries params.taskId, so an intermediary
    can route by it; one that names another task is -32020, as a tools/call's is. A missing one is
    let through, as the extension's reference server (fastmcp-tasks) does: its own client does not
    send it (docs/tasks.md)."""
    if header is not None and decode_header_value(header) != params.get("taskId"):
        raise RpcError(HEADER_MISMATCH, f"{MCP_NAME_HEADER} header does not match the request body's taskId")


def validate_params(message: Message) -> None:
    """Check the request against its revision's schema (unknown methods are -32601)."""
    allowed = MODERN_METHODS if message.modern else OLDER_METHODS
    if _older_tasks_served(message):
        allowed |= OLDER_TASK_METHODS
    if settings.MCP_ANSWER_PAGES == "on":
        allowed |= RESOURCE_METHODS
    if message.method not in allowed:
        raise RpcError(METHOD_NOT_FOUND, "Method not found", message.method)
    if not message.modern and message.method in OLDER_TASK_METHODS:
        # The SDK's method tables do not know these either: their params are one string each.
        name = "cursor" if message.method == "tasks/list" else "taskId"
        value = message.params.get(name)
        if not isinstance(value, str) and (value is not None or name == "taskId"):
            raise RpcError(INVALID_PARAMS, f"Invalid params: {name} must be a string")
        return
    if message.method in TASK_METHODS:
        # The extension's schema: the SDK's method tables do not know it.
        if not isinstance(message.params.get("taskId"), str):
            raise RpcError(INVALID_PARAMS, "Invalid params: taskId must be a string")
        return
    try:
        methods.validate_client_request(message.method, message.version, message.params)
    except (ValidationError, KeyError, ValueError) as exc:
        raise RpcError(INVALID_PARAMS, f"Invalid params: {_first_error(exc)}") from None


def _older_tasks_served(message: Message) -> bool:
    return settings.MCP_OLDER_CLIENTS == "answer" and message.version == OLDER_TASKS_REVISION


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError) and exc.errors():
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"][:6])
        return f"{where}: {err['msg']}"
    return "the request does not match the protocol schema"


def server_info() -> dict[str, str]:
    return {"name": settings.MCP_SERVER_NAME, "version": settings.MCP_SERVER_VERSION}


def result_body(message: Message, result: dict[str, Any]) -> dict[str, Any]:
    """Shape a result for the message's revision; on 2026-07-28 every result has a resultType."""
    data = dict(result)
    if message.modern:
        data.setdefault("resultType", "complete")
        data["_meta"] = {**data.get("_meta", {}), SERVER_INFO_META_KEY: server_info()}
    # The SDK's tables know neither the tasks methods nor a CreateTaskResult: those are shaped by
    # mcp_task_handles.py and mcp_task_methods.py (2026-07-28), and older_tasks.py (2025-11-25).
    shaped = message.method in TASK_METHODS or message.method in OLDER_TASK_METHODS or data.get("resultType") == "task"
    if message.method != "ping" and not shaped:
        data = methods.serialize_server_result(message.method, message.version, data)
    elif not message.modern:
        data.pop("resultType", None)
    return {"jsonrpc": "2.0", "id": message.id, "result": data}


def negotiated_older_version(requested: Any) -> str:
    return requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else OLDER_DEFAULT
