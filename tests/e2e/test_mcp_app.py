"""The answer App (MCP Apps, MCP_ANSWER_PAGES=on) in a real web host: the extension's own AppBridge
(@modelcontextprotocol/ext-apps) with the official TypeScript client (@modelcontextprotocol/client)
in Chromium, the App in a sandbox proxy on another origin, as the spec requires of a web host.

The host (tests/e2e/ts/apps_host/) is bundled by esbuild at test time. Playwright serves it at
/harness/ on the live server's own origin (the requests never reach Django), so the client's
requests to /mcp/ are same-origin, and the sandbox proxy on the other loopback name (localhost or
127.0.0.1), so the App's origin is never the host's. A person fills the App's form in its frame;
the call resumes once; the result reaches the host as `ui/update-model-context`.

Playwright's sync API runs on a thread of its own (as in test_approvals_browser.py: its event loop
would keep Django's ORM off the test thread)."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest

from tests.e2e.test_approvals_browser import CHROMIUM, CHROMIUM_ARGS
from tests.screenshots import screenshot

TS = Path(__file__).parent / "ts"
HOST = TS / "apps_host"
ESBUILD = TS / "node_modules" / ".bin" / "esbuild"
DESKTOP = {"width": 1280, "height": 800}

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(),
    reason=f"NO BROWSER: {CHROMIUM} is missing, so the MCP App was NOT tested in a real host "
    "(Debian: apt-get install chromium, or `make browser`)",
)


@pytest.fixture(scope="module")
def host_files(tmp_path_factory) -> dict[str, bytes]:
    """The host page, its script bundled for the browser, and the sandbox proxy."""
    if not ESBUILD.exists():
        pytest.fail(f"{ESBUILD} is missing: `make test` installs it (or: npm ci --prefix tests/e2e/ts)")
    out = tmp_path_factory.mktemp("apps_host") / "host.js"
    built = subprocess.run(
        [str(ESBUILD), str(HOST / "host.ts"), "--bundle", "--format=esm", "--platform=browser",
         "--target=es2022", "--log-level=warning", f"--outfile={out}"],
        cwd=TS, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    return {
        "host.html": (HOST / "host.html").read_bytes(),
        "host.js": out.read_bytes(),
        "sandbox.html": (HOST / "sandbox.html").read_bytes(),
    }


@pytest.fixture
def app_url(mcp_url, settings):
    settings.MCP_ANSWER_PAGES = "on"
    return mcp_url.removesuffix("/mcp/")


TYPES = {".html": "text/html", ".js": "text/javascript"}


@contextmanager
def hosted(files: dict[str, bytes], base_url: str, token: str, tool: str, args: dict[str, Any]) -> Iterator[tuple]:
    """A desktop page of the host, the App loaded with the tool's first result: the page and the
    App's frame, the browser closed after."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport=DESKTOP)
            served = urlsplit(base_url)
            other = "localhost" if served.hostname != "localhost" else "127.0.0.1"
            sandbox_origin = f"http://{other}:{served.port}"

            def serve(route):
                name = urlsplit(route.request.url).path.rsplit("/", 1)[-1]
                if name not in files:
                    return route.fulfill(status=404, body="")
                return route.fulfill(status=200, body=files[name], content_type=TYPES[Path(name).suffix])

            context.route(re.compile(r"^http://(127\.0\.0\.1|localhost):\d+/harness/"), serve)
            page = context.new_page()
            page.set_default_timeout(60_000)
            console: list[str] = []
            page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
            query = urlencode(
                {
                    "token": token,
                    "tool": tool,
                    "args": json.dumps(args),
                    "sandbox": f"{sandbox_origin}/harness/sandbox.html?{urlencode({'host': base_url})}",
                }
            )
            page.goto(f"{base_url}/harness/host.html?{query}")
            try:
                page.wait_for_function(
                    "window.harness && (window.harness.ready || window.harness.error)", timeout=30_000
                )
            except Exception:
                raise AssertionError(f"the host never loaded the App: {console}") from None
            error = page.evaluate("window.harness.error")
            assert error is None, f"{error}\n{console}"
            yield page, page.frame_locator("#app").frame_locator("iframe")
        finally:
            browser.close()


def harness(page) -> dict[str, Any]:
    return page.evaluate("JSON.parse(JSON.stringify(window.harness))")


