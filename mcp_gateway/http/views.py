"""The MCP endpoint at /mcp/: HTTP in, JSON-RPC out. The methods live in dispatch.py."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import TypeVar
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import DisallowedHost, RequestDataTooBig
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.urls import reverse
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request

from mcp_gateway import limits, observe, protocol
from mcp_gateway.auth import Caller, authenticate
from mcp_gateway.calls import overload
from mcp_gateway.calls.tool_calls import Waiting
from mcp_gateway.db_threads import in_db_thread
from mcp_gateway.http import dispatch
from mcp_gateway.models import Session
from mcp_gateway.protocol import INTERNAL_ERROR, INVALID_REQUEST, RpcError
from mcp_gateway.wires.mcp_tasks import mcp_task_listen
from mcp_gateway.wires.rounds import call_notifications, param_headers
from mcp_gateway.wires.sessions import call_streams, session_streams, sessions

logger = logging.getLogger(__name__)

UNAUTHORIZED = -32001


def _rpc_error(error: RpcError, request_id=None, message: protocol.Message | None = None) -> JsonResponse:
    response = _no_store(JsonResponse(error.body(request_id), status=error.status_for(message)))
    if error.retry_after is not None:
        response["Retry-After"] = str(error.retry_after)
    return response


def _failed(error: Exception, request_id=None) -> JsonResponse:
    """A request that failed on something other than its input: 500. But a database another process
    held locked past SQLite's busy timeout broke nothing (the transaction rolled back): 503 with
    Retry-After, which the client tries again after, and one warning without a traceback."""
    if overload.database_locked(error):
        logger.warning("MCP request answered 503: %s", error)
        return _rpc_error(overload.database_busy(), request_id)
    logger.exception("MCP request failed")
    return _rpc_error(RpcError(INTERNAL_ERROR, "Internal error", http_status=500), request_id)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler400: what Django refuses before any view runs (a Host outside ALLOWED_HOSTS is the
    one /mcp/ can meet) is a JSON-RPC error like every other answer of /mcp/."""
    if request.path != reverse("mcp"):
        return defaults.bad_request(request, exception)
    message = "Bad Request: invalid Host header" if isinstance(exception, DisallowedHost) else "Bad Request"
    return _rpc_error(RpcError(INVALID_REQUEST, message, http_status=400))


_Response = TypeVar("_Response", bound=HttpResponse)


def _no_store(response: _Response) -> _Response:
    # Set here, not left to SecurityMiddleware: in production /mcp/ is served without middleware
    # (hitl_project/asgi.py).
    response["Cache-Control"] = "no-store"
    response["X-Content-Type-Options"] = "nosniff"
    return response


@csrf_exempt  # a redirect changes nothing; the POST it keeps is checked at /mcp/
def mcp_without_slash(request: HttpRequest) -> HttpResponse:
    """/mcp answers 308 to /mcp/. APPEND_SLASH's 301 lets a client turn the POST into a GET, so
    clients that send a body refuse to follow it (the TypeScript SDK does); a 308 keeps the method
    and the body."""
    target = reverse("mcp")
    if query := request.META.get("QUERY_STRING"):
        target = f"{target}?{query}"
    return _no_store(HttpResponsePermanentRedirect(target, preserve_request=True))


def _origin_allowed(origin: str) -> bool:
    allowed = settings.MCP_ALLOWED_ORIGINS
    if "*" in allowed or origin in allowed:
        return True
    try:
        parts = urlsplit(origin)
    except ValueError:  # such as "http://[::1": no origin at all
        return False
    # An allowed origin without a port admits that scheme and host on any port.
    return f"{parts.scheme}://{parts.hostname}" in allowed or f"{parts.scheme}://[{parts.hostname}]" in allowed


def _accepts(request: HttpRequest) -> tuple[bool, bool]:
    """Whether JSON, and whether an event stream, is acceptable. The SDK server's own Accept
    parser, so both answer the same Accept the same way: media ranges compared without their
    parameters, and no Accept at all accepts nothing. JSON must be acceptable for every request;
    an event stream for subscriptions/listen, whose response is one (as the SDK's server), and
    for a tools/call to be answered with its notifications (call_notifications.py)."""
    accept = request.headers.get("Accept", "")
    return check_accept_headers(Request({"type": "http", "headers": [(b"accept", accept.encode("latin-1"))]}))


def _not_acceptable(what: str) -> JsonResponse:
    return _rpc_error(RpcError(INVALID_REQUEST, f"Not Acceptable: the client must accept {what}", http_status=406))


