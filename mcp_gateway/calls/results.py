"""CallToolResult bodies, and turning graph output into JSON."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from typing import Any

from pydantic import BaseModel

from mcp_gateway.calls import content_blocks

logger = logging.getLogger(__name__)

BAD_CONTENT = "This tool's output has a content block that MCP can't carry"


def jsonable(value: Any) -> Any:
    """Graph state as plain JSON: pydantic models (LangChain messages too), dataclasses, sets."""
    if isinstance(value, BaseModel):
        return jsonable(value.model_dump(mode="json"))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {jsonable(str(k)): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN or Infinity, and PostgreSQL refuses them in a JSON column
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")  # nor can PostgreSQL store U+0000 in text
    if value is None or isinstance(value, (int, float, bool)):
        return value
    return jsonable(str(value))


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def success(values: dict[str, Any]) -> dict[str, Any]:
    """The graph's final output as JSON text, plus the same object as structuredContent; or, when
    its state has content blocks (content_blocks.py), those blocks, plus the rest of the state as
    structuredContent. Blocks that are not valid give an error result naming the block."""
    try:
        given = content_blocks.split(values)
    except content_blocks.BadContent as exc:
        logger.warning("a graph's output has a content block that MCP can't carry: %s", exc)
        return error(f"{BAD_CONTENT}: {exc}.")
    if given is not None:
        blocks, rest = given
        return {"content": jsonable(blocks), "structuredContent": jsonable(rest), "isError": False}
    data = jsonable(values)
    return {"content": [{"type": "text", "text": compact(data)}], "structuredContent": data, "isError": False}


def error(*texts: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": jsonable(t)} for t in texts], "isError": True}


AT_BREAKPOINT = "This tool stopped at a breakpoint (interrupt_before/interrupt_after), which can't be resumed over MCP."


def at_breakpoint(values: dict[str, Any], *, answerable: bool) -> dict[str, Any]:
    """A run stopped at a static breakpoint (docs/writing-agents.md): for a client that can elicit,
    an error result; for others, the state at the breakpoint as a normal result."""
    return error(AT_BREAKPOINT) if answerable else success(values)