def answer_the_typed_form(files, base_url: str, token: str) -> dict[str, Any]:
    from playwright.sync_api import expect

    seen: dict[str, Any] = {}
    with hosted(files, base_url, token, "plan_deployment", {}) as (page, app):
        expect(app.get_by_text("Where should the service deploy?")).to_be_visible()
        seen["before"] = harness(page)
        page.screenshot(path=screenshot("mcp-app-question.png"), full_page=True)
        app.get_by_label("eu-west-1").check()
        app.get_by_label("Replicas").fill("11")
        app.get_by_role("button", name="Send").click()
        expect(app.locator("#problem")).to_contain_text("10")
        seen["problem"] = app.locator("#problem").inner_text()
        app.get_by_label("Replicas").fill("3")
        app.get_by_label("Replicas").press("Enter")
        expect(app.locator("#result")).to_contain_text("eu-west-1")
        seen["result"] = app.locator("#result").inner_text()
        page.wait_for_function("window.harness.contexts.length > 0")
        seen["after"] = harness(page)
    return seen


def test_a_person_answers_the_apps_form_in_the_host_the_call_resumes_once_and_the_model_gets_the_result(
    app_url, make_token, host_files
):
    from mcp_gateway.models import Round, ToolCall

    with ThreadPoolExecutor(1) as browser_thread:
        seen = browser_thread.submit(answer_the_typed_form, host_files, app_url, make_token("ada")).result(240)

    before = seen["before"]
    assert "hitl_answer" not in before["modelTools"] and before["appOnlyTools"] == ["hitl_answer"]
    assert "plan_deployment" in before["modelTools"] and "hitl_call_status" in before["modelTools"]
    assert before["resourceUri"] == "ui://hitl/answer"
    assert before["resource"] == {
        "mimeType": "text/html;profile=mcp-app",
        "csp": {"connectDomains": [], "resourceDomains": [], "frameDomains": [], "baseUriDomains": []},
    }
    assert before["firstResult"]["structuredContent"]["status"] == "asking"
    # The invalid count was refused with the check's own message, and nothing resumed.
    assert "replicas: 11 is greater than the maximum of 10" in seen["problem"], seen["problem"]
    assert "eu-west-1" in seen["result"] and "3" in seen["result"]
    call = ToolCall.objects.get(tool_name="plan_deployment")
    rounds = list(Round.objects.filter(call=call).order_by("number").values_list("state", "answers"))
    assert [state for state, _ in rounds] == ["answered", "finished"]
    (answer,) = rounds[0][1].values()
    assert answer == {"action": "accept", "content": {"region": "eu-west-1", "replicas": 3}}
    after = seen["after"]
    assert after["appCalls"] == ["hitl_answer", "hitl_call_status", "hitl_answer"]
    assert after["contexts"][-1]["structuredContent"] == {"region": "eu-west-1", "replicas": 3}
    assert "eu-west-1" in after["contexts"][-1]["content"][0]["text"]


def follow_the_staffs_decision(files, base_url: str, token: str, approve) -> dict[str, Any]:
    from playwright.sync_api import expect

    seen: dict[str, Any] = {}
    with hosted(files, base_url, token, "text_then_staff", {}) as (page, app):
        expect(app.get_by_text("Ship it?")).to_be_visible()
        app.get_by_label("Ship it?").fill("yes, ship it")
        app.get_by_role("button", name="Send").click()
        card = app.locator("#status-card")
        expect(card).to_contain_text("Waiting for staff")
        page.screenshot(path=screenshot("mcp-app-staff.png"), full_page=True)
        seen["contexts_while_waiting"] = len(harness(page)["contexts"])
        with ThreadPoolExecutor(1) as orm_thread:  # the ORM refuses a thread with an event loop
            seen["decided"] = orm_thread.submit(approve).result(120)
        started = time.monotonic()
        expect(app.locator("#result")).to_contain_text("shipped", timeout=60_000)
        seen["seconds_to_answer"] = time.monotonic() - started
        page.wait_for_function("window.harness.contexts.length > 0")
        page.screenshot(path=screenshot("mcp-app-answered.png"), full_page=True)
        seen["after"] = harness(page)
    return seen


