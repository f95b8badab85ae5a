"""A terminal MCP client for trying the service: `python -m mcp_gateway.demo URL TOKEN [TOOL] [JSON_ARGS]`.

It is the official mcp SDK client, pinned to 2026-07-28, asking you each elicitation question at
the prompt. Without TOOL it lists the tools and their arguments; JSON_ARGS are the tool's
arguments as a JSON object, e.g. '{"message": "Hello"}'.

At any prompt, /decline declines the question and /cancel (or end of input, Ctrl-D) cancels it,
as an MCP client's buttons would. A form that breaks its schema is asked again. Errors are
printed as one line each and exit with status 1.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import signal
import sys
from typing import Any, Literal

import httpx2
import jsonschema
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

USAGE = "usage: python -m mcp_gateway.demo URL TOKEN [TOOL] [JSON_ARGS]"


class Interrupted(Exception):
    """Ctrl-C at a prompt: an ordinary exception, so the SDK's task groups unwind as for an error."""


class Dismissed(Exception):
    """The person declined or cancelled the question at a prompt."""

    def __init__(self, action: Literal["decline", "cancel"]) -> None:
        self.action = action


def _prompt(label: str) -> str:
    try:
        raw = input(label).strip()
    except EOFError:
        raise Dismissed("cancel") from None
    except KeyboardInterrupt:
        raise Interrupted from None
    if raw == "/decline":
        raise Dismissed("decline")
    if raw == "/cancel":
        raise Dismissed("cancel")
    return raw


def _choices(schema: dict[str, Any]) -> list[Any]:
    return [o["const"] for o in schema.get("oneOf", schema.get("anyOf", []))] or schema.get("enum") or []


def _hint(schema: dict[str, Any], required: bool) -> str:
    """What the field allows, so a wrong answer is not the first the person hears of it."""
    parts = []
    if choices := _choices(schema):
        parts.append(" | ".join(map(str, choices)))
    if schema.get("type") == "array":
        choices = _choices(schema.get("items", {}))
        parts.append(f"any of {' | '.join(map(str, choices))}, comma-separated" if choices else "comma-separated")
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None or high is not None:
        parts.append(f"{'' if low is None else low}–{'' if high is None else high}")
    if schema.get("type") == "boolean":
        parts.append("y/n")
    if not required:
        parts.append("optional")
    if (default := schema.get("default")) is not None:
        parts.append(f"default {default}")
    return f" ({', '.join(parts)})" if parts else ""


def _ask_field(name: str, schema: dict[str, Any], required: bool, only: bool) -> Any:
    # A text question's one field, `response`, says nothing the question did not: no label.
    hint = _hint(schema, required)
    plain = only and name == "response" and "title" not in schema and not hint
    label = "  > " if plain else f"  {schema.get('title', name)}{hint}: "
    while True:
        raw = _prompt(label)
        if not raw:
            return schema.get("default")
        kind = schema.get("type")
        try:
            if kind == "integer":
                return int(raw)
            if kind == "number" and math.isfinite(number := float(raw)):
                return number
            if kind == "number":
                raise ValueError(raw)
        except ValueError:
            expected = "an integer" if kind == "integer" else "a finite number"
            print(f"  {raw!r} is not {expected}; try again (or /decline, /cancel)")
            continue
        if kind == "boolean":
            return raw.lower() in ("y", "yes", "true", "1")
        if kind == "array":
            return [item.strip() for item in raw.split(",") if item.strip()]
        return raw


async def _answer(context, params) -> types.ElicitResult:
    print(f"\n? {params.message}")
    try:
        if getattr(params, "mode", "form") == "url":
            print(f"  Open {params.url} and finish there.")
            done = _prompt("  Done? [y/N] ").lower() in ("y", "yes")
            return types.ElicitResult(action="accept" if done else "decline")
        schema = params.requested_schema
        fields = schema.get("properties", {})
        required = set(schema.get("required", []))
        while True:
            content = {}
            for name, field in fields.items():
                value = _ask_field(name, field, name in required, only=len(fields) == 1)
                if value is not None:
                    content[name] = value
            # The server would refuse a form that breaks its schema and end the call (-32602):
            # ask again here instead, with what was wrong. (With nothing to ask, send it as it is.)
            validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
            problems = [
                f"{'/'.join(map(str, e.absolute_path)) or 'answer'}: {e.message}"
                for e in validator.iter_errors(content)
            ]
            if not problems or not fields:
                return types.ElicitResult(action="accept", content=content)
            print("\n".join(f"  {problem}" for problem in sorted(problems)) + "\n  try again (or /decline, /cancel)")
    except Dismissed as dismissed:
        return types.ElicitResult(action=dismissed.action)


def _arguments(tool: types.Tool) -> str:
    schema = tool.input_schema or {}
    required = schema.get("required", [])
    optional = [name for name in schema.get("properties", {}) if name not in required]
    said = [f"arguments: {', '.join(required)}"] if required else []
    said += [f"optional arguments: {', '.join(optional)}"] if optional else []
    return "; ".join(said) or "no arguments"


async def main(url: str, token: str, tool: str | None, arguments: dict[str, Any]) -> int:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=300)
    async with Client(
        streamable_http_client(url, http_client=http), mode="2026-07-28", elicitation_callback=_answer
    ) as client:
        if tool is None:
            for t in (await client.list_tools()).tools:
                print(f"{t.name}\n    {t.description or ''}\n    {_arguments(t)}")
            return 0
        result = await client.call_tool(tool, arguments)
    text = "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))
    print("\n" + text)
    if result.structured_content is not None and not _same_json(text, result.structured_content):
        print(json.dumps(result.structured_content, ensure_ascii=False))
    return 1 if result.is_error else 0


def _same_json(text: str, value: Any) -> bool:
    try:
        return json.loads(text) == value
    except ValueError:
        return False


def _errors(error: BaseException) -> list[BaseException]:
    """The SDK client raises from inside a task group: the errors inside its exception groups."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _errors(inner)]
    return [error]


def _describe(error: BaseException) -> str:
    if isinstance(error, MCPError):
        detail = error.data.get("detail") if isinstance(error.data, dict) else None
        return f"{error.message} ({error.code})" + (f": {detail}" if detail else "")
    return str(error) or type(error).__name__


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def run(argv: list[str]) -> int:
    if len(argv) < 2 or len(argv) > 4:
        print(USAGE, file=sys.stderr)
        return 2
    url, token, tool = argv[0], argv[1], argv[2] if len(argv) > 2 else None
    try:
        arguments = json.loads(argv[3]) if len(argv) > 3 else {}
    except json.JSONDecodeError as error:
        print(f"error: JSON_ARGS is not JSON: {error}", file=sys.stderr)
        return 2
    if not isinstance(arguments, dict):
        print("error: JSON_ARGS must be a JSON object", file=sys.stderr)
        return 2
    # The SDK logs some failures as it raises them, and asyncio a Ctrl-C that cut a task short: say
    # each once, below.
    for name in ("mcp", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    # asyncio.run would turn the first Ctrl-C into a cancellation that a blocked prompt never sees,
    # and only the second into KeyboardInterrupt; a handler of our own makes the first one count.
    signal.signal(signal.SIGINT, _interrupt)
    try:
        return asyncio.run(main(url, token, tool, arguments))
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except BaseException as error:  # noqa: BLE001 - a demo prints what went wrong, not a traceback
        for leaf in _errors(error):
            if isinstance(leaf, (KeyboardInterrupt, Interrupted)):
                print("\ninterrupted", file=sys.stderr)
                return 130
            print(f"error: {_describe(leaf)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
