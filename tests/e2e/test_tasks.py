"""The MCP Tasks extension with a real client: FastMCP's, with the fastmcp-tasks package, against the
live server and a real worker. Staff decide in the admin while the client polls; a long run; questions
inside a task; cancellation of a running graph; a task open across a restart of web and worker."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import httpx
import mcp_types as types
import pytest
import redis
from django.conf import settings as django_settings
from django.test import Client as DjangoClient
from django.urls import reverse

from tests.clients import fastmcp_client, recording_handler
from tests.e2e.approvals import HIRE_ME, wait_until
from tests.e2e.test_durability import ADMIN_TOKEN, Stack
from tests.graphs import release


@pytest.fixture
def quick_tasks(settings):
    """The live server runs in this process: short waits and poll intervals keep the tests short."""
    settings.MCP_TASK_WAIT_SECONDS = 0.5
    settings.MCP_TASK_POLL_INTERVAL_MS = 100
    settings.MCP_TASK_STAFF_POLL_INTERVAL_MS = 100


def _in_background(coro_fn) -> tuple[threading.Thread, dict[str, Any]]:
    """Run a client in a thread of its own, so the test's thread can act as staff meanwhile."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = asyncio.run(coro_fn())
        except BaseException as exc:  # re-raised by the test
            out["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


async def _until_reported(handle, message: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while (status := await handle.status()).status_message != message:
        assert time.monotonic() < deadline, status
        await asyncio.sleep(0.05)


def _decider():
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user("grace", password="correct horse battery", is_staff=True)
    codenames = ["view_approvalrequest", "decide_approval"]
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="approvals", codename__in=codenames))
    admin = DjangoClient()
    admin.force_login(user)
    return admin


def test_a_task_capable_client_gets_the_agents_final_answer_once_staff_approve_in_the_admin(
    mcp_url, token, tasks_client, quick_tasks
):
    from approvals.models import ApprovalRequest

    async def visitor():
        async with fastmcp_client(mcp_url, token) as client:
            # call_tool resolves the task transparently: it polls tasks/get until staff decide.
            return await client.call_tool("digital_twin", {"message": HIRE_ME})

    thread, out = _in_background(visitor)
    approval = wait_until(lambda: ApprovalRequest.objects.filter(status="pending").first())
    time.sleep(0.5)  # the client is polling the task meanwhile

    decided = _decider().post(
        reverse("admin:approvals_approvalrequest_decide", args=[approval.pk]), {"decision": "approve", "note": ""}
    )

    assert decided.status_code == 302
    thread.join(120)
    assert "error" not in out, out.get("error")
    result = out["value"]
    approval.refresh_from_db()
    assert approval.answer.startswith("Your message was recorded")
    assert result.is_error is False
    assert result.structured_content["answer"] == approval.answer


def test_a_long_run_reaches_the_client_as_a_task_that_reports_the_graphs_progress(
    mcp_url, token, tasks_client, quick_tasks
):
    async def go():
        async with fastmcp_client(mcp_url, token) as client:
            handle = await tasks_client.call_tool_task(client, "two_steps", {"value": 3})
            working = await handle.wait(state="working", timeout=30)
            await _until_reported(handle, "Half way there")
            return working, await handle.result()

    working, result = asyncio.run(go())

    assert working.status == "working" and working.poll_interval_ms == 100
    assert result.structured_content == {"value": 3, "first": "slept", "after": "ran"}


def test_questions_inside_a_task_are_answered_through_the_clients_elicitation_handler(
    mcp_url, token, tasks_client, quick_tasks
):
    asked, answer = recording_handler(lambda message: {"response": "Ada" if "name" in message else "green"})

    async def go():
        async with fastmcp_client(mcp_url, token, handler=answer) as client:
            return await client.call_tool("survey_task", {})

    result = asyncio.run(go())

    assert sorted(asked) == ["What is your favourite colour?", "What is your name?"]
    assert result.structured_content == {"name": "Ada", "colour": "green"}


def test_cancelling_a_running_task_stops_its_graph_before_the_next_step(mcp_url, token, tasks_client, quick_tasks):
    counter = redis.Redis.from_url(django_settings.REDIS_URL)

    async def go():
        async with fastmcp_client(mcp_url, token) as client:
            handle = await tasks_client.call_tool_task(client, "two_steps_task", {"value": 60})
            await _until_reported(handle, "Half way there")
            await handle.cancel()
            release(60)  # the first step ends only once the cancel is recorded, however slow the machine
            return await handle.wait(timeout=30)

    # The second step counts its runs under the graph's value: 60, which only this test uses.
    key = "hitl-test:second-step:60"
    before = int(counter.get(key) or 0)
    final = asyncio.run(go())

    assert final.status == "cancelled", final
    time.sleep(0.5)  # a second step that ran anyway would have counted by now
    assert int(counter.get(key) or 0) == before


def test_a_task_cancelled_while_its_run_goes_on_to_ask_asks_nothing_and_ends_cancelled(
    mcp_url, token, tasks_client, quick_tasks
):
    asked, answer = recording_handler(lambda message: {"response": "yes"})

    async def go():
        async with fastmcp_client(mcp_url, token, handler=answer) as client:
            handle = await tasks_client.call_tool_task(client, "report_then_ask_task", {"value": 61})
            await _until_reported(handle, "Half way there")
            await handle.cancel()
            release(61)  # the step goes on to ask only once the cancel is recorded
            return await handle.wait(timeout=30)

    final = asyncio.run(go())

    assert final.status == "cancelled", final
    assert asked == []


def test_a_task_open_across_a_restart_of_web_and_worker_completes_once_staff_decide(
    django_db_setup, transactional_db, fake_model, tmp_path, token, tasks_client
):
    from approvals.models import ApprovalRequest

    stack = Stack(fake_model, tmp_path)
    stack.env["MCP_TASK_STAFF_POLL_INTERVAL_MS"] = "100"
    try:
        web, worker = stack.web(), stack.worker()

        async def create():
            async with fastmcp_client(f"{web.url}/mcp/", token) as client:
                handle = await tasks_client.call_tool_task(client, "digital_twin", {"message": HIRE_ME})
                return handle.create_result

        created = asyncio.run(create())
        # Handed over to staff (a slow first run may have made the call a task before that).
        thread_id = wait_until(lambda: ApprovalRequest.objects.first()).thread_id
        web.kill()
        worker.kill()
        web, _ = stack.web(), stack.worker()
        admin = httpx.Client(headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=120)
        assert admin.post(f"{web.url}/api/admin/approvals/{thread_id}", json={"approved": True}).status_code == 200

        async def resume():
            # A client that kept only the task id: a fresh connection polls it to its end.
            async with fastmcp_client(f"{web.url}/mcp/", token) as client:
                return await tasks_client.ToolTask(client, "digital_twin", created).result()

        result = asyncio.run(resume())
    finally:
        stack.stop()

    assert result.structured_content["answer"].startswith("Your message was recorded")


def test_a_client_without_the_extension_is_unchanged_by_it(mcp_url, token, quick_tasks):
    from tests.clients import run, sdk_client

    async def go():
        async with sdk_client(mcp_url, token) as client:
            return await client.call_tool("two_steps", {"value": 1})

    result = run(go())

    assert isinstance(result, types.CallToolResult)
    assert result.structured_content == {"value": 1, "first": "slept", "after": "ran"}
