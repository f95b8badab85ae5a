"""The staff pages on a phone: at 390 px wide (an iPhone 12 to 15 held upright) no staff page
scrolls sideways, the queue is a stacked list of approvals whose every card says what is asked and
opens the decision page with one tap, and the decision page's buttons and the queue's filters are
within reach. Its screenshots are the staff guide's (`make screenshots`).

Playwright drives Debian's Chromium on a thread of its own, as in test_approvals_browser.py."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.e2e.approvals import paused_thread
from tests.e2e.test_approvals_browser import CHROMIUM, CHROMIUM_ARGS, PASSWORD, log_in
from tests.screenshots import screenshot

PHONE = {"width": 390, "height": 844}

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(),
    reason=f"NO BROWSER: {CHROMIUM} is missing, so the staff pages were NOT tested at 390 px "
    "(Debian: apt-get install chromium, or `make browser`)",
)


def widths_on_a_phone(base_url: str, pages: dict[str, str]) -> dict:
    """Each page's scrollWidth and innerWidth at 390 px, and what the queue and decision page offer
    a thumb; each page's screenshot, <name>-390.png (tests/screenshots.py)."""
    from playwright.sync_api import sync_playwright

    seen: dict = {"widths": {}}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport=PHONE, device_scale_factor=1, is_mobile=True, has_touch=True)
            log_in(page, base_url, "grace", "/admin/")
            page.wait_for_url(f"{base_url}/admin/")
            for name, path in pages.items():
                page.goto(f"{base_url}{path}")
                page.wait_for_load_state("load")
                if name == "api-tokens":
                    # With a new token shown once and listed: the longest lines the page has.
                    page.fill("#create-token input[type=text]", "a script on the build server")
                    page.click("#create-token input[type=submit]")
                    page.locator("#new-token").wait_for()
                seen["widths"][name] = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
                page.screenshot(path=screenshot(f"{name}-390.png"), full_page=True)
                if name == "queue":
                    card = page.locator("#result_list tbody tr").first
                    seen["card"] = card.inner_text()
                    # Each value's column name, shown above it (CSS, so not in the text).
                    seen["labels"] = card.locator("td:visible").evaluate_all(
                        "cells => cells.map(cell => getComputedStyle(cell, '::before').content)"
                    )
                    seen["card_box"] = card.bounding_box()
                    seen["tap_target"] = card.locator("th.field-tool a").bounding_box()
                    seen["jump_to_filters"] = page.locator("#jump-to-filters a").bounding_box()
                    page.locator("#jump-to-filters a").click()
                    seen["filters_in_view"] = page.locator("#changelist-filter").evaluate(
                        "box => box.getBoundingClientRect().top < window.innerHeight"
                    )
                    card.locator("th.field-tool a").click()
                    page.wait_for_load_state("load")
                    seen["tapped_to"] = page.url
                if name == "decision-page":
                    seen["buttons"] = {
                        label: page.get_by_role("button", name=label).bounding_box()
                        for label in ("Approve", "Request changes", "Reject")
                    }
        finally:
            browser.close()
    return seen


def test_no_staff_page_scrolls_sideways_at_390_px_and_the_queue_is_a_stacked_list(mcp_url, token, live_server):
    from django.contrib.auth import get_user_model

    from approvals.models import ApprovalPolicy, StaffPasskey

    ApprovalPolicy.objects.create(name="Messages to the owner", tool_pattern="draft_contact_message")
    approval, _ = paused_thread(mcp_url, token)
    grace = get_user_model().objects.create_superuser("grace", "grace@example.com", PASSWORD)
    # Listed on the passkeys page, with a credential id as long as a real one's.
    StaffPasskey.objects.create(user=grace, name="the laptop in the office", credential_id="Q" * 86, public_key=b"\x00")
    pages = {
        "queue": "/admin/approvals/approvalrequest/",
        "decision-page": f"/admin/approvals/approvalrequest/{approval.pk}/change/",
        "policies": "/admin/approvals/approvalpolicy/",
        "api-tokens": "/admin/api-tokens/",
        "step-up": "/admin/step-up/",
        "passkeys": "/admin/passkeys/",
        "evidence": f"/admin/approvals/approvalrequest/{approval.pk}/evidence/",
    }

    with ThreadPoolExecutor(1) as browser_thread:
        seen = browser_thread.submit(widths_on_a_phone, live_server.url, pages).result(180)

    assert {name: width for name, width in seen["widths"].items() if width[0] > width[1]} == {}, seen["widths"]
    # The queue: one card an approval, every column named in it, one tap from the decision page.
    card = seen["card"]
    shown_in_card = ["draft_contact_message", "name: Visitor", "Please pass a message", "Pending"]
    shown_in_card.append("Messages to the owner")
    for shown in shown_in_card:
        assert shown in card, (shown, card)
    assert [label for label in seen["labels"] if label != "none"] == [
        '"asked by, with"', '"visitor message"', '"age"', '"time left"', '"status"', '"required by"',
    ]  # fmt: skip
    assert seen["card_box"]["width"] <= PHONE["width"]
    assert seen["tap_target"]["height"] >= 44 and seen["tap_target"]["width"] >= 200, seen["tap_target"]
    assert seen["tapped_to"].endswith(pages["decision-page"])
    # The filters, below the list on a phone, are one tap away from the top.
    assert seen["jump_to_filters"]["y"] < seen["card_box"]["y"] and seen["filters_in_view"]
    # The decision page's three buttons fit the width, each a thumb's size.
    for label, box in seen["buttons"].items():
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"] and box["height"] >= 40, (label, box)
