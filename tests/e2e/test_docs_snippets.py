"""Every code block the README and docs mark as runnable (`<!-- runnable -->` on the line before)
runs as written against a served instance (the embedded default `make run` serves), and prints what
its comments promise: a snippet cannot rot. The snippets read the service's address and token from
MCP_URL and MCP_TOKEN, as `make run` prints them to export, so they run as written on any port."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.e2e.approvals import ADMIN_TOKEN, AdminAPI
from tests.e2e.embedded import serve
from tests.processes import ROOT

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = re.compile(r"^<!-- runnable -->\n```(\w+)\n(.*?)^```", re.S | re.M)
# An address written into a snippet, which fails against a `make run` on another port.
ADDRESS = re.compile(r"https?://(?:127\.0\.0\.1|localhost)[:/]")


def runnable_blocks() -> list[tuple[str, str, str]]:
    """(where, language, code) of each block marked runnable."""
    found = []
    for path in DOCUMENTS:
        text = path.read_text()
        for match in RUNNABLE.finditer(text):
            line = text[: match.start()].count("\n") + 2
            found.append((f"{path.relative_to(ROOT)}:{line}", match[1], match[2]))
    return found


def promised(code: str) -> list[str]:
    """What the block's comments say it prints: `print(...)  # WHAT` in Python, `# → WHAT` in a
    shell session; without the parts elided with "…", which differ from run to run."""
    said = re.findall(r"print\(.*\)\s+# (.+)$|^# → (.+)$", code, re.M)
    return [part.strip() for pair in said for text in pair if text for part in text.split("…") if part.strip()]


def squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)


def test_no_runnable_snippet_writes_the_services_address_it_reads_mcp_url():
    written = [where for where, _, code in runnable_blocks() if ADDRESS.search(code)]

    assert written == []
    assert all("MCP_URL" in code for _, _, code in runnable_blocks())


def test_the_compatibility_page_has_a_runnable_older_client_snippet():
    older = [
        where
        for where, language, code in runnable_blocks()
        if where.startswith("docs/compatibility.md") and language == "python" and 'mode="legacy"' in code
    ]

    assert len(older) == 1


def test_the_readme_marks_its_client_snippets_and_its_curl_session_runnable():
    marked = [(where, language) for where, language, _ in runnable_blocks() if where.startswith("README")]
    assert [language for _, language in marked].count("python") == 2, marked
    assert [language for _, language in marked].count("sh") == 1, marked


@pytest.fixture(scope="module")
def embedded_server(tmp_path_factory):
    """The embedded default, as `MCP_OLDER_CLIENTS=answer make run` serves it: docs/compatibility.md's
    older client answers its questions (a newer client's are asked as they always are)."""
    home = tmp_path_factory.mktemp("snippets")
    web, url, token = serve(home, MCP_OLDER_CLIENTS="answer", ADMIN_TOKEN=ADMIN_TOKEN)
    yield web, home, url, token
    web.stop()


@pytest.fixture(scope="module")
def staff_approving(embedded_server):
    """Approves, as staff would in the admin, each call that asks the owner "hire me?" (the message
    the snippets send when they wait for the answer) while a snippet runs; others keep waiting."""
    web, *_ = embedded_server
    api = AdminAPI(web.url, ADMIN_TOKEN)
    stop = threading.Event()

    def approve() -> None:
        while not stop.wait(0.3):
            for approval in api.pending().json():
                if "hire me?" not in json.dumps(approval):
                    continue
                api.decide(approval["thread_id"], approved=True, note="Approved by the snippet test")

    approver = threading.Thread(target=approve, daemon=True)
    approver.start()
    yield
    stop.set()
    approver.join(timeout=5)


@pytest.mark.parametrize(("where", "language", "code"), runnable_blocks(), ids=[b[0] for b in runnable_blocks()])
def test_each_runnable_snippet_runs_as_written_and_prints_what_it_says(
    embedded_server, staff_approving, tmp_path, where, language, code
):
    _, _, url, token = embedded_server
    command = [sys.executable, "-c", code] if language == "python" else ["bash", "-e", "-c", code]
    env = dict(os.environ, MCP_URL=url, MCP_TOKEN=token, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")

    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, f"{where}:\n{done.stdout}\n{done.stderr}"
    for said in promised(code):
        assert squeezed(said) in squeezed(done.stdout), f"{where} does not print {said!r}:\n{done.stdout}"


def test_the_python_sdk_follows_the_redirect_from_mcp_without_its_slash(embedded):
    # The README says so: /mcp answers 308 to /mcp/, and the SDK's client sends the POST again there.
    url, token = embedded
    code = f"""
import asyncio
import httpx2, mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

async def answer(context, params):
    return types.ElicitResult(action="accept", content={{"name": "Ada"}})

async def main():
    http = httpx2.AsyncClient(headers={{"Authorization": "Bearer {token}"}})
    async with Client(streamable_http_client({url.removesuffix("/")!r}, http_client=http),
                      mode="2026-07-28", elicitation_callback=answer) as client:
        print((await client.call_tool("greeter", {{}})).structured_content)

asyncio.run(main())
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "{'greeting': 'Hello, Ada!'}"
