"""Task status notifications of the MCP Tasks extension on 2026-07-28's subscriptions/listen: the
rules of its specification, one test each, read with plain HTTP streaming from the production ASGI
app under uvicorn (the only server that streams a response as it is written, and that tells the
app when its client goes away), with a real worker and Redis."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.clients import Raw, event_stream_messages, meta, run, sdk_client
from tests.e2e.approvals import HIRE_ME, wait_until
from tests.graphs import release
from tests.processes import Web, service_env

TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS = {"elicitation": {"form": {}, "url": {}}, "extensions": {TASKS: {}}}
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
MAX_SECONDS = 10
MAX_STREAMS = 3


def _web(celery_queue: str, fake_model: str, log_dir, **settings: str) -> Web:
    """The production ASGI app on the test database and this run's queue, with short task waits,
    short listen streams and few of them."""
    env = service_env(
        celery_queue,
        fake_model,
        MCP_TASK_WAIT_SECONDS="0.5",
        MCP_TASK_POLL_INTERVAL_MS="100",
        MCP_LISTEN_MAX_SECONDS=str(MAX_SECONDS),
        MCP_MAX_STREAMS=str(MAX_STREAMS),
        # Few database connections: the suite runs beside others on one PostgreSQL.
        MCP_DB_THREADS="2",
        CHECKPOINT_POOL_MAX_SIZE="2",
        **settings,
    )
    return Web(env, log_dir / "web.log").start()


@pytest.fixture(scope="module")
def web(celery_queue, fake_model, tmp_path_factory):
    # Streams that never read their tasks again on their own, until they end after MAX_SECONDS:
    # a change a test sees well before that came through Redis (PUSHED_WITHIN).
    web = _web(celery_queue, fake_model, tmp_path_factory.mktemp("listen"), MCP_LISTEN_REFRESH_SECONDS="600")
    yield web
    web.stop()


@pytest.fixture
def raw(web, celery_worker, token):
    yield Raw(f"{web.url}/mcp/", token)
    celery_worker.wait_until_idle()


def _created(raw: Raw, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    response = raw.call(name, arguments, capabilities=WITH_TASKS)
    assert response.status_code == 200, response.text
    assert response.json()["result"]["resultType"] == "task", response.text
    return response.json()["result"]


def _listen_body(task_ids: list[str], capabilities: dict | None = None, request_id: int = 7, **params: Any) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "subscriptions/listen",
        "params": {
            "notifications": {"taskIds": task_ids},
            "_meta": meta(WITH_TASKS if capabilities is None else capabilities),
            **params,
        },
    }


# A change seen within this many seconds of the stream's start was pushed, not read at its end.
PUSHED_WITHIN = MAX_SECONDS / 2


def _listen(raw: Raw, body: dict, **headers: str):
    """The listen request as a stream (a context manager of the httpx response)."""
    return raw.http.stream(
        "POST", raw.url, json=body, headers=raw.headers("subscriptions/listen", **headers), timeout=60
    )


@pytest.fixture
def waiting_for_staff(raw):
    """A task that waits for staff while the test runs (it holds no worker), cancelled after it if
    it has not ended."""
    created = _created(raw, "digital_twin", {"message": HIRE_ME})
    # A task before the hand-over when the model answers slowly: from now on it only waits.
    wait_until(lambda: _task_get(raw, created["taskId"]).get("statusMessage") == "Waiting for staff approval")
    yield created["taskId"]
    body = {"taskId": created["taskId"], "_meta": meta(WITH_TASKS)}
    raw.request("tasks/cancel", body, **{"Mcp-Name": created["taskId"]})


def _task_get(raw: Raw, task_id: str) -> dict[str, Any]:
    body = {"taskId": task_id, "_meta": meta(WITH_TASKS)}
    return raw.request("tasks/get", body, **{"Mcp-Name": task_id}).json()["result"]


def _without_meta(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if k not in ("_meta", "resultType")}


def test_a_listen_stream_acknowledges_first_and_only_the_callers_own_task_ids(raw, web, make_token):
    mine = _created(raw, "slow_task", {"value": 0.5})
    strangers = _created(Raw(raw.url, make_token("mallory")), "slow_task", {"value": 0.5})
    unknown = "8f0c2d5e-0000-4000-8000-000000000000.abc"

    with _listen(raw, _listen_body([mine["taskId"], strangers["taskId"], unknown])) as response:
        first = next(event_stream_messages(response))

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert first == {
        "jsonrpc": "2.0",
        "method": ACKNOWLEDGED,
        "params": {"notifications": {"taskIds": [mine["taskId"]]}, "_meta": {SUBSCRIPTION_ID: 7}},
    }


def test_each_task_notification_carries_the_whole_task_as_tasks_get_reads_it(raw):
    created = _created(raw, "slow_task", {"value": 1})

    started = time.monotonic()
    with _listen(raw, _listen_body([created["taskId"]])) as response:
        notifications = [m for m in event_stream_messages(response) if m.get("method") == "notifications/tasks"]
    assert time.monotonic() - started < PUSHED_WITHIN
    polled = _task_get(raw, created["taskId"])

    statuses = [n["params"]["status"] for n in notifications]
    assert statuses[0] == "working" and statuses[-1] == "completed" and "completed" not in statuses[:-1]
    assert all(n["params"]["_meta"] == {SUBSCRIPTION_ID: 7} for n in notifications)
    assert _without_meta(notifications[-1]["params"]) == _without_meta(polled)
    assert notifications[-1]["params"]["result"]["structuredContent"] == {"value": 1, "answer": "slept"}


def test_the_stream_ends_gracefully_with_the_listen_result_once_every_task_has_ended(raw):
    created = _created(raw, "slow_task", {"value": 0.5})

    started = time.monotonic()
    with _listen(raw, _listen_body([created["taskId"]], request_id="listen-1")) as response:
        messages = list(event_stream_messages(response))

    assert time.monotonic() - started < PUSHED_WITHIN
    assert messages[-1]["id"] == "listen-1"
    assert messages[-1]["result"]["resultType"] == "complete"
    assert messages[-1]["result"]["_meta"][SUBSCRIPTION_ID] == "listen-1"
    assert messages[-2]["params"]["status"] == "completed"


def test_a_task_that_asks_is_notified_input_required_with_its_questions_and_again_once_answered(raw):
    created = _created(raw, "choose_region_task", {})
    task_id = created["taskId"]
    seen: list[dict[str, Any]] = []

    started = time.monotonic()
    with _listen(raw, _listen_body([task_id])) as response:
        for message in event_stream_messages(response):
            if message.get("method") != "notifications/tasks":
                continue
            seen.append(message["params"])
            if message["params"]["status"] == "input_required":
                (key,) = message["params"]["inputRequests"]
                body = {"taskId": task_id, "inputResponses": {key: {"action": "cancel"}}, "_meta": meta(WITH_TASKS)}
                raw.request("tasks/update", body, **{"Mcp-Name": task_id})

    assert time.monotonic() - started < PUSHED_WITHIN
    assert [t["status"] for t in seen][-2:] == ["input_required", "completed"]
    assert seen[-1]["result"]["isError"] is True


def test_a_cancelled_task_is_notified_cancelled(raw):
    created = _created(raw, "choose_region_task", {})
    task_id = created["taskId"]

    started = time.monotonic()
    with _listen(raw, _listen_body([task_id])) as response:
        statuses = []
        for message in event_stream_messages(response):
            if message.get("method") == "notifications/tasks":
                statuses.append(message["params"]["status"])
                if statuses[-1] == "input_required":
                    body = {"taskId": task_id, "_meta": meta(WITH_TASKS)}
                    raw.request("tasks/cancel", body, **{"Mcp-Name": task_id})

    assert time.monotonic() - started < PUSHED_WITHIN
    assert statuses[-2:] == ["input_required", "cancelled"]


def test_what_the_graph_reports_as_it_runs_reaches_a_listening_client_as_the_tasks_status_message(raw):
    # The graph reports "Half way there", waits for the test, reports "Nearly there", waits again.
    task_id = _created(raw, "reports_twice_task", {"value": 62})["taskId"]
    wait_until(lambda: _task_get(raw, task_id).get("statusMessage") == "Half way there")

    started = time.monotonic()
    with _listen(raw, _listen_body([task_id])) as response:
        said = []
        for message in event_stream_messages(response):
            if message.get("method") == "notifications/tasks":
                said.append(message["params"].get("statusMessage") or message["params"]["status"])
                if said[-1] in ("Half way there", "Nearly there") and said.count(said[-1]) == 1:
                    release(62)

    assert said == ["Half way there", "Nearly there", "completed"]
    assert time.monotonic() - started < PUSHED_WITHIN


def test_a_staff_decision_reaches_a_listening_client_with_the_agents_final_answer(raw, waiting_for_staff):
    from django.db import transaction

    from approvals import services
    from approvals.models import ApprovalRequest, DecidedVia

    approval = ApprovalRequest.objects.get(status=ApprovalRequest.Status.PENDING)
    answer = None
    statuses: list[tuple[str, str | None]] = []

    started = time.monotonic()
    with _listen(raw, _listen_body([waiting_for_staff])) as response:
        for message in event_stream_messages(response):
            if message.get("method") == "notifications/tasks":
                task = message["params"]
                statuses.append((task["status"], task.get("statusMessage")))
                if len(statuses) == 1:
                    with transaction.atomic():
                        services.approval_decide(approval=approval, approved=True, note=None, via=DecidedVia.API)
                if task["status"] == "completed":
                    answer = task["result"]["structuredContent"]["answer"]

    assert time.monotonic() - started < PUSHED_WITHIN
    assert statuses[0] == ("working", "Waiting for staff approval")
    assert statuses[-1][0] == "completed"
    assert answer is not None and answer.startswith("Your message was recorded")


def test_a_client_that_asks_for_task_notifications_without_declaring_the_extension_gets_missing_capability(raw):
    created = _created(raw, "slow_task", {"value": 0.2})

    with _listen(raw, _listen_body([created["taskId"]], capabilities={})) as response:
        response.read()

    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32021
    assert response.json()["error"]["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}


def test_a_listen_stream_carries_no_progress_or_log_notifications(raw):
    created = _created(raw, "two_steps_task", {"value": 2})
    body = _listen_body([created["taskId"]])
    body["params"]["_meta"].update({"progressToken": "p-1", "io.modelcontextprotocol/logLevel": "debug"})

    with _listen(raw, body) as response:
        messages = list(event_stream_messages(response))

    methods = {m.get("method") for m in messages if "method" in m}
    assert methods == {ACKNOWLEDGED, "notifications/tasks"}
    # The graph's progress reaches the client as the task's statusMessage, not as notifications/progress.
    assert "Half way there" in {
        m["params"].get("statusMessage") for m in messages if m.get("method") == "notifications/tasks"
    }


def test_listen_needs_the_client_to_accept_an_event_stream(raw):
    created = _created(raw, "slow_task", {"value": 0.2})

    with _listen(raw, _listen_body([created["taskId"]]), Accept="application/json") as response:
        response.read()

    assert response.status_code == 406


def test_a_stream_ends_gracefully_after_the_longest_listen_even_while_its_task_still_works(raw, waiting_for_staff):
    started = time.monotonic()

    with _listen(raw, _listen_body([waiting_for_staff])) as response:
        messages = list(event_stream_messages(response))
    took = time.monotonic() - started

    assert MAX_SECONDS - 1 < took < MAX_SECONDS + 4
    assert [m["params"]["status"] for m in messages if m.get("method") == "notifications/tasks"] == ["working"]
    assert messages[-1]["result"]["_meta"][SUBSCRIPTION_ID] == 7


def test_a_client_that_goes_away_frees_its_stream_on_the_server(raw, waiting_for_staff):
    body = _listen_body([waiting_for_staff])

    # More streams, one after the other, than a process serves at once: each is dropped by its
    # client after its first notification, and the server lets it go.
    for _ in range(MAX_STREAMS * 2):
        with _listen(raw, body) as response:
            messages = event_stream_messages(response)
            assert next(messages)["method"] == ACKNOWLEDGED
            assert next(messages)["method"] == "notifications/tasks"
    opened = [_listen(raw, body) for _ in range(MAX_STREAMS)]
    held = [stream.__enter__() for stream in opened]
    try:
        over = raw.http.post(raw.url, json=body, headers=raw.headers("subscriptions/listen"))
    finally:
        for stream in opened:
            stream.__exit__(None, None, None)

    assert [r.status_code for r in held] == [200] * MAX_STREAMS
    assert over.status_code == 503 and over.headers["Retry-After"] == "5"
    error = over.json()["error"]
    assert error["code"] == -32603 and error["message"].startswith("Stream limit reached")
    assert error["data"] == {"scope": "server", "limit": MAX_STREAMS, "retryAfterSeconds": 5}


def test_the_official_sdk_clients_listen_reads_the_acknowledgement_and_the_graceful_end(raw):
    # The SDK's client cannot ask for task ids (its SubscriptionFilter drops them); what it asks
    # for, this server does not send, so the acknowledgement agrees to nothing and the stream ends.
    async def go():
        async with sdk_client(raw.url, raw.token) as client:
            async with client.listen(tools_list_changed=True) as subscription:
                events = [event async for event in subscription]
                return subscription.honored, events

    honored, events = run(go())

    assert honored is not None and honored.tools_list_changed is None and events == []
