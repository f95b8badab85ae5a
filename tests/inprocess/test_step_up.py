"""Step-up for high-risk policies: a policy that requires it has every decision on its approvals
wait for one more proof of who decides. In the admin, the password entered again (it counts for
STEP_UP_MINUTES) or a code from the decider's TOTP device; in the REST API, a staff token and an
X-OTP-Code header; a policy without the flag needs neither."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django_otp.oath import TOTP
from django_otp.plugins.otp_totp.models import TOTPDevice
from knox.models import AuthToken

from approvals import step_up
from approvals.models import ApprovalPolicy, ApprovalRequest, AuditEvent, Outcome
from tests.inprocess.driver import committing, paused_for_staff
from tests.staff_approvals import HIRE_ME

PASSWORD = "correct horse battery"
ADMIN_TOKEN = "step-up-admin-token"

# The rule must be committed for the graph's thread to read it (test_approval_policies.py).
pytestmark = pytest.mark.django_db(transaction=True)


def rule(*, requires_step_up: bool) -> ApprovalPolicy:
    return ApprovalPolicy.objects.create(
        name="Messages to the owner",
        tool_pattern="draft_contact_message",
        outcome=Outcome.APPROVE,
        requires_step_up=requires_step_up,
    )


@pytest.fixture
def high_risk(model_in_this_process) -> ApprovalRequest:
    """An approval required by a policy that requires step-up."""
    rule(requires_step_up=True)
    return paused_for_staff("digital_twin", {"message": HIRE_ME})


@pytest.fixture
def ordinary(model_in_this_process) -> ApprovalRequest:
    """An approval required by a policy without the flag."""
    rule(requires_step_up=False)
    return paused_for_staff("digital_twin", {"message": HIRE_ME})


@pytest.fixture
def grace():
    account = get_user_model().objects.create_user("grace", password=PASSWORD, is_staff=True)
    account.user_permissions.set(Permission.objects.filter(codename__in=["view_approvalrequest", "decide_approval"]))
    return account


def logged_in(user) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


def enrolled(user) -> TOTPDevice:
    return TOTPDevice.objects.create(user=user, name="phone", confirmed=True)


def current_code(device: TOTPDevice) -> str:
    """What the authenticator app shows now."""
    device.refresh_from_db()
    totp = TOTP(device.bin_key, device.step, device.t0, device.digits, device.drift)
    return f"{totp.token():0{device.digits}d}"


def decide_in_admin(browser: Client, approval: ApprovalRequest, **extra: str):
    with committing():
        return browser.post(
            reverse("admin:approvals_approvalrequest_decide", args=[approval.pk]),
            {"decision": "approve", "note": "Checked.", **extra},
        )


def decide_in_api(client: Client, approval: ApprovalRequest, *, token: str, code: str | None = None):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    if code is not None:
        headers["HTTP_X_OTP_CODE"] = code
    with committing():
        return client.post(
            f"/api/admin/approvals/{approval.pk}",
            json.dumps({"approved": True}),
            content_type="application/json",
            **headers,
        )


def status_of(approval: ApprovalRequest) -> str:
    approval.refresh_from_db()
    return approval.status


# --- in the admin ----------------------------------------------------------------------------------


def test_a_decision_without_step_up_is_held_on_the_step_up_page_and_nothing_is_decided(high_risk, grace):
    page = decide_in_admin(logged_in(grace), high_risk)

    assert step_up.required_for(high_risk)
    text = page.content.decode()
    assert page.status_code == 403 and "Confirm it’s you" in text
    assert "The policy “Messages to the owner” requires step-up before a decision" in text
    # The decision rides along, to be posted again with the proof.
    assert '<input type="hidden" name="decision" value="approve">' in text
    assert '<input type="hidden" name="note" value="Checked.">' in text
    assert status_of(high_risk) == "pending"


def test_the_password_entered_again_lets_the_held_decision_go_on(high_risk, grace):
    page = decide_in_admin(logged_in(grace), high_risk, **{"step_up-password": PASSWORD, "step_up-code": ""})

    assert page.status_code == 302
    high_risk.refresh_from_db()
    assert (high_risk.status, high_risk.note, high_risk.decided_by) == ("approved", "Checked.", grace)
    stepped = AuditEvent.objects.get(approval_id=high_risk.pk, kind="stepped_up")
    assert (stepped.actor, stepped.data["method"]) == ("grace", "password")


def test_a_request_for_changes_waits_for_step_up_as_approving_does(high_risk, grace):
    browser = logged_in(grace)

    held = decide_in_admin(browser, high_risk, decision="request_changes", note="Ask for the phone number too.")
    assert "Confirm and request changes" in held.content.decode()
    assert status_of(high_risk) == "pending"

    decide_in_admin(
        browser, high_risk, decision="request_changes", note="Ask for the phone number too.",
        **{"step_up-password": PASSWORD, "step_up-code": ""},
    )  # fmt: skip
    assert status_of(high_risk) == "changes_requested"


def test_a_wrong_password_decides_nothing_and_says_so(high_risk, grace):
    page = decide_in_admin(logged_in(grace), high_risk, **{"step_up-password": "guess", "step_up-code": ""})

    assert page.status_code == 403
    assert "That is not your password. Nothing was decided." in page.content.decode()
    assert status_of(high_risk) == "pending"


def test_wrong_step_up_passwords_are_throttled_like_totp_codes(high_risk, grace):
    browser = logged_in(grace)
    step_up_page = reverse("staff-step-up")
    start = timezone.now()

    with time_machine.travel(start, tick=False):
        wrong = browser.post(step_up_page, {"step_up-password": "guess", "step_up-code": ""})
        # The right password right after a wrong one is not even checked: the back-off holds it.
        held = browser.post(step_up_page, {"step_up-password": PASSWORD, "step_up-code": ""})
        at_decision = decide_in_admin(browser, high_risk, **{"step_up-password": PASSWORD, "step_up-code": ""})
    # django-otp's back-off: a second after one wrong try (and twice as long after each more).
    with time_machine.travel(start + timedelta(seconds=1, milliseconds=100), tick=False):
        taken = decide_in_admin(browser, high_risk, **{"step_up-password": PASSWORD, "step_up-code": ""})

    assert wrong.status_code == 403 and "That is not your password." in wrong.content.decode()
    assert held.status_code == 403 and "Too many wrong passwords: wait 1 second," in held.content.decode()
    assert at_decision.status_code == 403 and "Too many wrong passwords" in at_decision.content.decode()
    assert taken.status_code == 302 and status_of(high_risk) == "approved"


def test_a_step_up_counts_for_step_up_minutes_and_is_asked_again_after(high_risk, grace, settings):
    settings.STEP_UP_MINUTES = 10
    browser = logged_in(grace)
    browser.post(reverse("staff-step-up"), {"step_up-password": PASSWORD, "step_up-code": ""})

    with time_machine.travel(timezone.now() + timedelta(minutes=10, seconds=1)):
        stale = decide_in_admin(browser, high_risk)
    assert stale.status_code == 403 and "Confirm it’s you" in stale.content.decode()
    assert status_of(high_risk) == "pending"

    with time_machine.travel(timezone.now() + timedelta(minutes=9)):
        fresh = decide_in_admin(browser, high_risk)
    assert fresh.status_code == 302
    assert status_of(high_risk) == "approved"


def test_a_code_from_the_enrolled_totp_device_steps_up_in_the_admin(high_risk, grace):
    device = enrolled(grace)

    decide_in_admin(logged_in(grace), high_risk, **{"step_up-password": "", "step_up-code": current_code(device)})

    assert status_of(high_risk) == "approved"
    assert AuditEvent.objects.get(approval_id=high_risk.pk, kind="stepped_up").data["method"] == "totp"


def test_a_wrong_totp_code_decides_nothing_and_says_so(high_risk, grace):
    device = enrolled(grace)
    wrong = f"{(int(current_code(device)) + 1) % 10**6:06d}"

    page = decide_in_admin(logged_in(grace), high_risk, **{"step_up-password": "", "step_up-code": wrong})

    assert page.status_code == 403
    assert "That is not a current code of your TOTP device" in page.content.decode()
    assert status_of(high_risk) == "pending"


def test_the_decision_page_says_the_policy_requires_step_up(high_risk, grace):
    page = logged_in(grace).get(reverse("admin:approvals_approvalrequest_change", args=[high_risk.pk]))

    assert "requires step-up: deciding asks for your password again" in page.content.decode()


def test_bulk_decisions_leave_out_the_approvals_that_require_step_up(high_risk, grace):
    with committing():
        logged_in(grace).post(
            reverse("admin:approvals_approvalrequest_changelist"),
            {"action": "approve_selected", "_selected_action": [str(high_risk.pk)], "apply": "1", "note": ""},
        )

    assert status_of(high_risk) == "pending"


# --- in the REST API -------------------------------------------------------------------------------


def test_the_api_refuses_a_decision_without_an_otp_code_with_403_naming_the_header(high_risk, grace, client):
    enrolled(grace)

    refused = decide_in_api(client, high_risk, token=AuthToken.objects.create(grace)[1])

    assert refused.status_code == 403
    assert refused.json()["required"] == "X-OTP-Code"
    assert "requires step-up: send an X-OTP-Code header" in refused.json()["error"]
    assert status_of(high_risk) == "pending"


def test_the_api_refuses_a_wrong_otp_code_with_403(high_risk, grace, client):
    device = enrolled(grace)
    wrong = f"{(int(current_code(device)) + 1) % 10**6:06d}"

    refused = decide_in_api(client, high_risk, token=AuthToken.objects.create(grace)[1], code=wrong)

    assert refused.status_code == 403
    assert "That is not a current code of your TOTP device" in refused.json()["error"]
    assert status_of(high_risk) == "pending"


def test_the_api_decides_with_a_staff_token_and_a_current_code_taken_once(high_risk, grace, client, settings):
    settings.APPROVAL_WAIT_SECONDS = 0
    device = enrolled(grace)
    token, code = AuthToken.objects.create(grace)[1], current_code(device)

    decided = decide_in_api(client, high_risk, token=token, code=code)
    other = paused_for_staff("digital_twin", {"message": HIRE_ME})
    replayed = decide_in_api(client, other, token=token, code=code)

    assert decided.status_code == 202 and decided.json()["status"] == "approved"
    assert replayed.status_code == 403 and "each code is taken once" in replayed.json()["error"]
    assert status_of(other) == "pending"


def test_the_admin_token_cannot_decide_an_approval_that_requires_step_up(high_risk, client, settings):
    settings.ADMIN_TOKEN = ADMIN_TOKEN

    refused = decide_in_api(client, high_risk, token=ADMIN_TOKEN, code="123456")

    assert refused.status_code == 403 and "the ADMIN_TOKEN names nobody" in refused.json()["error"]
    assert status_of(high_risk) == "pending"


# --- a policy without the flag ---------------------------------------------------------------------


def test_a_policy_without_the_flag_needs_no_step_up(ordinary, grace, client, settings):
    settings.APPROVAL_WAIT_SECONDS = 0

    assert not step_up.required_for(ordinary)
    decide_in_admin(logged_in(grace), ordinary)
    assert status_of(ordinary) == "approved"
    other = paused_for_staff("digital_twin", {"message": HIRE_ME})
    assert decide_in_api(client, other, token=AuthToken.objects.create(grace)[1]).status_code == 202


def test_an_administrator_enrols_a_totp_device_in_the_admin_and_sees_its_config_url(grace, admin_client):
    added = admin_client.post(
        "/admin/otp_totp/totpdevice/add/",
        {
            "user": grace.pk, "name": "grace's phone", "confirmed": "on",
            "key": "3132333435363738393031323334353637383930", "step": 30, "t0": 0, "digits": 6,
            "tolerance": 1, "drift": 0, "throttling_failure_count": 0,
        },
    )  # fmt: skip
    device = TOTPDevice.objects.get(user=grace)
    config = admin_client.get(f"/admin/otp_totp/totpdevice/{device.pk}/config/").content.decode()

    assert added.status_code == 302 and device.confirmed
    assert "otpauth://totp/hitl%3Agrace?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ" in config
    assert step_up.has_device(grace)


def test_the_totp_device_form_picks_its_owner_by_name_not_by_user_id(grace, admin_client):
    form = admin_client.get("/admin/otp_totp/totpdevice/add/").content.decode()
    found = admin_client.get(
        "/admin/autocomplete/",
        {"app_label": "otp_totp", "model_name": "totpdevice", "field_name": "user", "term": "grac"},
    ).json()

    assert "admin-autocomplete" in form and "vForeignKeyRawIdAdminField" not in form
    assert found["results"] == [{"id": str(grace.pk), "text": "grace"}]
