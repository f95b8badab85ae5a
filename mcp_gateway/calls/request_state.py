"""requestState: opaque to the client, bound to the call, stored only as a keyed hash.

A requestState is `<round id>.<HMAC(secret, round id | caller | graph | tool | arguments digest)>`.
It is deterministic, so every concurrent request for the same round is answered with the same
one, and the binding is checked by recomputing it from the request. The table holds only a second
keyed hash of it, so reading the database does not reveal a usable value.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections.abc import Callable
from typing import Any

from django.utils.crypto import constant_time_compare, salted_hmac

from mcp_gateway.calls import store
from mcp_gateway.models import Round
from mcp_gateway.protocol import invalid_request_state


def arguments_digest(arguments: dict[str, Any]) -> str:
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def mint(round_id: uuid.UUID, *, caller: str, graph: str, tool: str, args_digest: str) -> str:
    binding = "|".join((str(round_id), caller, graph, tool, args_digest))
    mac = salted_hmac("mcp_gateway.request_state", binding, algorithm="sha256").digest()
    return f"{round_id}.{b64(mac)}"


def stored_hash(request_state: str) -> str:
    return salted_hmac("mcp_gateway.request_state.stored", request_state, algorithm="sha256").hexdigest()


def of_round(round_: Round) -> str:
    """The requestState of a round, as its call's caller, tool and arguments bind it."""
    call = round_.call
    return mint(round_.id, caller=call.caller, graph=call.graph, tool=call.tool_name, args_digest=call.arguments_digest)


def id_of(token: Any) -> uuid.UUID | None:
    """The id a signed handle (`<id>.<mac>`: a requestState, or a task id) names, if it is one."""
    if not isinstance(token, str) or len(token) > 200:
        return None
    head, _, _ = token.partition(".")
    try:
        return uuid.UUID(head)
    except ValueError:
        return None


def matches(token: str, expected: str, stored: str, *, stored_hash: Callable[[str], str] = stored_hash) -> bool:
    """Whether a handle is the one minted (`expected`) and the one whose keyed hash the row holds."""
    # Both comparisons run whatever the first one says, so timing reveals nothing.
    binding_ok = constant_time_compare(token, expected)
    stored_ok = constant_time_compare(stored_hash(token), stored)
    return binding_ok and stored_ok


def verified_round(request_state: Any, *, caller: str, tool: str, args_digest: str) -> Round:
    """The requestState must be the one minted for this caller, tool and arguments
    (docs/rules.md, "Bound state"), and its call must not have expired. Every failure looks alike
    (docs/rules.md, "Invalid state"): RpcError -32602 "Invalid or expired requestState"."""
    round_id = id_of(request_state)
    round_ = store.round_with_call(round_id) if round_id else None
    if round_ is None:
        raise invalid_request_state()
    expected = mint(round_.id, caller=caller, graph=round_.call.graph, tool=tool, args_digest=args_digest)
    if not matches(str(request_state), expected, round_.request_state_hash) or round_.call.is_expired:
        raise invalid_request_state()
    return round_