def _is_json(request: HttpRequest) -> bool:
    # The media type without its parameters, compared case-insensitively (RFC 9110), as the SDK's
    # handshake-era transport does: its 2026 path checks only a prefix and so also takes
    # application/json-seq, which is not JSON.
    media_type = request.headers.get("Content-Type", "").split(";")[0]
    return media_type.strip().lower() == "application/json"


@csrf_exempt  # bearer-token API for non-browser clients; browsers are held off by the Origin check
@observe.observed
async def mcp_endpoint(request: HttpRequest) -> HttpResponseBase:
    if request.method in ("GET", "DELETE") and sessions.enabled() and not _modern(request):
        return await _session_request(request)
    if request.method != "POST":
        return _not_allowed(request)
    if (forbidden := _forbidden_origin(request)) is not None:
        return forbidden
    too_big = RpcError(INVALID_REQUEST, "Request body too large", http_status=413)
    try:
        if int(request.headers.get("Content-Length") or 0) > settings.MCP_MAX_BODY_BYTES:
            return _rpc_error(too_big)
        raw = request.body
    except (ValueError, RequestDataTooBig):
        return _rpc_error(too_big)
    if len(raw) > settings.MCP_MAX_BODY_BYTES:
        return _rpc_error(too_big)
    if not _is_json(request):
        return _rpc_error(RpcError(INVALID_REQUEST, "Invalid Content-Type header", http_status=400))
    if not _accepts(request)[0]:
        return _not_acceptable("application/json")

    try:
        # One hop to a database thread for authentication and the start of a tool call (each hop
        # costs a connection health check): the body is parsed there too, after authentication.
        answer = await in_db_thread(handle_post)(request, raw)
    except Exception as error:
        return _failed(error)
    if isinstance(answer, HttpResponse):
        return answer
    if isinstance(answer, mcp_task_listen.Listening):
        return _event_stream(mcp_task_listen.stream(answer))
    if isinstance(answer, call_streams.Streaming):
        return _event_stream(call_streams.serve(answer))
    # A tools/call whose answer waits for its graph's run, outside the database thread.
    message, session, waiting = answer
    try:
        result = await dispatch.reply_after_run(waiting, message, session, can_stream=_accepts(request)[1])
    except RpcError as error:
        return _rpc_error(error, message.id, message)
    except Exception as error:
        return _failed(error, message.id)
    if isinstance(result, call_streams.Streaming):
        return _event_stream(call_streams.serve(result))
    if isinstance(result, call_notifications.Notifying):
        return _event_stream(call_notifications.serve(result))
    return _result(message, result)


def _not_allowed(request: HttpRequest) -> JsonResponse:
    allowed = "GET, POST, DELETE" if sessions.enabled() and not _modern(request) else "POST"
    response = _rpc_error(RpcError(INVALID_REQUEST, f"Method Not Allowed: use {allowed}", http_status=405))
    response["Allow"] = allowed
    return response


def _forbidden_origin(request: HttpRequest) -> JsonResponse | None:
    origin = request.headers.get("Origin")
    if origin is not None and not _origin_allowed(origin):
        return _rpc_error(RpcError(INVALID_REQUEST, "Forbidden: invalid Origin header", http_status=403))
    return None


def _modern(request: HttpRequest) -> bool:
    """A request of 2026-07-28 or later, which has no sessions (protocol.parse routes alike)."""
    version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER)
    return version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS


def _authenticated(request: HttpRequest) -> Caller | HttpResponse:
    """The caller, or the response that refuses the request (401, 429)."""
    try:
        caller = authenticate(request)
        wait = limits.retry_after(caller.identity) if caller is not None else None
    except Exception as error:
        return _failed(error)
    if caller is None:
        response = _rpc_error(
            RpcError(UNAUTHORIZED, "Unauthorized: send Authorization: Bearer <token>", http_status=401)
        )
        response["WWW-Authenticate"] = 'Bearer realm="mcp"'
        return response
    if wait is not None:
        return _rpc_error(limits.rate_limited(wait))
    return caller


def _session(request: HttpRequest, caller: Caller) -> Session | None | HttpResponse:
    """The older client's session the request names (none named: None), or its 404."""
    raw = request.headers.get(sessions.HEADER)
    if raw is None or not sessions.enabled() or _modern(request):
        return None
    session = sessions.session_of(raw, caller)
    return session if session is not None else _rpc_error(sessions.not_found())


