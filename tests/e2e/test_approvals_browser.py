"""The staff flow in a real browser: log into the admin, open the pending call from the
queue, approve it with a note, and watch the resumed run's answer arrive on the page.

Playwright's sync API drives Debian's Chromium. It runs its own event loop, so it runs on a thread
of its own: Django's ORM refuses to run on a thread with an event loop, and the test thread needs it.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.e2e.approvals import paused_thread

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
PASSWORD = "correct horse battery"

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(),
    reason=f"NO BROWSER: {CHROMIUM} is missing, so the staff approval flow was NOT tested in a real browser "
    "(Debian: apt-get install chromium, or `make browser`)",
)


def approve_in_the_browser(base_url: str, username: str, note: str) -> str:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(30_000)
            page.goto(f"{base_url}/admin/login/?next=/admin/approvals/approvalrequest/")
            page.fill("#id_username", username)
            page.fill("#id_password", PASSWORD)
            page.click("input[type=submit]")
            expect(page).to_have_url(re.compile(r"/admin/approvals/approvalrequest/$"))

            page.get_by_role("link", name="draft_contact_message").click()
            page.fill("textarea[name=note]", note)
            page.get_by_role("button", name="Approve").click()
            expect(page.locator(".messagelist")).to_contain_text("Approved.")

            # The page never waits for the model; it reloads itself until the answer has landed.
            answer = page.locator("#final-answer")
            expect(answer).to_contain_text("Your message was recorded", timeout=60_000)
            return answer.inner_text()
        finally:
            browser.close()


def test_staff_approve_a_pending_call_in_the_browser_and_see_the_final_answer(mcp_url, token, live_server):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    approval, _ = paused_thread(mcp_url, token)
    staff = get_user_model().objects.create_user("grace", password=PASSWORD, is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(codename__in=["view_approvalrequest", "decide_approval"]))

    with ThreadPoolExecutor(1) as browser_thread:
        answer = browser_thread.submit(approve_in_the_browser, live_server.url, "grace", "Go ahead.").result(180)

    assert answer.startswith("Your message was recorded")
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.note) == ("approved", staff, "Go ahead.")
    assert approval.answer == answer
