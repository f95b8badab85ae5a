"""What one request, one answer and one caller may cost, and what the database can store.

Everything here runs before a request touches a paused call:

- `loads`: the body as JSON, refusing what is not JSON (NaN, Infinity, numbers that overflow to
  them, unpaired surrogates) with -32700, and with -32600 nesting deeper than MCP_MAX_JSON_DEPTH
  and integers outside 64 bits. Python's own parser raises RecursionError past ~1,000 levels;
  PostgreSQL and LangGraph's serializers have limits of their own below that, and LangGraph's
  checkpoint serializer (ormsgpack) cannot store a larger integer.
- `resume_value_error`: the same rules for what an answer turns into before it resumes an agent
  (a review's edited arguments are JSON inside a string).
- `check_stored_values`: text that ends up in a JSONB column (tool arguments, context, answers)
  may not contain U+0000, which PostgreSQL cannot store.
- `check_input_responses`: at most MCP_MAX_INPUT_RESPONSES answers per request, each at most
  MCP_MAX_ANSWER_BYTES as JSON. questions.build_round refuses to ask a round of more questions than
  that, since a round is answered in one request.
- `retry_after`: a fixed-window limit of MCP_RATE_LIMIT_PER_MINUTE requests per caller and minute
  on Django's cache (Redis in production, so every web process shares the count); 0 turns it off.
"""

from __future__ import annotations

import json
import logging
import math
import time
from typing import Any

from django.conf import settings
from django.core.cache import caches

from mcp_gateway.protocol import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, RpcError

logger = logging.getLogger(__name__)

# MCP assigns no code to rate limiting. Of JSON-RPC's server range it reserves -32020..-32099 for
# its own codes and leaves -32000..-32019 to implementations (mcp_types/jsonrpc.py); -32000 and
# -32001 are the SDK's own, -32002 is retired and never reused.
RATE_LIMITED = -32003
WINDOW_SECONDS = 60


# --- the body -------------------------------------------------------------------------------------


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("number out of range")
    return value


# What msgpack, and so LangGraph's checkpoints, can hold.
INTEGERS = range(-(2**63), 2**64)


class _OutOfRange(ValueError):
    pass


def _integer(text: str) -> int:
    # Checked on the digits first: Python refuses to convert more than 4,300 of them.
    if len(text) > 21 or (value := int(text)) not in INTEGERS:
        raise _OutOfRange
    return value


def loads(raw: bytes) -> Any:
    """The body as JSON. Raises RpcError (-32700, or -32600 for nesting too deep or integers too large)."""
    try:
        # JSON over HTTP is UTF-8 without a byte-order mark (RFC 8259, section 8.1): json.loads would
        # also take bytes in UTF-16 or UTF-32, or after a BOM, which no MCP client sends.
        text = raw.decode("utf-8")
        body = json.loads(text, parse_constant=_not_json, parse_float=_finite, parse_int=_integer)
    except RecursionError:
        raise too_deep() from None
    except _OutOfRange:
        raise out_of_range(INVALID_REQUEST, "Invalid Request") from None
    except (ValueError, UnicodeDecodeError):
        raise RpcError(PARSE_ERROR, "Parse error") from None
    check_shape(body)
    return body


def too_deep(code: int = INVALID_REQUEST, prefix: str = "Invalid Request") -> RpcError:
    return RpcError(code, f"{prefix}: JSON nested deeper than {settings.MCP_MAX_JSON_DEPTH} levels")


def out_of_range(code: int, prefix: str) -> RpcError:
    return RpcError(code, f"{prefix}: integers must lie between -2**63 and 2**64 - 1")


def check_shape(value: Any) -> None:
    """Depth and text of a decoded body, without recursion."""
    limit = settings.MCP_MAX_JSON_DEPTH
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            if depth > limit:
                raise too_deep()
            for key, item in node.items():
                _check_text(key)
                stack.append((item, depth + 1))
        elif isinstance(node, list):
            if depth > limit:
                raise too_deep()
            stack.extend((item, depth + 1) for item in node)
        elif isinstance(node, str):
            _check_text(node)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # An escaped unpaired surrogate ("\ud800"): valid JSON syntax, but no Unicode text.
        raise RpcError(PARSE_ERROR, "Parse error: the body contains an unpaired surrogate") from None


