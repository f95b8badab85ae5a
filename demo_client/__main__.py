"""A terminal MCP client for trying the service: `python -m demo_client URL TOKEN [TOOL] [JSON_ARGS]`.
One file on purpose, which a user can read or copy (see below).

It is the official mcp SDK client, pinned to 2026-07-28, with the rounds of a call driven here
(`_call`) so that an answer the server refuses can be asked again. `--help` says how to use it.
Errors are printed as one line each and exit with status 1.

One file on purpose, which a user can read or copy: asking a form's fields at a prompt (with the
hint, the parse and the check of each answer against its schema) and driving a call's rounds are the
whole client, and nothing else in the service imports it.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import math
import signal
import sys
import time
import urllib.parse
from typing import Any, Literal

import httpx2
import jsonschema
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


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


FORMATS = {
    "email": "an e-mail address",
    "uri": "a URL",
    "date": "a date (YYYY-MM-DD)",
    "date-time": "a date and time (YYYY-MM-DDTHH:MM:SSZ)",
}


def _plain(error: jsonschema.ValidationError) -> str:
    """A validator's complaint about one field in words a person answering a form uses."""
    value, limit = error.instance, error.validator_value
    shown = f"{value!r}" if isinstance(value, str) else json.dumps(value)
    match error.validator:
        case "enum" | "oneOf" | "anyOf" | "const":
            return f"{shown} is not one of the choices: {' | '.join(map(str, _choices(error.schema)))}"
        case "minimum":
            return f"{shown} is below {limit}, the smallest allowed"
        case "maximum":
            return f"{shown} is above {limit}, the largest allowed"
        case "minLength":
            return f"it needs at least {limit} character{'s' if limit != 1 else ''}"
        case "maxLength":
            return f"it may have at most {limit} characters"
        case "minItems":
            return f"choose at least {limit}"
        case "maxItems":
            return f"choose at most {limit}"
        case "format":
            return f"{shown} is not {FORMATS.get(limit, f'a valid {limit}')}"
        case "type":
            return f"{shown} is not {'a number' if limit in ('number', 'integer') else f'a {limit}'}"
    return error.message


def _field_error(schema: dict[str, Any], value: Any) -> str | None:
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    return None if error is None else _plain(error)


