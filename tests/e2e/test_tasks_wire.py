"""The MCP Tasks extension on the wire: the rules of its specification that HTTP carries (the
negotiation, the result shapes, the routing header, the errors and their statuses), one test
each, over plain HTTP against the live server."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from tests.clients import Raw, meta

TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS = {"elicitation": {"form": {}, "url": {}}, "extensions": {TASKS: {}}}
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
TASK_FIELDS = {"taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"}


@pytest.fixture
def raw(mcp_url, token, settings):
    settings.MCP_TASK_WAIT_SECONDS = 0.5
    return Raw(mcp_url, token)


def _task_request(raw: Raw, method: str, task_id: str, capabilities: dict | None = None, **params: Any):
    body = {"taskId": task_id, "_meta": meta(WITH_TASKS if capabilities is None else capabilities), **params}
    return raw.request(method, body, **{"Mcp-Name": task_id})


def _created(raw: Raw, name: str = "slow_task", arguments: dict | None = None) -> dict[str, Any]:
    response = raw.call(name, arguments or {"value": 0}, capabilities=WITH_TASKS)
    assert response.status_code == 200, response.text
    return response.json()["result"]


def _until(raw: Raw, task_id: str, status: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        result = _task_request(raw, "tasks/get", task_id).json()["result"]
        if result["status"] == status:
            return result
        assert time.monotonic() < deadline, result
        time.sleep(0.1)


def test_server_discover_advertises_the_extension(raw):
    response = raw.request("server/discover", {"_meta": meta()})

    assert response.json()["result"]["capabilities"]["extensions"] == {TASKS: {}}


def test_a_create_task_result_has_result_type_task_and_the_task_fields(raw):
    created = _created(raw)

    assert created["resultType"] == "task"
    assert set(created) >= TASK_FIELDS
    assert ISO.fullmatch(created["createdAt"]) and ISO.fullmatch(created["lastUpdatedAt"])
    assert isinstance(created["ttlMs"], int) and isinstance(created["pollIntervalMs"], int)


def test_a_client_that_did_not_declare_the_extension_on_its_request_never_gets_a_task(raw):
    response = raw.call("slow", {"value": 1})

    assert response.json()["result"]["resultType"] != "task"


def test_a_request_only_a_task_can_serve_is_missing_capability_for_a_client_without_the_extension(raw):
    response = raw.call("slow_task", {"value": 0})

    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32021
    assert response.json()["error"]["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}


def test_tasks_get_answers_result_type_complete_with_the_task_and_its_result(raw):
    created = _created(raw)

    done = _until(raw, created["taskId"], "completed")

    assert done["resultType"] == "complete"
    assert set(done) >= TASK_FIELDS | {"result"}
    assert done["result"]["structuredContent"] == {"value": 0, "answer": "slept"}


def test_tasks_update_and_tasks_cancel_acknowledge_with_an_empty_complete_result(raw):
    created = _created(raw, "choose_region_task", {})
    asking = _until(raw, created["taskId"], "input_required")
    (key,) = asking["inputRequests"]

    updated = _task_request(raw, "tasks/update", created["taskId"], inputResponses={key: {"action": "cancel"}})
    second = _created(raw, "choose_region_task", {})
    cancelled = _task_request(raw, "tasks/cancel", second["taskId"])

    for response in (updated, cancelled):
        assert response.status_code == 200
        result = response.json()["result"]
        assert {k: v for k, v in result.items() if k != "_meta"} == {"resultType": "complete"}


def test_an_mcp_name_header_other_than_the_task_id_is_a_header_mismatch(raw):
    created = _created(raw)
    body = {"taskId": created["taskId"], "_meta": meta(WITH_TASKS)}

    response = raw.request("tasks/get", body, **{"Mcp-Name": "another-task"})

    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32020


def test_task_methods_from_a_client_that_did_not_declare_the_extension_are_missing_capability(raw):
    created = _created(raw)

    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        response = _task_request(raw, method, created["taskId"], capabilities={}, inputResponses={})
        assert response.status_code == 400
        assert response.json()["error"]["code"] == -32021
        assert response.json()["error"]["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}


def test_an_unknown_task_id_and_another_callers_are_the_same_invalid_params(raw, mcp_url, make_token):
    created = _created(raw)
    stranger = Raw(mcp_url, make_token("mallory"))

    unknown = _task_request(raw, "tasks/get", "8f0c2d5e-0000-4000-8000-000000000000.abc")
    foreign = _task_request(stranger, "tasks/get", created["taskId"])

    assert unknown.status_code == foreign.status_code == 400
    assert (
        unknown.json()["error"]
        == foreign.json()["error"]
        == {
            "code": -32602,
            "message": "Failed to retrieve task: Task not found",
        }
    )


def test_the_task_methods_do_not_exist_for_an_older_revision(raw):
    response = raw.request(
        "tasks/get", {"taskId": "x"}, **{"MCP-Protocol-Version": "2025-11-25", "Mcp-Method": "tasks/get"}
    )

    # An older revision gets its JSON-RPC errors with HTTP 200, as the SDK's own server answers them.
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32601
