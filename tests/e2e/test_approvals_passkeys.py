"""Passkeys in a real browser: Chromium's virtual authenticator (WebAuthn over CDP: CTAP2, an
internal transport, resident keys and user verification) stands in for a laptop's. A member of
staff registers a passkey in the admin, then approves a call whose policy requires step-up with
it, and the call resumes; the assertion the page posted, captured on its way, is refused when
posted for another decision, again, or on another approval; verify_audit verifies the stored
assertion again, and fails it once it is altered.

Playwright's sync API drives Debian's Chromium on a thread of its own, as in
test_approvals_browser.py."""

from __future__ import annotations

import io
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.e2e.approvals import paused_thread, wait_until
from tests.e2e.test_approvals_browser import CHROMIUM, CHROMIUM_ARGS, log_in, staff_who_may_decide
from tests.screenshots import screenshot

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(),
    reason=f"NO BROWSER: {CHROMIUM} is missing, so passkeys were NOT tested in a real browser "
    "(Debian: apt-get install chromium, or `make browser`)",
)

VIRTUAL_AUTHENTICATOR = {
    "protocol": "ctap2",
    "transport": "internal",
    "hasResidentKey": True,
    "hasUserVerification": True,
    "isUserVerified": True,
    "automaticPresenceSimulation": True,
}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def register_then_decide(base_url: str, first_id: str, second_id: str) -> dict:
    from playwright.sync_api import expect, sync_playwright

    seen: dict = {}
    change = f"{base_url}/admin/approvals/approvalrequest/{{}}/change/"
    decide = f"{base_url}/admin/approvals/approvalrequest/{{}}/decide/"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = context.new_page()
            cdp = context.new_cdp_session(page)
            cdp.send("WebAuthn.enable")
            authenticator = cdp.send("WebAuthn.addVirtualAuthenticator", {"options": VIRTUAL_AUTHENTICATOR})
            log_in(page, base_url, "grace", "/admin/passkeys/")
            expect(page).to_have_url(re.compile(r"/admin/passkeys/$"))

            page.fill("#id_name", "laptop")
            page.click("#add-passkey-button")
            expect(page.locator(".messagelist")).to_contain_text("Added the passkey “laptop”")
            seen["listed"] = page.locator("#passkey-list").inner_text()
            seen["held"] = len(
                cdp.send("WebAuthn.getCredentials", {"authenticatorId": authenticator["authenticatorId"]})[
                    "credentials"
                ]
            )

            # The page asks for the decision's challenge, the authenticator signs it, the form
            # posts it: held here on its way, so the server never sees this one.
            page.goto(change.format(first_id))
            seen["offered"] = page.locator("#passkey-choice").inner_text()
            page.screenshot(path=screenshot("passkey-decision.png"))
            held: list = []

            def hold(route) -> None:
                held.append(route.request.post_data)
                route.abort()

            page.route(re.compile(re.escape(decide.format(first_id)) + "$"), hold)
            page.get_by_role("button", name="Approve").click()
            page.wait_for_event("requestfailed")
            posted = held[0]
            page.unroute(re.compile(re.escape(decide.format(first_id)) + "$"))
            seen["posted"] = posted
            for name, url, body in [
                ("re-targeted", decide.format(first_id), posted.replace("decision=approve", "decision=reject")),
                ("replayed", decide.format(first_id), posted),
                ("elsewhere", decide.format(second_id), posted),
            ]:
                answer = page.request.post(url, data=body, headers=FORM)
                seen[name] = (answer.status, answer.text())

            # Confirmed with the passkey for real: decided, and the call resumes.
            page.goto(change.format(first_id))
            page.fill("textarea[name=note]", "Confirmed with my passkey.")
            page.get_by_role("button", name="Approve").click()
            expect(page.locator(".messagelist")).to_contain_text("Approved.")
            expect(page.locator("#final-answer")).to_contain_text("Your message was recorded", timeout=60_000)
        finally:
            browser.close()
    return seen


def test_staff_register_a_passkey_and_approve_with_it_and_its_assertion_counts_for_that_decision_only(
    mcp_url, token, live_server
):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    from approvals.models import ApprovalPolicy, AuditEvent, PasskeyProof, StaffPasskey

    ApprovalPolicy.objects.create(
        name="Messages to the owner, by passkey",
        tool_pattern="draft_contact_message",
        requires_step_up=True,
        requires_passkey=True,
    )
    first, _ = paused_thread(mcp_url, token)
    second, _ = paused_thread(mcp_url, token)
    staff_who_may_decide("grace")

    with ThreadPoolExecutor(1) as browser_thread:
        seen = browser_thread.submit(register_then_decide, live_server.url, str(first.pk), str(second.pk)).result(240)

    passkey = StaffPasskey.objects.get(user__username="grace")
    assert (passkey.name, seen["held"]) == ("laptop", 1) and "laptop" in seen["listed"]
    assert "Confirm with my passkey" in seen["offered"]
    assert "passkey_credential=" in seen["posted"] and "decision=approve" in seen["posted"]
    for refused, why in [
        ("re-targeted", "it was given for another decision"),
        ("replayed", "that confirmation was used already"),
        ("elsewhere", "not asked for by you on this approval"),
    ]:
        status, page = seen[refused]
        assert status == 403 and why in page, (refused, status, page[:300])

    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, first.decided_by.username, second.status) == ("approved", "grace", "pending")
    wait_until(lambda: AuditEvent.objects.filter(approval_id=first.pk, kind="finished").exists())
    stepped_up = AuditEvent.objects.get(approval_id=first.pk, kind="stepped_up")
    assert (
        stepped_up.data["method"] == "passkey" and stepped_up.data["passkey"]["credential_id"] == passkey.credential_id
    )
    assert stepped_up.data["passkey"]["decision"] == "approve"

    out = io.StringIO()
    call_command("verify_audit", stdout=out)
    assert "Passkey confirmations verified again: 1." in out.getvalue()
    proof = PasskeyProof.objects.get(approval=first)
    data = bytearray(bytes(proof.authenticator_data))
    data[-1] ^= 1  # the signature counter's last byte
    PasskeyProof.objects.filter(pk=proof.pk).update(authenticator_data=bytes(data))
    with pytest.raises(CommandError, match=f"passkey confirmation #{proof.pk} of grace"):
        call_command("verify_audit", stdout=io.StringIO())
