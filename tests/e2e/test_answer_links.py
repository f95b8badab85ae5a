"""Clients without elicitation, with answer pages on (MCP_ANSWER_PAGES=on), end to end: the
official Python SDK client, declaring URL-mode elicitation only (at 2026-07-28, and at 2025-11-25
with MCP_OLDER_CLIENTS=answer), opens the URL question's link, a person answers the page (its
form POSTed over HTTP with its CSRF token, as a browser sends it), and the call completes; a client
that cannot elicit gets the link and a handle, and the status tool gives the agent's answer once
the page is answered. Against uvicorn, a Celery worker and Redis."""

from __future__ import annotations

import asyncio
import re
import time

import httpx
import mcp_types as types
import pytest
from mcp.client.session import ClientSession

from tests.clients import ACCEPT, Raw, meta, run, sdk_client
from tests.e2e.approvals import HIRE_ME
from tests.processes import Web, free_port, service_env

REGION = {"q0-f0": "eu-west-1", "action": "accept"}
URL_ONLY_TASKS = {"elicitation": {"url": {}}, "extensions": {"io.modelcontextprotocol/tasks": {}}}


@pytest.fixture(scope="module")
def web(celery_queue, fake_model, tmp_path_factory):
    port = free_port()
    env = service_env(
        celery_queue,
        fake_model,
        MCP_ANSWER_PAGES="on",
        MCP_OLDER_CLIENTS="answer",
        MCP_STREAM_KEEPALIVE_SECONDS="1",
        SITE_URL=f"http://127.0.0.1:{port}",
    )
    web = Web(env, tmp_path_factory.mktemp("links") / "web.log", port=port).start()
    yield web
    web.stop()


@pytest.fixture
def url(web, celery_worker):
    yield f"{web.url}/mcp/"
    celery_worker.wait_until_idle()


@pytest.fixture
def url_only(monkeypatch):
    """The SDK client declaring URL-mode elicitation only (it declares both modes by itself)."""
    built = ClientSession._build_capabilities

    def without_forms(self, version):
        capabilities = built(self, version)
        if capabilities.elicitation is not None:
            capabilities.elicitation = types.ElicitationCapability(url=types.UrlElicitationCapability())
        return capabilities

    monkeypatch.setattr(ClientSession, "_build_capabilities", without_forms)


async def answer_the_page(link: str, fields: dict[str, str]) -> str:
    """A person opens the link and sends the form: the page they see after."""
    async with httpx.AsyncClient(timeout=60, follow_redirects=True) as browser:
        form = await browser.get(link)
        assert form.status_code == 200, form.text
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
        assert token is not None
        sent = await browser.post(link, data={**fields, "csrfmiddlewaretoken": token.group(1)})
        assert sent.status_code == 200, sent.text
        return sent.text


def opening_the_link(asked: list, pages: list | None = None):
    """An elicitation callback that answers each URL question on its page; `pages`: the pages the
    person saw after answering."""

    async def callback(ctx, params):
        asked.append(params)
        assert params.mode == "url"
        page = await answer_the_page(params.url, REGION)
        if pages is not None:
            pages.append(page)
        return ACCEPT

    return callback


async def until_finished(call_tool, handle: str):
    """hitl_call_status called with `handle` until the call no longer runs: its last answer."""
    for _ in range(60):
        status = await call_tool("hitl_call_status", {"handle": handle})
        if (status.structured_content or {}).get("status") != "running":
            return status
        await asyncio.sleep(0.5)
    raise AssertionError("the call did not finish")


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_a_url_only_sdk_client_opens_the_answer_page_and_gets_the_result(url, token, url_only, web, mode):
    asked: list = []
    pages: list = []
    named = types.Implementation(name="links-test", title="Links <Test>", version="1.0")

    async def go():
        async with sdk_client(url, token, opening_the_link(asked, pages), mode=mode, client_info=named) as client:
            return await client.call_tool("choose_region", {})

    result = run(go())

    assert not result.is_error, result.content
    assert result.structured_content == {"region": "eu-west-1"}
    assert len(asked) == 1 and asked[0].url.startswith(f"{web.url}/answer/")
    # The page names the client as it declared itself: at 2026-07-28 in each request's _meta, before
    # in its session's initialize.
    assert "<strong>Links &lt;Test&gt; (links-test 1.0)</strong>" in pages[0]


def test_an_older_url_only_sdk_client_is_told_its_url_question_completed_before_it_gets_the_result(
    url, token, url_only
):
    asked: list = []
    heard: list = []

    async def on_message(message) -> None:
        if isinstance(message, types.ElicitCompleteNotification):
            heard.append(("completed", message.params.elicitation_id))

    async def go():
        async with sdk_client(url, token, opening_the_link(asked), mode="legacy", message_handler=on_message) as client:
            result = await client.call_tool("choose_region", {})
            heard.append(("result", result.structured_content))

    run(go())

    (question,) = asked
    assert question.elicitation_id
    assert heard == [("completed", question.elicitation_id), ("result", {"region": "eu-west-1"})]


