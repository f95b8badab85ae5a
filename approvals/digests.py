"""What staff approve, as one SHA-256: the canonical JSON (RFC 8785, JCS) of the graph, each tool
call (its tool and arguments), the MCP caller, and the rule that required staff (its id and
version). The same action always gives the same digest, whatever the order of its keys or how its
numbers were written; any change to it gives another.

An approval records the digest of the action as requested and of the action as approved (staff's
edited arguments, or the same). The resume recomputes both from what would run, and runs nothing
unless they match (resumes.py).
"""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

# I-JSON's exact integers (RFC 7493): JCS writes numbers as IEEE doubles, and refuses integers
# past this. Such an integer is hashed as its decimal text instead, so it is never rounded into
# another number's digest.
SAFE_INTEGER = 2**53 - 1


def canonical_json(value: Any) -> bytes:
    return rfc8785.dumps(_exact(value))


def _exact(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(key): _exact(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_exact(item) for item in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > SAFE_INTEGER:
        return str(value)
    return value


def sha256(value: Any) -> str:
    return hashlib.sha256(canonical_json(value)).hexdigest()


def action(
    *, graph: str, tool_calls: list[dict[str, Any]], caller: str, policy_id: int | None, policy_version: int | None
) -> dict[str, Any]:
    """The action as its digest covers it."""
    return {
        "graph": graph,
        "calls": [{"tool": call.get("name"), "arguments": call.get("input")} for call in tool_calls],
        "caller": caller,
        "policy": {"id": policy_id, "version": policy_version},
    }


def action_digest(**parts: Any) -> str:
    return sha256(action(**parts))
