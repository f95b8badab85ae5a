"""The hosted answer page in a real browser, served by the production web server (uvicorn, with
its access log on, as the Procfile runs it) and a Celery worker: a person answers a typed form on a
phone-sized screen by keyboard, the call resumes and the page shows the result; and the link is in
none of the web's log lines, for a refused request or an answered one.

Playwright's sync API drives Debian's Chromium, on a thread of its own (as in
test_approvals_browser.py: its event loop would keep Django's ORM off the test thread)."""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from mcp_types import CLIENT_INFO_META_KEY

from tests.clients import Raw, meta
from tests.e2e.test_approvals_browser import CHROMIUM, CHROMIUM_ARGS
from tests.processes import Web, service_env
from tests.rounds import asked
from tests.screenshots import screenshot

CLAUDE_DESKTOP = {"name": "claude-ai", "title": "Claude Desktop", "version": "0.9"}

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(),
    reason=f"NO BROWSER: {CHROMIUM} is missing, so the answer page was NOT tested in a real browser "
    "(Debian: apt-get install chromium, or `make browser`)",
)


@pytest.fixture
def served(celery_queue, celery_worker, fake_model, transactional_db, tmp_path):
    """The web server with answer pages on: its JSON log, uvicorn's access log and its request
    spans (the console exporter) in one file."""
    env = service_env(
        celery_queue,
        fake_model,
        MCP_ANSWER_PAGES="on",
        LOG_FORMAT="json",
        OTEL_TRACES_EXPORTER="console",
        OTEL_BSP_SCHEDULE_DELAY="100",
    )
    web = Web(env, tmp_path / "web.log", access_log=True).start()
    yield web
    web.stop()
    celery_worker.wait_until_idle()


def page_of(request_state: str) -> str:
    from mcp_gateway.models import Round
    from mcp_gateway.wires.pages import links

    return links.path_for(Round.objects.select_related("call").get(pk=request_state.partition(".")[0]))


def widths_on_a_phone(base_url: str, paths: list[str]) -> list[bool]:
    """Whether each page fits a 390 px wide screen without scrolling sideways."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
            fits = []
            for path in paths:
                page.goto(f"{base_url}{path}")
                fits.append(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))
            return fits
        finally:
            browser.close()


def answer_on_a_phone(base_url: str, path: str) -> dict:
    from playwright.sync_api import expect, sync_playwright

    seen: dict = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            wide = browser.new_page(viewport={"width": 1366, "height": 768})
            wide.goto(f"{base_url}{path}")
            expect(wide.get_by_text("Where should the service deploy?")).to_be_visible()
            # The client as it declared itself in the request that started the call.
            expect(wide.get_by_text("Claude Desktop (claude-ai 0.9)")).to_be_visible()
            wide.screenshot(path=screenshot("answer-page-1366.png"), full_page=True)
            wide.close()

            page = browser.new_page(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
            page.set_default_timeout(30_000)
            page.goto(f"{base_url}{path}")
            seen["fits"] = page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
            page.screenshot(path=screenshot("answer-page-390.png"), full_page=True)
            # By keyboard: the replicas field has the focus first; the region is a radio group.
            page.get_by_label("eu-west-1").focus()
            page.keyboard.press("Space")
            page.get_by_label("Replicas").focus()
            page.keyboard.type("3")
            started = time.monotonic()
            page.keyboard.press("Enter")
            result = page.locator("#result")
            expect(result).to_contain_text("eu-west-1", timeout=60_000)
            seen["seconds_to_result"] = time.monotonic() - started
            seen["result"] = result.inner_text()
            seen["fits_after"] = page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        finally:
            browser.close()
    return seen


def test_a_person_answers_on_a_phone_by_keyboard_and_the_page_shows_the_result(served, make_token):
    raw = Raw(f"{served.url}/mcp/", make_token("ada"))
    first = asked(raw, "plan_deployment", _meta={**meta(), CLIENT_INFO_META_KEY: CLAUDE_DESKTOP})
    path = page_of(first["requestState"])

    with ThreadPoolExecutor(1) as browser_thread:
        seen = browser_thread.submit(answer_on_a_phone, served.url, path).result(240)

    assert seen["fits"] and seen["fits_after"], "the page scrolls sideways at 390 px"
    assert "region" in seen["result"] and "eu-west-1" in seen["result"] and "3" in seen["result"]
    print(f"\nanswered on the page to result shown: {seen['seconds_to_result']:.2f} s")
    # The client that asked gets the same outcome with its requestState: one resume.
    again = raw.call("plan_deployment", {}, requestState=first["requestState"]).json()
    assert again["result"]["structuredContent"] == {"region": "eu-west-1", "replicas": 3}


def test_a_review_several_questions_and_a_long_url_fit_a_phone_screen(served, make_token):
    raw = Raw(f"{served.url}/mcp/", make_token("ada"))
    long_url = "https://login.example.com/start?" + "state=" + "a" * 300
    paths = [
        page_of(asked(raw, "review_letters_only_per_call", {"messages": "go"})["requestState"]),
        page_of(asked(raw, "survey")["requestState"]),
        page_of(asked(raw, "relay_url", {"value": long_url})["requestState"]),
    ]

    with ThreadPoolExecutor(1) as browser_thread:
        fits = browser_thread.submit(widths_on_a_phone, served.url, paths).result(120)

    assert fits == [True, True, True]


def test_the_link_is_in_none_of_the_web_servers_log_lines(served, make_token):
    raw = Raw(f"{served.url}/mcp/", make_token("ada"))
    first = asked(raw, "count_resumes", {"value": "logged"})
    path = page_of(first["requestState"])
    token = path.split("/")[2]
    signature = token.partition(".")[2]
    tampered = path.replace(signature, signature[::-1])

    with httpx.Client(base_url=served.url) as browser:
        assert browser.get(tampered).status_code == 404
        assert browser.post(path, data={"q0-f0": "yes", "action": "accept"}).status_code == 403  # no CSRF token
        form = browser.get(path)
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
        sent = browser.post(path, data={"q0-f0": "yes", "action": "accept", "csrfmiddlewaretoken": csrf})
        assert sent.status_code == 303
        assert browser.get(path).status_code == 200
    assert httpx.get(f"{served.url}{path}").status_code == 404  # answered: nobody else's

    served.stop()  # the last spans are printed as it exits
    logged = served.log.read_text(errors="replace")
    # The requests were logged, and their spans printed, with the link cut out.
    assert '"GET /answer/[redacted]/ HTTP/1.1" 404' in logged and '"POST /answer/[redacted]/ HTTP/1.1" 303' in logged
    assert "Forbidden (CSRF cookie not set.): /answer/[redacted]/" in logged
    assert '"http.target": "/answer/[redacted]/"' in logged
    assert signature not in logged and signature[::-1] not in logged
    assert token.partition(".")[0] not in logged
