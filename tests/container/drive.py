"""What `make container-test` (tests/container/run.sh) drives against the compose stack, as a user
and a member of staff would: a tool call through a paused round with the official MCP SDK client,
then a call handed to staff and approved through the staff REST API, through to the agent's answer.

    drive.py --wait URL        until the web answers /health/ (the database, the checkpointer, Redis)
    drive.py URL               the call and the approval (ADMIN_TOKEN in the environment)
    drive.py --json-lines LOG…  every line of each log is one JSON object
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time

import httpx
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

WEB_CONTAINER = "hitl-container-test_web_1"
OWNER_MESSAGE = "Please pass a message to the owner: hire me?"


def wait(url: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            response = httpx.get(f"{url}/health/?format=json", timeout=5)
            if response.status_code == 200:
                return
            last = f"{response.status_code} {response.text}"
        except httpx.HTTPError as error:
            last = repr(error)
        time.sleep(1)
    sys.exit(f"the web did not become healthy within {timeout:g} s: {last}")


def mcp_token(username: str) -> str:
    """A new MCP token of a user who is not staff: the visitor whose call staff approve."""
    done = subprocess.run(
        ["podman", "exec", WEB_CONTAINER, "python", "manage.py", "mcp_token", username],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


async def call(url: str, token: str, tool: str, arguments: dict, answer: dict | None = None):
    asked: list[str] = []

    async def elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content=answer or {})

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
    async with Client(
        streamable_http_client(f"{url}/mcp/", http_client=http), mode="2026-07-28", elicitation_callback=elicit
    ) as client:
        result = await client.call_tool(tool, arguments)
    return result, asked


def drive(url: str) -> None:
    token = mcp_token("container-visitor")

    result, asked = asyncio.run(call(url, token, "choose_region", {}, {"response": "eu-west-1"}))
    assert asked, "choose_region asked nothing: no paused round"
    assert result.structured_content == {"region": "eu-west-1"}, result
    print(f"drive: choose_region asked {asked[0]!r}, answered, and returned {result.structured_content}")

    result, _ = asyncio.run(call(url, token, "digital_twin", {"message": OWNER_MESSAGE}))
    handed = result.structured_content
    assert handed["status"] == "pending", result
    api = httpx.Client(headers={"Authorization": f"Bearer {os.environ['ADMIN_TOKEN']}"}, timeout=120)
    queue = f"{url}/api/admin/approvals"
    pending = api.get(queue).raise_for_status().json()
    [approval] = [a for a in pending if a["id"] == handed["approval_id"]]
    decided = api.post(f"{queue}/{approval['thread_id']}", json={"approved": True, "note": "approved in the stack"})
    assert decided.status_code in (200, 202), decided.text
    deadline = time.monotonic() + 120
    while (detail := api.get(f"{queue}/{approval['id']}").raise_for_status().json())["answer"] is None:
        assert time.monotonic() < deadline, f"the resumed run did not answer: {detail}"
        time.sleep(0.5)
    assert detail["status"] == "approved" and not detail["error"], detail
    print(f"drive: digital_twin handed to staff, approved through the REST API; the agent said {detail['answer']!r}")


def json_lines(paths: list[str]) -> None:
    for path in paths:
        with open(path, errors="replace") as file:
            lines = file.read().splitlines()
        assert lines, f"{path} is empty"
        for number, line in enumerate(lines, 1):
            try:
                assert isinstance(json.loads(line), dict)
            except (ValueError, AssertionError):
                sys.exit(f"{path}:{number} is not a JSON object: {line!r}")
        print(f"drive: {path.rsplit('/', 1)[-1]}: {len(lines)} lines, each a JSON object")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--wait", action="store_true")
    parser.add_argument("--json-lines", action="store_true")
    parser.add_argument("targets", nargs="+")
    options = parser.parse_args()
    if options.json_lines:
        json_lines(options.targets)
    elif options.wait:
        wait(options.targets[0])
    else:
        drive(options.targets[0])


if __name__ == "__main__":
    main()
