"""A 2026-07-28 tools/call that asks for its run's progress or log lines: notifications/progress
and notifications/message on the call's own event stream, then its response, with the web
process, PostgreSQL, Redis and a Celery worker in processes of their own. The rules:
docs/rules.md, "Progress on the call's stream"; docs/rules.md, "Log lines on the call's stream"."""

from __future__ import annotations

import json

from tests.clients import Raw, by_message, event_stream_messages, meta, run, sdk_client


def test_the_example_roll_outs_progress_reaches_the_sdk_clients_progress_callback(mcp_url, token):
    reported: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress, total, message):
        reported.append((progress, total, message))

    async def go():
        async with sdk_client(mcp_url, token, by_message({})) as client:
            return await client.call_tool("roll_out", {"version": "2.4.1"}, progress_callback=on_progress)

    result = run(go())

    assert not result.is_error and result.structured_content["regions"][-1] == "ap-southeast-2"
    progress = [number for number, _, _ in reported]
    assert progress and progress == sorted(set(progress))
    # The graph's own numbers, where its report was read: "2 of 3 regions", say.
    assert any(total == 3 and message.startswith("2.4.1 is live in") for _, total, message in reported), reported


def _streamed(raw: Raw, name: str, arguments: dict, params_meta: dict) -> tuple[dict, list[dict]]:
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call"}
    body["params"] = {"name": name, "arguments": arguments, "_meta": {**meta(), **params_meta}}
    with raw.http.stream("POST", raw.url, json=body, headers=raw.headers("tools/call", name)) as response:
        return dict(response.headers), list(event_stream_messages(response))


def test_a_call_that_asks_for_progress_gets_an_event_stream_that_ends_with_its_response(mcp_url, token):
    headers, messages = _streamed(Raw(mcp_url, token), "reports_and_sleeps", {"value": "0.8"}, {"progressToken": "p-1"})

    assert headers["content-type"].startswith("text/event-stream") and headers["x-accel-buffering"] == "no"
    *notifications, response = messages
    # Only progress: log lines go to a request that asks for them.
    assert notifications and {n["method"] for n in notifications} == {"notifications/progress"}
    assert {n["params"]["progressToken"] for n in notifications} == {"p-1"}
    assert response["id"] == 7 and response["result"]["resultType"] == "complete"


def test_a_call_that_does_not_ask_for_progress_gets_one_json_response(mcp_url, token):
    response = Raw(mcp_url, token).call("reports_and_sleeps", {"value": "0.8"})

    assert response.headers["content-type"] == "application/json"
    assert json.loads(response.content)["result"]["structuredContent"]["answer"] == "done"


def test_an_input_required_result_ends_the_call_stream_like_any_other(mcp_url, token):
    _, messages = _streamed(Raw(mcp_url, token), "report_then_ask", {"value": "1.5"}, {"progressToken": 3})

    *notifications, response = messages
    assert [n["params"]["message"] for n in notifications] == ["Half way there"]
    assert response["result"]["resultType"] == "input_required" and response["result"]["inputRequests"]


def test_a_call_that_asks_for_log_lines_gets_the_graphs_own_at_its_level_or_above_before_its_result(mcp_url, token):
    level = {"io.modelcontextprotocol/logLevel": "warning"}

    _, messages = _streamed(Raw(mcp_url, token), "logs_at_each_level", {}, level)

    *notifications, response = messages
    assert [n["params"] for n in notifications] == [
        {"level": "warning", "logger": "tests.graphs", "data": "running low"},
        {"level": "error", "logger": "tests.graphs", "data": "one region failed"},
    ]
    assert {n["method"] for n in notifications} == {"notifications/message"}
    assert response["result"]["structuredContent"] == {"answer": "logged"}


def test_an_idle_call_stream_is_kept_open_with_ping_comments(mcp_url, token, settings):
    settings.MCP_STREAM_KEEPALIVE_SECONDS = 0.4  # the live server runs in this process
    raw = Raw(mcp_url, token)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    body["params"] = {"name": "slow", "arguments": {"value": "1.5"}, "_meta": {**meta(), "progressToken": "p"}}

    with raw.http.stream("POST", raw.url, json=body, headers=raw.headers("tools/call", "slow")) as response:
        lines = list(response.iter_lines())

    assert response.headers["x-accel-buffering"] == "no"
    assert ": ping" in lines
    assert json.loads(lines[-2].removeprefix("data: "))["result"]["structuredContent"]["answer"] == "slept"