def _task(raw: Raw, method: str, task_id: str, **params) -> dict:
    response = raw.request(
        method, {"taskId": task_id, "_meta": meta(URL_ONLY_TASKS), **params}, **{"Mcp-Name": task_id}
    )
    assert response.status_code == 200, response.text
    return response.json()["result"]


def _task_until(raw: Raw, task_id: str, status: str) -> dict:
    for _ in range(240):
        task = _task(raw, "tasks/get", task_id)
        if task["status"] == status:
            return task
        time.sleep(0.25)
    raise AssertionError(f"the task never became {status}: {task}")


def test_a_url_only_task_client_is_sent_to_the_answer_page_and_its_task_completes_with_the_result(url, token, web):
    """The Tasks extension over plain HTTP, as its wire tests speak it: a client that declares URL
    mode only polls its task, opens the URL question's link, accepts it, and the page's answer
    completes the task."""
    raw = Raw(url, token)
    created = raw.call("choose_region_task", capabilities=URL_ONLY_TASKS).json()["result"]
    task_id = created["taskId"]

    asking = _task_until(raw, task_id, "input_required")
    [(key, request)] = asking["inputRequests"].items()
    assert request["params"]["mode"] == "url" and request["params"]["url"].startswith(f"{web.url}/answer/")
    _task(raw, "tasks/update", task_id, inputResponses={key: {"action": "accept"}})
    assert _task(raw, "tasks/get", task_id)["status"] == "working"  # nothing is asked of the client meanwhile
    run(answer_the_page(request["params"]["url"], REGION))

    done = _task_until(raw, task_id, "completed")
    assert done["result"]["structuredContent"] == {"region": "eu-west-1"}


def test_a_client_that_cannot_elicit_relays_the_link_and_the_status_tool_gives_the_agents_answer(url, token, web):
    async def go():
        async with sdk_client(url, token) as client:  # no callback: no elicitation capability
            listed = {tool.name for tool in (await client.list_tools()).tools}
            first = await client.call_tool("choose_region", {})
            data = first.structured_content
            assert data is not None and data["status"] == "asking", first
            assert data["link"] in first.content[0].text and data["handle"] in first.content[0].text
            await answer_the_page(data["link"], REGION)
            return listed, await until_finished(client.call_tool, data["handle"])

    listed, final = run(go())

    assert "hitl_call_status" in listed
    assert not final.is_error and final.structured_content == {"region": "eu-west-1"}


def test_the_openai_agents_sdks_mcp_server_relays_the_link_and_its_status_call_returns_the_result(url, token):
    """The OpenAI Agents SDK's MCPServerStreamableHttp cannot elicit: its call of a pausing tool
    returns the link and the handle, a person answers the page, and its call of the status tool
    returns the agent's answer (the SDK's server object called as its agent would call it)."""
    from agents.mcp import MCPServerStreamableHttp

    async def go():
        server = MCPServerStreamableHttp(
            {"url": url, "headers": {"Authorization": f"Bearer {token}"}, "timeout": 120},
            client_session_timeout_seconds=120,
            use_structured_content=True,
        )
        async with server:
            listed = {tool.name for tool in await server.list_tools()}
            first = await server.call_tool("choose_region", {})
            data = first.structured_content
            assert data is not None and data["status"] == "asking", first
            await answer_the_page(data["link"], REGION)
            return listed, await until_finished(server.call_tool, data["handle"])

    listed, final = run(go())

    assert "hitl_call_status" in listed
    assert not final.is_error and final.structured_content == {"region": "eu-west-1"}


def test_a_call_handed_to_staff_tells_a_client_without_tasks_how_to_learn_the_decision(
    mcp_url, token, admin_api, settings
):
    """digital_twin's "queued for review" comes with the status tool's handle; the status tool
    says the call waits for staff, then gives the agent's answer once they approved."""
    from approvals.models import ApprovalRequest

    settings.MCP_ANSWER_PAGES = "on"

    async def go():
        async with sdk_client(mcp_url, token) as client:  # no callback, no tasks
            handed = await client.call_tool("digital_twin", {"message": HIRE_ME})
            data = handed.structured_content or {}
            waiting = await client.call_tool("hitl_call_status", {"handle": data["handle"]})
            approval = await asyncio.to_thread(ApprovalRequest.objects.get, pk=data["approval_id"])
            decided = await asyncio.to_thread(admin_api.decide, approval.thread_id, approved=True)
            assert decided.status_code == 200, decided.text
            for _ in range(120):
                final = await client.call_tool("hitl_call_status", {"handle": data["handle"]})
                if (final.structured_content or {}).get("status") != "pending":
                    return handed, waiting, final
                await asyncio.sleep(0.5)
            raise AssertionError("the staff's decision never reached the call")

    handed, waiting, final = run(go())

    assert "queued for review" in handed.content[0].text and "hitl_call_status" in handed.content[-1].text
    assert waiting.structured_content["status"] == "pending" and "Waiting for staff" in waiting.content[-1].text
    assert not final.is_error and "recorded" in str(final.structured_content), final