async def _session_request(request: HttpRequest) -> HttpResponseBase:
    """GET (the session's own stream, or a call's stream resumed with Last-Event-ID) and DELETE
    (end the session) of an older client's session."""
    if (forbidden := _forbidden_origin(request)) is not None:
        return forbidden
    if request.method == "GET" and not _accepts(request)[1]:
        return _not_acceptable("text/event-stream")
    try:
        answer = await in_db_thread(_session_answer)(request)
    except Exception as error:
        return _failed(error)
    if isinstance(answer, call_streams.Streaming):
        return _event_stream(call_streams.serve(answer))
    if isinstance(answer, session_streams.Watching):
        return _event_stream(session_streams.serve(answer))
    return answer


def _session_answer(request: HttpRequest) -> HttpResponse | call_streams.Streaming | session_streams.Watching:
    caller = _authenticated(request)
    if isinstance(caller, HttpResponse):
        return caller
    if request.headers.get(sessions.HEADER) is None:
        return _rpc_error(RpcError(INVALID_REQUEST, f"Bad Request: {sessions.HEADER} header required", http_status=400))
    session = _session(request, caller)
    if not isinstance(session, Session):
        assert isinstance(session, HttpResponse)
        return session
    if request.method == "DELETE":
        sessions.end(session)
        return _no_store(HttpResponse(status=204))
    last_event_id = request.headers.get("Last-Event-ID")
    try:
        if last_event_id is None or session_streams.names_one(last_event_id):
            return session_streams.open_stream(session, caller, last_event_id)
        return call_streams.resume_stream(session, caller, last_event_id)
    except RpcError as error:
        return _rpc_error(error)


def handle_post(
    request: HttpRequest, raw: bytes
) -> (
    HttpResponse | tuple[protocol.Message, Session | None, Waiting] | mcp_task_listen.Listening | call_streams.Streaming
):
    """A POST's synchronous half, in the view's one hop to a database thread: authentication, the
    envelope, and the method's answer, or the tool call's Waiting (with the message and the older
    client's session it renders with) or the stream to serve."""
    caller = _authenticated(request)
    if isinstance(caller, HttpResponse):
        return caller
    session = _session(request, caller)
    if isinstance(session, HttpResponse):
        return session

    request_id = None
    message: protocol.Message | None = None  # known once the envelope parses: it picks the status
    try:
        # Only JSON (no NaN or Infinity), valid Unicode, and no deeper than MCP_MAX_JSON_DEPTH.
        body = protocol.request_object(limits.loads(raw))
        if session is not None and protocol.is_response(body):
            # An older client's answer to a question asked on a call's stream.
            call_streams.take_response(session, caller, body)
            return _no_store(HttpResponse(status=202))
        request_id = _request_id(body.get("id"))
        headers = {k.lower(): v for k, v in request.headers.items()}
        message = protocol.parse(body, headers, _raw_headers(request))
        observe.request_parsed(message, headers, caller.identity)
        if message.is_notification:
            return _no_store(HttpResponse(status=202))
        protocol.validate_params(message)
        param_headers.check(message, _raw_headers(request))
        result = dispatch.start(message, caller, session)
        if message.method == "initialize" and sessions.enabled() and isinstance(result, dict):
            opened = sessions.open_session(message, caller, result["protocolVersion"])
            response = _result(message, result)
            response[sessions.HEADER] = opened
            return response
    except RpcError as error:
        return _rpc_error(error, request_id, message)
    except Exception as error:
        return _failed(error, request_id)
    if isinstance(result, mcp_task_listen.Listening):
        if not _accepts(request)[1]:
            result.place.give_back()
            return _not_acceptable("text/event-stream for subscriptions/listen")
        return result
    if isinstance(result, Waiting):
        return message, session, result
    if isinstance(result, call_streams.Streaming):
        return result
    return _result(message, result)


def _event_stream(frames: AsyncIterator[bytes]) -> StreamingHttpResponse:
    # As the SDK's SSE responses: no transformation, and no buffering by nginx; stored nowhere, as
    # every answer of /mcp/ (the SDK says no-cache: a task's result is no more cacheable here).
    response = StreamingHttpResponse(frames, content_type="text/event-stream")
    response["Cache-Control"] = "no-store, no-transform"
    response["X-Accel-Buffering"] = "no"
    response["X-Content-Type-Options"] = "nosniff"
    return response


def _result(message: protocol.Message, result: dict) -> JsonResponse:
    return _no_store(JsonResponse(protocol.result_body(message, result)))


def _request_id(value: object) -> str | int | None:
    """The id to answer an error with: a string or an integer (JSON true is no id), else null."""
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) else None


def _raw_headers(request: HttpRequest) -> list[tuple[str, str]]:
    """Header lines as sent, so a repeated routing header can be seen (ASGI keeps them)."""
    scope = getattr(request, "scope", None)
    if scope is not None:
        return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope.get("headers", [])]
    return [(k, v) for k, v in request.headers.items()]