def test_a_call_handed_to_staff_shows_a_live_status_card_that_turns_into_the_agents_answer_once_staff_approve(
    app_url, make_token, host_files, admin_api
):
    from approvals.models import ApprovalRequest
    from mcp_gateway.models import ToolCall
    from tests.e2e.approvals import wait_until

    def approve() -> int:
        # Staff decide through the REST API, from the test's side, while the App polls.
        approval = wait_until(lambda: ApprovalRequest.objects.filter(thread_id=call_thread()).first())
        return admin_api.decide(approval.thread_id, approved=True).status_code

    def call_thread() -> str | None:
        return ToolCall.objects.filter(tool_name="text_then_staff").values_list("thread_id", flat=True).first()

    with ThreadPoolExecutor(1) as browser_thread:
        seen = browser_thread.submit(
            follow_the_staffs_decision, host_files, app_url, make_token("ada"), approve
        ).result(240)

    assert seen["decided"] == 200
    assert seen["contexts_while_waiting"] == 0
    context = seen["after"]["contexts"][-1]
    assert context["structuredContent"]["after"] == "shipped", context
    assert context["structuredContent"]["answer"] == "yes, ship it"
    assert seen["after"]["appCalls"][0] == "hitl_answer"
    assert set(seen["after"]["appCalls"][1:]) == {"hitl_call_status"}


def answer_both_questions(files, base_url: str, token: str) -> dict[str, Any]:
    from playwright.sync_api import expect

    with hosted(files, base_url, token, "survey", {}) as (page, app):
        app.get_by_label("What is your name?").fill("Ada")
        app.get_by_label("What is your favourite colour?").fill("green")
        app.get_by_role("button", name="Send answers").click()
        expect(app.locator("#result")).to_contain_text("green")
        page.wait_for_function("window.harness.contexts.length > 0")
        return harness(page)


def test_the_questions_of_a_round_are_answered_together_in_one_submission(app_url, make_token, host_files):
    from mcp_gateway.models import Round

    with ThreadPoolExecutor(1) as browser_thread:
        seen = browser_thread.submit(answer_both_questions, host_files, app_url, make_token("ada")).result(240)

    answered = Round.objects.get(call__tool_name="survey", number=0)
    assert sorted(a["content"]["response"] for a in answered.answers.values()) == ["Ada", "green"]
    assert Round.objects.filter(call__tool_name="survey").count() == 2
    assert seen["appCalls"] == ["hitl_answer"]
    assert seen["contexts"][-1]["structuredContent"] == {"name": "Ada", "colour": "green"}


def open_the_link_then_send(files, base_url: str, token: str) -> dict[str, Any]:
    from playwright.sync_api import expect

    with hosted(files, base_url, token, "connect_calendar", {}) as (page, app):
        expect(app.get_by_text("Connect your calendar to continue.")).to_be_visible()
        app.get_by_role("link", name="Open example.com").click()
        page.wait_for_function("window.harness.openedLinks.length > 0")
        app.get_by_role("button", name="Send").click()
        expect(app.locator("#result")).to_be_visible()
        page.wait_for_function("window.harness.contexts.length > 0")
        return harness(page)


def test_a_url_question_opens_its_link_through_the_host_and_its_accept_goes_on(app_url, make_token, host_files):
    with ThreadPoolExecutor(1) as browser_thread:
        seen = browser_thread.submit(open_the_link_then_send, host_files, app_url, make_token("ada")).result(240)

    assert seen["openedLinks"] == ["https://example.com/oauth/calendar/start"]
    assert seen["contexts"][-1]["structuredContent"] == {"status": "connected"}


def decide_the_review(files, base_url: str, token: str) -> dict[str, Any]:
    from playwright.sync_api import expect

    with hosted(files, base_url, token, "review_approve_or_respond", {"messages": "go"}) as (page, app):
        expect(app.get_by_text("Run publish?")).to_be_visible()
        app.get_by_label("Answer for the tool").check()
        app.get_by_label("Message").fill("not today")
        app.get_by_role("button", name="Send").click()
        expect(app.locator("#result")).to_be_visible()
        page.wait_for_function("window.harness.contexts.length > 0")
        return harness(page)


def test_a_review_is_decided_in_the_app_with_the_decision_and_its_message(app_url, make_token, host_files):
    from mcp_gateway.models import Round

    with ThreadPoolExecutor(1) as browser_thread:
        seen = browser_thread.submit(decide_the_review, host_files, app_url, make_token("ada")).result(240)

    (answer,) = Round.objects.get(call__tool_name="review_approve_or_respond", number=0).answers.values()
    assert answer == {"action": "accept", "content": {"decision": "respond", "message": "not today"}}
    assert "not today" in json.dumps(seen["contexts"][-1]), seen["contexts"][-1]
