"""A terminal MCP client for trying the service: `python -m mcp_gateway.demo URL TOKEN [TOOL] [JSON_ARGS]`.

It is the official mcp SDK client, pinned to 2026-07-28, asking you each elicitation question at
the prompt. Without TOOL it lists the tools.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


def _ask_field(name: str, schema: dict[str, Any], required: bool) -> Any:
    choices = [o["const"] for o in schema.get("oneOf", [])] or schema.get("enum")
    hint = f" {choices}" if choices else ""
    default = schema.get("default")
    raw = input(
        f"  {schema.get('title', name)}{hint}{' (optional)' if not required else ''}"
        f"{f' [{default}]' if default is not None else ''}: "
    ).strip()
    if not raw:
        return default
    if schema.get("type") == "integer":
        return int(raw)
    if schema.get("type") == "number":
        return float(raw)
    if schema.get("type") == "boolean":
        return raw.lower() in ("y", "yes", "true", "1")
    return raw


async def _answer(context, params) -> types.ElicitResult:
    print(f"\n? {params.message}")
    if getattr(params, "mode", "form") == "url":
        print(f"  Open {params.url} and finish there.")
        ok = input("  Done? [y/N] ").strip().lower() in ("y", "yes")
        return types.ElicitResult(action="accept" if ok else "decline")
    schema = params.requested_schema
    required = set(schema.get("required", []))
    content = {}
    for name, field in schema["properties"].items():
        value = _ask_field(name, field, name in required)
        if value is not None:
            content[name] = value
    return types.ElicitResult(action="accept", content=content)


async def main(url: str, token: str, tool: str | None, arguments: dict[str, Any]) -> None:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=300)
    async with Client(
        streamable_http_client(url, http_client=http), mode="2026-07-28", elicitation_callback=_answer
    ) as client:
        if tool is None:
            for t in (await client.list_tools()).tools:
                print(f"{t.name:22} {t.description}")
            return
        result = await client.call_tool(tool, arguments)
        print("\n" + "\n".join(getattr(block, "text", "") for block in result.content))


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    args = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None, args))