def _parse(raw: str, schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if kind == "integer":
        return int(raw)
    if kind == "number":
        if not math.isfinite(number := float(raw)):
            raise ValueError(raw)
        return number
    if kind == "boolean":
        if raw.lower() in ("y", "yes", "true", "1"):
            return True
        if raw.lower() in ("n", "no", "false", "0"):
            return False
        raise ValueError(raw)
    if kind == "array":
        return [item.strip() for item in raw.split(",") if item.strip()]
    return raw


NOT_A = {"integer": "a whole number", "number": "a finite number", "boolean": "y or n"}


def _ask_field(name: str, schema: dict[str, Any], required: bool, only: bool) -> Any:
    """One field's answer, checked as it is typed: the person is asked again at once, in plain
    words, rather than after the last field."""
    # A text question's one field, `response`, says nothing the question did not: no label.
    hint = _hint(schema, required)
    plain = only and name == "response" and "title" not in schema and not hint
    label = "  > " if plain else f"  {schema.get('title', name)}{hint}: "
    while True:
        raw = _prompt(label)
        if not raw:
            if schema.get("default") is not None or not required:
                return schema.get("default")
            print("  an answer is required here; try again (or /decline, /cancel)")
            continue
        try:
            value = _parse(raw, schema)
        except ValueError:
            print(f"  {raw!r} is not {NOT_A[schema['type']]}; try again (or /decline, /cancel)")
            continue
        if (problem := _field_error(schema, value)) is None:
            return value
        print(f"  {problem}; try again (or /decline, /cancel)")


def _is_review(fields: dict[str, Any]) -> bool:
    """The form this service asks for a reviewed tool call (docs/writing-agents.md): a decision,
    and a message or arguments that only some decisions use."""
    choices = set(_choices(fields.get("decision", {})))
    return (
        bool(choices)
        and choices <= {"approve", "edit", "reject", "respond"}
        and set(fields)
        <= {
            "decision",
            "message",
            "args",
        }
    )


def _review(fields: dict[str, Any]) -> dict[str, Any]:
    """A review asks only what the decision uses: the message for reject (optional) and respond
    (required), the arguments for edit, which must be a JSON object."""
    decision = _ask_field("decision", fields["decision"], True, only=False)
    content: dict[str, Any] = {"decision": decision}
    if decision in ("reject", "respond") and "message" in fields:
        schema = dict(fields["message"], title="Why you reject it" if decision == "reject" else "The answer to send")
        if (message := _ask_field("message", schema, required=decision == "respond", only=False)) is not None:
            content["message"] = message
    if decision == "edit" and "args" in fields:
        while True:
            raw = _ask_field("args", fields["args"], required=False, only=False)
            try:
                parsed = json.loads(raw) if raw is not None else None
            except ValueError:
                parsed = None
            if raw is None or isinstance(parsed, dict):
                break
            print('  the arguments must be a JSON object, such as {"to": "ada@example.com"}; try again')
        if raw is not None:
            content["args"] = raw
    return content


def _ask(params: Any) -> types.ElicitResult:
    """One elicitation question asked at the prompt."""
    print(f"\n? {params.message}")
    try:
        if getattr(params, "mode", "form") == "url":
            print(f"  Open {params.url} and finish there.")
            done = _prompt("  Done? [y/N] ").lower() in ("y", "yes")
            return types.ElicitResult(action="accept" if done else "decline")
        schema = params.requested_schema
        fields = schema.get("properties", {})
        if _is_review(fields):
            return types.ElicitResult(action="accept", content=_review(fields))
        required = set(schema.get("required", []))
        content = {}
        for name, field in fields.items():
            value = _ask_field(name, field, name in required, only=len(fields) == 1)
            if value is not None:
                content[name] = value
        return types.ElicitResult(action="accept", content=content)
    except Dismissed as dismissed:
        return types.ElicitResult(action=dismissed.action)


async def _never(context, params) -> types.ElicitResult:
    # Declares the elicitation capability; the rounds are driven by _call, which asks itself.
    raise AssertionError("rounds are driven by _call")


class Status:
    """A status line on a terminal while the server works (a run may take a while), erased once
    the answer comes; nothing where stderr is not a terminal."""

    FRAMES = "|/-\\"

    def __init__(self, text: str, since: float, stream: Any = None) -> None:
        self.text, self.since, self.stream = text, since, stream or sys.stderr
        self.task: asyncio.Task | None = None

    async def _spin(self) -> None:
        for frame in itertools.cycle(self.FRAMES):
            await asyncio.sleep(0.1)
            self.stream.write(f"\r{frame} {self.text} ({time.monotonic() - self.since:.0f}s)")
            self.stream.flush()

    async def __aenter__(self) -> Status:
        if self.stream.isatty():
            self.task = asyncio.create_task(self._spin())
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self.task is not None:
            self.task.cancel()
            self.stream.write("\r\033[K")
            self.stream.flush()


async def _call(client: Client, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
    """The call and its rounds, driven here rather than by the SDK: an answer the server refuses
    (-32602, which keeps the round open) is asked again with the server's reason, where the SDK
    would give up and leave the call waiting for its lifetime."""

    since = time.monotonic()  # the run's start, or the latest answer's

    async def send(**resumed: Any) -> Any:
        async with Status(f"{tool} is running", since):
            return await client.session.call_tool(tool, arguments, allow_input_required=True, **resumed)

    result = await send()
    while isinstance(result, types.InputRequiredResult):
        state = result.request_state
        if not result.input_requests:  # still running: collect the outcome with the requestState
            result = await send(request_state=state)
            continue
        answers = {key: _ask(request.params) for key, request in result.input_requests.items()}
        since = time.monotonic()
        while True:
            try:
                result = await send(input_responses=answers, request_state=state)
                break
            except MCPError as error:
                if not _refused_answer(error):
                    raise
                print(f"\n  The server refused the answer: {_describe(error)}\n  Answer again (or /decline, /cancel).")
                # The error names the question it refused: only that one is asked again, and the
                # round's other answers are sent as they were.
                refused = error.data.get("key") if isinstance(error.data, dict) else None
                again = [refused] if refused in answers else list(answers)
                answers |= {key: _ask(result.input_requests[key].params) for key in again}
    assert isinstance(result, types.CallToolResult)
    return result


def _refused_answer(error: MCPError) -> bool:
    """-32602 for an answer (the round stays open), not for a requestState that no longer works."""
    reason = error.data.get("reason") if isinstance(error.data, dict) else None
    return error.code == -32602 and reason != "invalid_request_state"


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
        streamable_http_client(url, http_client=http), mode="2026-07-28", elicitation_callback=_never
    ) as client:
        if tool is None:
            for t in (await client.list_tools()).tools:
                print(f"{t.name}\n    {t.description or ''}\n    {_arguments(t)}")
            return 0
        result = await _call(client, tool, arguments)
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


def _explain(error: BaseException, url: str) -> str:
    """What went wrong, with the fix, for the likeliest mistakes in URL; else the error itself."""
    if isinstance(error, httpx2.ConnectError):
        return (
            f"nothing answers at {url} ({error or 'connection failed'}): check the host and port "
            "against the URL `make run` printed, and that it is still running"
        )
    endpoint = urllib.parse.urlsplit(url).path.rstrip("/").endswith("/mcp")
    if not endpoint and isinstance(error, (MCPError, httpx2.HTTPError)):
        fixed = urllib.parse.urlunsplit(urllib.parse.urlsplit(url)._replace(path="/mcp/", query="", fragment=""))
        return (
            f"{url} is not the MCP endpoint ({_describe(error)}): the endpoint is /mcp/, with its "
            f"trailing slash; try {fixed}"
        )
    return _describe(error)


def _token_problem(token: str) -> str | None:
    if not token.strip():
        return (
            "TOKEN is empty: paste the `export MCP_TOKEN=...` line that `make run` printed into this "
            'terminal and pass "$MCP_TOKEN", or make a token with `python manage.py mcp_token USERNAME`'
        )
    if not token.isascii() or not token.isprintable() or token != token.strip() or " " in token:
        return "TOKEN has spaces or characters a token never has: copy it again from the `export MCP_TOKEN=...` line"
    return None


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


HELP = """\
Calls a tool of an MCP server that pauses for input, and asks you each question at the prompt.

examples:
  python -m demo_client http://127.0.0.1:8000/mcp/ "$MCP_TOKEN"            list the tools
  python -m demo_client http://127.0.0.1:8000/mcp/ "$MCP_TOKEN" greeter    call one
  python -m demo_client http://127.0.0.1:8000/mcp/ "$MCP_TOKEN" digital_twin \\
      '{"message": "Please contact the owner about a job"}'

at a prompt:
  /decline          decline the question (as a client's Decline button would)
  /cancel, Ctrl-D   cancel it
  Ctrl-C            stop the client (the call stays paused on the server until it expires)
  an empty line     the field's default, or leave an optional field out
  y / n             a yes-or-no field; a comma-separated list for a multiple choice

Each answer is checked as you type it; one the server refuses is asked again with its reason.
A review of a tool call asks for the decision first, then only what that decision uses.

exit status: 0 the tool's result, 1 an error result or a failure, 2 a mistake in these arguments,
130 interrupted.
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m demo_client", description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("url", metavar="URL", help="the MCP endpoint, with its trailing slash (…/mcp/)")
    parser.add_argument("token", metavar="TOKEN", help="an MCP token (make run prints one)")
    parser.add_argument("tool", metavar="TOOL", nargs="?", help="the tool to call; without it, list the tools")
    parser.add_argument("json_args", metavar="JSON_ARGS", nargs="?", help="the tool's arguments, as a JSON object")
    return parser


def run(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as done:  # --help (0), or a usage mistake (2), already printed
        return int(done.code or 0)
    url, token, tool = args.url, args.token, args.tool
    try:
        arguments = json.loads(args.json_args) if args.json_args is not None else {}
    except json.JSONDecodeError as error:
        print(f"error: JSON_ARGS is not JSON: {error}", file=sys.stderr)
        return 2
    if not isinstance(arguments, dict):
        print("error: JSON_ARGS must be a JSON object", file=sys.stderr)
        return 2
    if (problem := _token_problem(token)) is not None:
        print(f"error: {problem}", file=sys.stderr)
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
            print(f"error: {_explain(leaf, url)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
