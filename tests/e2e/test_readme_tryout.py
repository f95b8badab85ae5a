"""The README's staff tryout, followed as written against the embedded default as `make run` serves
it: the call to `digital_twin` made with the printed MCP token goes to the queue, and the printed
staff login approves it in a real browser. The web process logs no warning meanwhile."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from tests.e2e.embedded import embedded_env, manage, printed_token
from tests.e2e.test_approvals_browser import CHROMIUM, CHROMIUM_ARGS, pytestmark  # noqa: F401  (skips without Chromium)
from tests.processes import ROOT, Web

# The README's words, "call `digital_twin` with a message asking to contact the owner".
MESSAGE = '{"message": "Please contact the owner about a job"}'
QUEUED = "This request needs the owner's personal approval — it has been queued for review."


def approve_as(base_url: str, username: str, password: str) -> str:
    """Log in to the admin, open Staff approvals → Approval requests, approve the call; the final
    answer the page shows."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(30_000)
            page.goto(f"{base_url}/admin/")
            page.fill("#id_username", username)
            page.fill("#id_password", password)
            page.click("input[type=submit]")
            page.get_by_role("link", name="Approval requests").first.click()
            page.locator("#result_list").get_by_role("link", name="draft_contact_message").click()
            page.get_by_role("button", name="Approve").click()
            expect(page.locator(".messagelist")).to_contain_text("Approved.")
            answer = page.locator("#final-answer")
            expect(answer).to_contain_text("Your message was recorded", timeout=60_000)
            return answer.inner_text()
        finally:
            browser.close()


def test_the_readmes_staff_tryout_works_as_written_and_the_web_logs_no_warning(tmp_path):
    env = embedded_env(tmp_path, GRAPHS_CONFIG="langgraph.json")
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        env.pop(name, None)  # the scripted model, as on a new machine
    web = Web(env, tmp_path / "web.log")
    printed = manage(env, "demo_setup", "--migrate", "--url", web.url)
    username, password = re.search(r"login: (\S+) / (\S+)", printed).groups()
    mcp_url = re.search(r"^export MCP_URL=(\S+)$", printed, re.M).group(1)
    web.start()
    try:
        called = subprocess.run(
            [sys.executable, "-m", "demo_client", mcp_url, printed_token(printed), "digital_twin", MESSAGE],
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert called.returncode == 0, called.stdout + called.stderr
        assert QUEUED in called.stdout

        with ThreadPoolExecutor(1) as browser_thread:
            answer = browser_thread.submit(approve_as, web.url, username, password).result()
    finally:
        web.stop()

    assert "Your message was recorded" in answer
    log = (tmp_path / "web.log").read_text()
    assert [line for line in log.splitlines() if re.search(r"\b(WARNING|ERROR|CRITICAL)\b|Warning:", line)] == []
