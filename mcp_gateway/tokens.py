"""requestState: opaque to the client, bound to the call, stored only as a keyed hash.

A token is `<round id>.<HMAC(secret, round id | caller | graph | tool | arguments digest)>`. It is
deterministic, so every concurrent request for the same round is answered with the same token,
and binding is checked by recomputing it from the request. The table holds only a second keyed
hash of it, so reading the database does not reveal a usable value.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from typing import Any

from django.utils.crypto import constant_time_compare, salted_hmac


def arguments_digest(arguments: dict[str, Any]) -> str:
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def request_state(round_id: uuid.UUID, *, caller: str, graph: str, tool: str, args_digest: str) -> str:
    binding = "|".join((str(round_id), caller, graph, tool, args_digest))
    mac = salted_hmac("mcp_gateway.request_state", binding, algorithm="sha256").digest()
    return f"{round_id}.{_b64(mac)}"


def stored_hash(token: str) -> str:
    return salted_hmac("mcp_gateway.request_state.stored", token, algorithm="sha256").hexdigest()


def round_id_of(token: Any) -> uuid.UUID | None:
    if not isinstance(token, str) or len(token) > 200:
        return None
    head, _, _ = token.partition(".")
    try:
        return uuid.UUID(head)
    except ValueError:
        return None


def matches(token: str, expected: str, token_hash: str) -> bool:
    # Both comparisons run whatever the first one says, so timing reveals nothing.
    binding_ok = constant_time_compare(token, expected)
    stored_ok = constant_time_compare(stored_hash(token), token_hash)
    return binding_ok and stored_ok
