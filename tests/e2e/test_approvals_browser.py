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


def staff_who_may_decide(username: str):
    """A member of staff who sees the queue and may decide, with the browser tests' password."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user(username, password=PASSWORD, is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=["view_approvalrequest", "decide_approval"]))
    return user


def log_in(page, base_url: str, username: str, next_path: str) -> None:
    page.set_default_timeout(30_000)
    page.goto(f"{base_url}/admin/login/?next={next_path}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")


def approve_in_the_browser(base_url: str, username: str, note: str) -> dict:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 900})
            log_in(page, base_url, username, "/admin/approvals/approvalrequest/")
            expect(page).to_have_url(re.compile(r"/admin/approvals/approvalrequest/$"))

            page.locator("#result_list").get_by_role("link", name="draft_contact_message").click()
            page.fill("textarea[name=note]", note)
            page.get_by_role("button", name="Approve").click()
            expect(page.locator(".messagelist")).to_contain_text("Approved.")

            # The page never waits for the model; it reloads itself until the answer has landed.
            answer = page.locator("#final-answer")
            expect(answer).to_contain_text("Your message was recorded", timeout=60_000)
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=SCREENSHOTS / "decision-page-after-the-decision.png")
            return {
                "answer": answer.inner_text(),
                "fields": dict(
                    zip(answer.locator("dt").all_inner_texts(), answer.locator("dd").all_inner_texts(), strict=True)
                ),
                # Readable without opening the collapsed details.
                "note": page.locator("#decision-note").inner_text(),
                "note_visible": page.locator("#decision-note").is_visible(),
            }
        finally:
            browser.close()


def test_staff_approve_a_pending_call_in_the_browser_and_see_the_final_answer(mcp_url, token, live_server):

    approval, _ = paused_thread(mcp_url, token)
    staff = staff_who_may_decide("grace")

    with ThreadPoolExecutor(1) as browser_thread:
        seen = browser_thread.submit(approve_in_the_browser, live_server.url, "grace", "Go ahead.").result(180)

    assert seen["answer"].startswith("Your message was recorded")
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.note) == ("approved", staff, "Go ahead.")
    assert approval.answer.startswith(seen["answer"].splitlines()[0])


def test_after_deciding_the_page_shows_the_note_and_the_agents_answer_readably_not_as_json(mcp_url, token, live_server):
    from tests.e2e.approvals import HIRE_ME

    paused_thread(mcp_url, token)
    staff_who_may_decide("grace")

    with ThreadPoolExecutor(1) as browser_thread:
        seen = browser_thread.submit(approve_in_the_browser, live_server.url, "grace", "Go ahead, Monday.").result(180)

    assert seen["note_visible"] and seen["note"] == "Go ahead, Monday."
    assert '{"' not in seen["answer"] and "recorded" in seen["answer"]
    assert seen["fields"]["status"] == "recorded" and seen["fields"]["message"] == HIRE_ME


# Where the run leaves its screenshots of the staff pages, to be looked at.
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def edit_and_approve_by_keyboard(base_url: str, username: str, approval_id: str, message: str) -> dict:
    from playwright.sync_api import expect, sync_playwright

    seen: dict = {}
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for scheme in ("light", "dark"):
                page = browser.new_page(viewport={"width": 1280, "height": 800}, color_scheme=scheme)
                log_in(page, base_url, username, f"/admin/approvals/approvalrequest/{approval_id}/change/")
                approve = page.get_by_role("button", name="Approve")
                expect(approve).to_be_visible()
                page.screenshot(path=SCREENSHOTS / f"decision-page-{scheme}.png")
                seen[scheme] = {
                    # The decision is on the first screen, without scrolling.
                    "buttons_bottom": max(
                        approve.bounding_box()["y"] + approve.bounding_box()["height"],
                        page.get_by_role("button", name="Reject").bounding_box()["y"],
                    ),
                    "text": page.locator("#content").inner_text(),
                }
            page.get_by_text("Edit the arguments before approving").click()
            field = page.locator("textarea[name=arguments]")
            arguments = field.input_value()
            field.fill(arguments.replace(arguments.split('"message": "')[1].split('"')[0], message))
            # By keyboard: the next stop after the form's fields is Approve.
            field.focus()
            page.keyboard.press("Tab")
            expect(page.get_by_role("button", name="Approve")).to_be_focused()
            page.keyboard.press("Enter")
            expect(page.locator(".messagelist")).to_contain_text("Approved.")
            expect(page.locator("#final-answer")).to_contain_text("Your message was recorded", timeout=60_000)
            page.screenshot(path=SCREENSHOTS / "decision-page-decided.png", full_page=True)
            # The dashboard, from the admin's home page.
            page.goto(f"{base_url}/admin/")
            page.get_by_role("link", name="Approvals dashboard").click()
            expect(page.locator("#decisions-chart rect.approved")).to_have_count(1)
            page.screenshot(path=SCREENSHOTS / "dashboard.png", full_page=True)
            seen["dashboard"] = page.locator("#tile-decided").inner_text()
        finally:
            browser.close()
    return seen


def test_the_decision_page_puts_the_decision_first_and_staff_may_edit_the_arguments_before_approving(
    mcp_url, token, live_server
):

    from approvals.models import ContactMessage

    approval, _ = paused_thread(mcp_url, token)
    staff = staff_who_may_decide("grace")
    edited = "Edited by staff: please call me on Monday."

    with ThreadPoolExecutor(1) as browser_thread:
        seen = browser_thread.submit(
            edit_and_approve_by_keyboard, live_server.url, "grace", str(approval.pk), edited
        ).result(240)

    for scheme in ("light", "dark"):
        assert seen[scheme]["buttons_bottom"] < 800, seen[scheme]
        text = seen[scheme]["text"]
        assert "draft_contact_message" in text and approval.visitor_message in text
        assert "None" not in text.split("History and technical details")[0]
    approval.refresh_from_db()
    assert approval.status == "approved" and approval.decided_by == staff
    original = approval.tool_calls[0]["input"]
    assert approval.edited_tool_calls == [{"name": "draft_contact_message", "input": {**original, "message": edited}}]
    (archived,) = ContactMessage.objects.filter(approval=approval)
    assert archived.input["message"] == edited
    assert seen["dashboard"].startswith("1\n")


def two_staff_approve(base_url: str, approval_id: str) -> dict:
    """grace gives the first approval, then alan, in a browser of his own, the second."""
    from playwright.sync_api import expect, sync_playwright

    seen: dict = {}
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for username in ("grace", "alan"):
                page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
                log_in(page, base_url, username, f"/admin/approvals/approvalrequest/{approval_id}/change/")
                seen[username] = page.locator("#approval-progress").inner_text()
                if username == "alan":
                    page.screenshot(path=SCREENSHOTS / "two-person-rule.png")
                page.fill("textarea[name=note]", f"Checked by {username}.")
                page.get_by_role("button", name="Approve").click()
                if username == "grace":
                    expect(page.locator(".messagelist")).to_contain_text("Approved 1 of 2")
                    # The first approver may not approve again; a second member of staff must.
                    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
                    seen["after_first"] = page.locator("#approval-progress").inner_text()
                    page.goto(f"{base_url}/admin/approvals/approvalrequest/")
                    seen["queue"] = page.locator("#result_list .progress").inner_text()
            expect(page.locator("#final-answer")).to_contain_text("Your message was recorded", timeout=60_000)
            seen["answer"] = page.locator("#final-answer").inner_text()
        finally:
            browser.close()
    return seen


def test_two_approvals_in_the_browser_first_shows_1_of_2_and_the_second_approver_runs_the_call(
    mcp_url, token, live_server
):

    from approvals.models import ApprovalPolicy

    ApprovalPolicy.objects.create(
        name="Messages to the owner need two people", tool_pattern="draft_contact_message", outcome="two_approvals"
    )
    approval, _ = paused_thread(mcp_url, token)
    for username in ("grace", "alan"):
        staff_who_may_decide(username)

    with ThreadPoolExecutor(1) as browser_thread:
        seen = browser_thread.submit(two_staff_approve, live_server.url, str(approval.pk)).result(240)

    assert seen["grace"] == "0 of 2 approvals"
    assert seen["after_first"] == seen["alan"] == "1 of 2 approvals · approved by grace"
    assert seen["queue"] == "1 of 2"
    assert seen["answer"].startswith("Your message was recorded")
    approval.refresh_from_db()
    assert approval.status == "approved" and approval.decided_by.username == "alan"
    assert [s.username for s in approval.signoffs.all()] == ["grace", "alan"]


LAPTOP = {"width": 1366, "height": 768}


def queue_rows() -> None:
    """A queue as staff meet it: long arguments and messages, one escalated, one needing two
    approvals under a policy with a long name."""
    from datetime import timedelta

    from django.utils import timezone

    from approvals.models import ApprovalPolicy, ApprovalRequest
    from tests.e2e.approvals import DRAFT, HIRE_ME

    policy = ApprovalPolicy.objects.create(
        name="Messages to the owner need two people", tool_pattern="draft_contact_message", outcome="two_approvals"
    )
    now = timezone.now()
    for n, (escalated, two) in enumerate([(True, False), (False, True), (False, False), (False, False)]):
        ApprovalRequest.objects.create(
            thread_id=f"thread-{n}",
            graph="digital_twin",
            interrupt_id=f"interrupt-{n}",
            tool_calls=[{"name": "draft_contact_message", "input": {**DRAFT, "name": f"Visitor {n}"}}],
            visitor_message=HIRE_ME,
            expires_at=now + timedelta(days=6 - n),
            escalated_at=now if escalated else None,
            policy=policy if two else None,
            policy_name=policy.name if two else "",
            approvals_required=2 if two else 1,
        )


def look_at_the_queue(base_url: str, username: str) -> dict:
    from playwright.sync_api import sync_playwright

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport=LAPTOP)
            log_in(page, base_url, username, "/admin/approvals/approvalrequest/")
            page.locator("#result_list").wait_for()
            page.screenshot(path=SCREENSHOTS / "queue-1366.png")
            headers = page.locator("#result_list thead th")
            results = page.locator("#changelist .results")
            return {
                "page_width": page.evaluate("document.documentElement.scrollWidth"),
                # The admin scrolls a table too wide for its box sideways inside it.
                "table_width": results.evaluate("box => box.scrollWidth"),
                "box": results.bounding_box(),
                "columns": {
                    headers.nth(i).inner_text().strip().lower(): headers.nth(i).bounding_box()
                    for i in range(headers.count())
                },
                "rows": [
                    {
                        "tool": row.locator(".field-tool").inner_text(),
                        "escalated": row.locator(".field-escalated").inner_text().strip(),
                        "icons": row.locator(".field-escalated img").count(),
                    }
                    for row in page.locator("#result_list tbody tr").all()
                ],
            }
        finally:
            browser.close()


def test_the_queue_fits_a_laptop_screen_and_marks_only_the_escalated(live_server):
    queue_rows()
    staff_who_may_decide("grace")

    with ThreadPoolExecutor(1) as browser_thread:
        seen = browser_thread.submit(look_at_the_queue, live_server.url, "grace").result(120)

    assert seen["page_width"] <= LAPTOP["width"], seen
    assert seen["table_width"] <= seen["box"]["width"], seen
    for column in ("escalated", "status", "required by"):
        box = seen["columns"][column]
        assert box["x"] + box["width"] <= seen["box"]["x"] + seen["box"]["width"], (column, box)
    marks = [row["escalated"] for row in seen["rows"]]
    assert sorted(marks) == ["", "", "", "escalated"], seen["rows"]
    assert all(row["icons"] == 0 for row in seen["rows"] if not row["escalated"]), seen["rows"]


def make_a_token_in_the_browser(base_url: str, username: str) -> dict:
    from playwright.sync_api import expect, sync_playwright

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport=LAPTOP, permissions=["clipboard-read", "clipboard-write"])
            page = context.new_page()
            log_in(page, base_url, username, "/admin/")
            page.get_by_role("link", name="API tokens", exact=True).click()
            page.fill("#id_name", "nightly report script")
            page.get_by_role("button", name="Create token").click()
            expect(page.locator("#new-token")).to_be_visible()
            page.get_by_role("button", name="Copy").click()
            expect(page.locator("#copy-status")).to_contain_text("Copied.")
            seen = {
                "warning": page.locator("#new-token .warning").inner_text(),
                "shown": page.locator("#new-token-value").input_value(),
                "copied": page.evaluate("navigator.clipboard.readText()"),
                "listed": page.locator("#token-list").inner_text(),
            }
            page.screenshot(path=SCREENSHOTS / "api-tokens.png")
            page.reload()  # a GET: the token is not shown again
            seen["shown_again"] = page.locator("#new-token").count()
            page.get_by_role("button", name="Revoke nightly report script").click()
            expect(page.locator(".messagelist")).to_contain_text("Revoked the token “nightly report script”")
            page.goto(f"{base_url}/api/docs/")
            expect(page.locator(".swagger-ui .info")).to_contain_text("Get a token", timeout=30_000)
            seen["docs"] = page.locator(".swagger-ui .info").inner_text()
        finally:
            browser.close()
    return seen


def test_staff_make_a_token_see_it_once_copy_it_and_revoke_it_in_the_browser(live_server):
    from knox.models import AuthToken

    staff = staff_who_may_decide("grace")

    with ThreadPoolExecutor(1) as browser_thread:
        seen = browser_thread.submit(make_a_token_in_the_browser, live_server.url, "grace").result(120)

    assert seen["warning"].startswith("Copy it now: it is shown only this once")
    assert seen["shown"].startswith("staff_") and seen["copied"] == seen["shown"]
    assert "nightly report script" in seen["listed"] and seen["shown"] not in seen["listed"]
    assert seen["shown_again"] == 0
    assert not AuthToken.objects.filter(user=staff).exists()
    assert "/admin/api-tokens/" in seen["docs"] and "Authorization: Bearer" in seen["docs"]


def request_changes_then_approve_the_revision(base_url: str, username: str, approval_id: str, changes: str) -> dict:
    from playwright.sync_api import expect, sync_playwright

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            log_in(page, base_url, username, f"/admin/approvals/approvalrequest/{approval_id}/change/")
            page.fill("textarea[name=note]", changes)
            page.get_by_role("button", name="Request changes").click()
            expect(page.locator(".messagelist")).to_contain_text("Changes requested.")
            # The page reloads itself until the agent has revised its call and asked again.
            attempts = page.locator("#attempts")
            expect(attempts).to_be_visible(timeout=60_000)
            attempts.get_by_role("link", name="Attempt 2").click()
            expect(page.locator("#attempts li.current")).to_contain_text("This attempt")
            page.screenshot(path=SCREENSHOTS / "decision-page-attempts.png")
            seen = {"attempts": attempts.inner_text(), "asked": page.locator("#approval .tool").first.inner_text()}
            page.get_by_role("button", name="Approve").click()
            expect(page.locator("#final-answer")).to_contain_text("Your message was recorded", timeout=60_000)
            return seen
        finally:
            browser.close()


def test_staff_request_changes_in_the_browser_and_approve_the_agents_revised_call(mcp_url, token, live_server):
    from approvals.models import ApprovalRequest, ContactMessage

    changes = "Reply to ada@work.example, please."
    approval, _ = paused_thread(mcp_url, token)
    staff_who_may_decide("grace")

    with ThreadPoolExecutor(1) as browser_thread:
        seen = browser_thread.submit(
            request_changes_then_approve_the_revision, live_server.url, "grace", str(approval.pk), changes
        ).result(180)

    assert f"changes requested by grace (in the Django admin): “{changes}”" in seen["attempts"]
    assert "ada@work.example" in seen["asked"]
    revised = ApprovalRequest.objects.get(revision_of=approval)
    approval.refresh_from_db()
    assert (approval.status, revised.status) == ("changes_requested", "approved")
    assert [m.input["email"] for m in ContactMessage.objects.filter(approval=revised)] == ["ada@work.example"]


def approve_with_step_up(base_url: str, approval_id: str) -> dict:
    """grace presses Approve, is asked to confirm it's her, enters her password, and it goes on."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            log_in(page, base_url, "grace", f"/admin/approvals/approvalrequest/{approval_id}/change/")
            notice = page.locator("#step-up-required").inner_text()
            page.fill("textarea[name=note]", "Checked twice.")
            page.get_by_role("button", name="Approve").click()
            expect(page.locator("#step-up-reason")).to_contain_text("requires step-up")
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=SCREENSHOTS / "step-up.png")
            page.fill("input[name=step_up-password]", PASSWORD)
            page.get_by_role("button", name="Confirm and approve").click()
            expect(page.locator(".messagelist")).to_contain_text("Approved.")
            return {"notice": notice}
        finally:
            browser.close()


def test_a_policy_that_requires_step_up_asks_for_the_password_again_then_decides_in_the_browser(
    mcp_url, token, live_server
):
    from approvals.models import ApprovalPolicy

    ApprovalPolicy.objects.create(
        name="Messages to the owner, stepped up", tool_pattern="draft_contact_message", requires_step_up=True
    )
    approval, _ = paused_thread(mcp_url, token)
    staff_who_may_decide("grace")

    with ThreadPoolExecutor(1) as browser_thread:
        seen = browser_thread.submit(approve_with_step_up, live_server.url, str(approval.pk)).result(120)

    assert "requires step-up" in seen["notice"]
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by.username, approval.note) == ("approved", "grace", "Checked twice.")