# --- tools/call parameters ---------------------------------------------------------------------


def _has_nul(value: Any) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                return True
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def check_stored_values(**values: Any) -> None:
    for name, value in values.items():
        if _has_nul(value):
            raise RpcError(INVALID_PARAMS, f"Invalid params: {name} may not contain the character U+0000")


def resume_value_error(value: Any) -> RpcError | None:
    """What an answer turned into, before it resumes an agent: storable in PostgreSQL and in
    LangGraph's checkpoints, as the request body had to be (`loads`). Else a -32602 to raise."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)) and depth > settings.MCP_MAX_JSON_DEPTH:
            return too_deep(INVALID_PARAMS, "Invalid params")
        if isinstance(node, dict):
            stack.extend((item, depth + 1) for item in (*node.keys(), *node.values()))
        elif isinstance(node, list):
            stack.extend((item, depth + 1) for item in node)
        elif isinstance(node, str):
            if "\x00" in node:
                return RpcError(INVALID_PARAMS, "Invalid params: an answer may not contain the character U+0000")
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                return RpcError(INVALID_PARAMS, "Invalid params: an answer contains an unpaired surrogate")
        elif isinstance(node, float) and not math.isfinite(node):
            return RpcError(INVALID_PARAMS, "Invalid params: an answer contains a number out of range")
        elif isinstance(node, int) and not isinstance(node, bool) and node not in INTEGERS:
            return out_of_range(INVALID_PARAMS, "Invalid params")
    return None


def check_input_responses(responses: Any) -> None:
    if not isinstance(responses, dict):
        return
    most = settings.MCP_MAX_INPUT_RESPONSES
    if len(responses) > most:
        raise RpcError(
            INVALID_PARAMS,
            f"Invalid params: at most {most} inputResponses per request",
            {"limit": most, "received": len(responses)},
        )
    largest = settings.MCP_MAX_ANSWER_BYTES
    for key, answer in responses.items():
        if len(json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode()) > largest:
            raise RpcError(
                INVALID_PARAMS,
                f"Invalid params: an answer may be at most {largest} bytes of JSON",
                {"key": key, "limit": largest},
            )


# --- calls per caller and minute ---------------------------------------------------------------


def retry_after(identity: str, now: float | None = None) -> int | None:
    """Count one request of `identity`; None while under the limit, else the seconds to wait."""
    limit = settings.MCP_RATE_LIMIT_PER_MINUTE
    if not limit:
        return None
    now = time.time() if now is None else now
    window = int(now // WINDOW_SECONDS)
    key = f"mcp:rate:{identity}:{window}"
    cache = caches[settings.MCP_RATE_LIMIT_CACHE]
    try:
        # add() starts the window's count only if no other request has; incr() is atomic on Redis.
        cache.add(key, 0, timeout=WINDOW_SECONDS + 5)
        try:
            count = cache.incr(key)
        except ValueError:  # the key expired between add() and incr()
            cache.set(key, 1, timeout=WINDOW_SECONDS + 5)
            count = 1
    except Exception:
        # A rate limiter that is down lets requests through rather than taking the service down.
        logger.warning("rate limiter unavailable; request let through", exc_info=True)
        return None
    if count <= limit:
        return None
    return max(1, math.ceil((window + 1) * WINDOW_SECONDS - now))


def rate_limited(seconds: int) -> RpcError:
    return RpcError(
        RATE_LIMITED,
        "Too many requests: try again later",
        {"retryAfterSeconds": seconds, "limitPerMinute": settings.MCP_RATE_LIMIT_PER_MINUTE},
        http_status=429,
        retry_after=seconds,
    )
