"""Passkeys as step-up, each assertion bound to the decision it confirms: staff register their own
in the admin, the decision page asks for a nonce and a challenge derived from the decision, and
the decision service verifies the assertion (py_webauthn) against the challenge derived again from
what is decided. The authenticator is a software one (tests/authenticators.py); the browser test
with Chromium's virtual authenticator is tests/e2e/test_approvals_passkeys.py."""

from __future__ import annotations

import hashlib
import io
import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse
from django_otp.oath import TOTP
from django_otp.plugins.otp_totp.models import TOTPDevice
from knox.models import AuthToken

from approvals import passkeys
from approvals.digests import canonical_json
from approvals.models import (
    ApprovalPolicy,
    ApprovalRequest,
    AuditEvent,
    Outcome,
    PasskeyNonce,
    PasskeyProof,
    StaffPasskey,
)
from tests.authenticators import SoftwareAuthenticator
from tests.inprocess.driver import committing, paused_for_staff
from tests.staff_approvals import HIRE_ME

PASSWORD = "correct horse battery"

# The rule must be committed for the graph's thread to read it (test_approval_policies.py).
pytestmark = pytest.mark.django_db(transaction=True)


def rule(*, passkey_only: bool) -> ApprovalPolicy:
    return ApprovalPolicy.objects.create(
        name="Messages to the owner",
        tool_pattern="draft_contact_message",
        outcome=Outcome.APPROVE,
        requires_step_up=True,
        requires_passkey=passkey_only,
    )


@pytest.fixture
def stepped_up(model_in_this_process) -> ApprovalRequest:
    """An approval under a policy that requires step-up (password, TOTP or passkey)."""
    rule(passkey_only=False)
    return paused_for_staff("digital_twin", {"message": HIRE_ME})


@pytest.fixture
def passkey_only(model_in_this_process) -> ApprovalRequest:
    rule(passkey_only=True)
    return paused_for_staff("digital_twin", {"message": HIRE_ME})


def staff(username: str):
    account = get_user_model().objects.create_user(username, password=PASSWORD, is_staff=True)
    account.user_permissions.set(Permission.objects.filter(codename__in=["view_approvalrequest", "decide_approval"]))
    return account


@pytest.fixture
def grace():
    return staff("grace")


def logged_in(user) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


def register(browser: Client, name: str = "laptop") -> SoftwareAuthenticator:
    """Through the passkeys page, as its script does: options, the authenticator, the form."""
    authenticator = SoftwareAuthenticator()
    options = browser.post(reverse("staff-passkey-options")).json()
    answer = browser.post(reverse("staff-passkeys"), {"name": name, "credential": authenticator.create(options)})
    assert answer.status_code == 302, answer.content.decode()
    return authenticator


def asked(browser: Client, approval: ApprovalRequest, decision: str, arguments: list | None = None) -> dict:
    """What the decision page's script gets before calling navigator.credentials.get."""
    posted: dict = {"decision": decision}
    if arguments is not None:
        posted["arguments"] = [json.dumps(value) for value in arguments]
    answer = browser.post(reverse("admin:approvals_approvalrequest_decide_passkey", args=[approval.pk]), posted)
    assert answer.status_code == 200, answer.content.decode()
    return answer.json()


def confirmed(authenticator: SoftwareAuthenticator, options: dict) -> dict:
    """The decision form's passkey fields, as the script fills them."""
    return {"passkey_nonce": options["nonce"], "passkey_credential": authenticator.get(options["options"])}


def decide(browser: Client, approval: ApprovalRequest, decision: str, fields: dict, **extra):
    posted = {"decision": decision, "note": "Checked with my passkey.", **fields, **extra}
    with committing():
        return browser.post(reverse("admin:approvals_approvalrequest_decide", args=[approval.pk]), posted)


def said(answer) -> str:
    return " ".join(str(message) for message in answer.context["messages"]) if answer.context else ""


def status_of(approval: ApprovalRequest) -> str:
    approval.refresh_from_db()
    return approval.status


def arguments_of(approval: ApprovalRequest) -> list:
    return [call["input"] for call in approval.tool_calls]


# --- the challenge ---------------------------------------------------------------------------------


def test_the_challenge_is_sha256_over_the_nonce_the_approval_its_digest_the_decision_and_the_edit():
    parts = {"nonce": "n", "approval_id": "a", "action_digest": "d" * 64, "decision": "approve", "edited_digest": ""}
    bound = {"purpose": passkeys.PURPOSE, "nonce": "n", "approval": "a", "action_digest": "d" * 64,
             "decision": "approve", "edited_digest": ""}  # fmt: skip
    assert passkeys.challenge(**parts) == hashlib.sha256(canonical_json(bound)).digest()
    changed = [
        {**parts, "nonce": "m"},
        {**parts, "approval_id": "b"},
        {**parts, "action_digest": "e" * 64},
        {**parts, "decision": "reject"},
        {**parts, "edited_digest": "f" * 64},
    ]
    assert len({passkeys.challenge(**parts), *(passkeys.challenge(**other) for other in changed)}) == 6


# --- registering ----------------------------------------------------------------------------------


def test_staff_register_several_passkeys_each_named_and_the_page_lists_them(grace):
    browser = logged_in(grace)
    register(browser, "laptop")
    register(browser, "phone")

    page = browser.get(reverse("staff-passkeys")).content.decode()
    assert "laptop" in page and "phone" in page
    assert list(StaffPasskey.objects.filter(user=grace).values_list("name", flat=True)) == ["laptop", "phone"]
    assert AuditEvent.objects.filter(kind="passkey_added", actor="grace").count() == 2


def test_a_registration_challenge_is_taken_once(grace):
    browser = logged_in(grace)
    authenticator = SoftwareAuthenticator()
    options = browser.post(reverse("staff-passkey-options")).json()
    registration = authenticator.create(options)
    assert browser.post(reverse("staff-passkeys"), {"name": "laptop", "credential": registration}).status_code == 302

    again = browser.post(reverse("staff-passkeys"), {"name": "laptop again", "credential": registration})

    assert again.status_code == 400
    assert "was not asked for, or was used already" in again.content.decode()
    assert StaffPasskey.objects.filter(user=grace).count() == 1


def test_a_registration_answering_another_challenge_adds_no_passkey(grace):
    browser = logged_in(grace)
    browser.post(reverse("staff-passkey-options"))
    forged = SoftwareAuthenticator().create({"challenge": "bm90IHRoZSBzZXJ2ZXIncw"})

    answer = browser.post(reverse("staff-passkeys"), {"name": "laptop", "credential": forged})

    assert answer.status_code == 400 and "No passkey was added" in answer.content.decode()
    assert not StaffPasskey.objects.exists()


def test_staff_remove_their_passkey_and_the_removal_is_audited(grace):
    browser = logged_in(grace)
    register(browser, "old laptop")
    passkey = StaffPasskey.objects.get(user=grace)

    answer = browser.post(reverse("staff-passkeys"), {"remove": str(passkey.pk)})

    assert answer.status_code == 302 and not StaffPasskey.objects.exists()
    removed = AuditEvent.objects.get(kind="passkey_removed")
    assert (removed.actor, removed.data) == ("grace", {"credential_id": passkey.credential_id, "name": "old laptop"})


def test_staff_neither_see_nor_remove_another_members_passkeys(grace):
    register(logged_in(grace), "grace's laptop")
    theirs = StaffPasskey.objects.get(user=grace)
    alan = logged_in(staff("alan"))

    page = alan.get(reverse("staff-passkeys")).content.decode()
    alan.post(reverse("staff-passkeys"), {"remove": str(theirs.pk)})

    assert "grace's laptop" not in page and theirs.credential_id[:20] not in page
    assert StaffPasskey.objects.filter(pk=theirs.pk).exists()
    assert not AuditEvent.objects.filter(kind="passkey_removed").exists()


# --- deciding with a passkey ------------------------------------------------------------------------


def test_a_passkey_confirms_the_decision_it_was_asked_for_and_the_audit_keeps_its_assertion(stepped_up, grace):
    approval = stepped_up
    browser = logged_in(grace)
    authenticator = register(browser)

    answer = decide(browser, approval, "approve", confirmed(authenticator, asked(browser, approval, "approve")))

    assert answer.status_code == 302 and status_of(approval) == "approved"
    event = AuditEvent.objects.get(kind="stepped_up", approval_id=approval.pk)
    kept = event.data["passkey"]
    assert (event.data["method"], kept["decision"], kept["credential_name"]) == ("passkey", "approve", "laptop")
    proof = PasskeyProof.objects.get(approval=approval)
    assert kept["challenge"] == passkeys.recorded(proof)["challenge"] and passkeys.reverify(proof, event) == ""
    assert StaffPasskey.objects.get(user=grace).sign_count == authenticator.sign_count == 1


def test_a_passkey_confirms_its_decision_only_and_is_not_remembered_as_a_step_up_of_the_login(stepped_up, grace):
    browser = logged_in(grace)
    fields = confirmed(register(browser), asked(browser, stepped_up, "approve"))
    assert decide(browser, stepped_up, "approve", fields).status_code == 302
    another = paused_for_staff("digital_twin", {"message": HIRE_ME})

    answer = decide(browser, another, "approve", {})

    assert answer.status_code == 403 and status_of(another) == "pending"


def test_an_assertion_for_another_decision_is_refused_with_403(stepped_up, grace):
    approval = stepped_up
    browser = logged_in(grace)
    authenticator = register(browser)
    for_approving = confirmed(authenticator, asked(browser, approval, "approve"))

    answer = decide(browser, approval, "reject", for_approving)

    assert answer.status_code == 403
    assert "was given for another decision" in said(answer)
    assert status_of(approval) == "pending"


def test_an_assertion_for_the_arguments_as_they_were_is_refused_for_edited_ones(stepped_up, grace):
    approval = stepped_up
    browser = logged_in(grace)
    authenticator = register(browser)
    as_they_are = arguments_of(approval)
    fields = confirmed(authenticator, asked(browser, approval, "approve", as_they_are))
    edited = [{**as_they_are[0], "message": "Send me your bank details."}]

    answer = decide(browser, approval, "approve", fields, arguments=[json.dumps(value) for value in edited])

    assert answer.status_code == 403 and "another decision" in said(answer)
    assert status_of(approval) == "pending"


def test_edited_arguments_confirmed_with_a_passkey_are_what_runs(stepped_up, grace):
    approval = stepped_up
    browser = logged_in(grace)
    authenticator = register(browser)
    edited = [{**arguments_of(approval)[0], "message": "Hello, shortened."}]
    fields = confirmed(authenticator, asked(browser, approval, "approve", edited))

    answer = decide(browser, approval, "approve", fields, arguments=[json.dumps(value) for value in edited])

    assert answer.status_code == 302 and status_of(approval) == "approved"
    proof = PasskeyProof.objects.get(approval=approval)
    assert proof.edited_digest == approval.approved_digest != approval.digest


def test_an_assertion_is_taken_once_even_when_its_first_use_was_refused(stepped_up, grace):
    approval = stepped_up
    browser = logged_in(grace)
    authenticator = register(browser)
    fields = confirmed(authenticator, asked(browser, approval, "approve"))
    assert decide(browser, approval, "reject", fields).status_code == 403

    replayed = decide(browser, approval, "approve", fields)

    assert replayed.status_code == 403 and "was used already" in said(replayed)
    assert status_of(approval) == "pending"
    assert PasskeyNonce.objects.get(nonce=fields["passkey_nonce"]).spent_at is not None


def test_an_assertion_posted_again_after_its_decision_is_answered_already_decided(stepped_up, grace):
    approval = stepped_up
    browser = logged_in(grace)
    fields = confirmed(register(browser), asked(browser, approval, "approve"))
    assert decide(browser, approval, "approve", fields).status_code == 302

    assert decide(browser, approval, "approve", fields).status_code == 409


def test_an_assertion_asked_for_on_one_approval_is_refused_on_another(stepped_up, grace):
    first, second = stepped_up, paused_for_staff("digital_twin", {"message": HIRE_ME})
    browser = logged_in(grace)
    fields = confirmed(register(browser), asked(browser, first, "approve"))

    answer = decide(browser, second, "approve", fields)

    assert answer.status_code == 403 and "not asked for by you on this approval" in said(answer)
    assert (status_of(first), status_of(second)) == ("pending", "pending")


def test_an_assertion_asked_for_by_someone_else_is_refused(stepped_up, grace):
    approval = stepped_up
    graces = logged_in(grace)
    fields = confirmed(register(graces), asked(graces, approval, "approve"))
    alan = logged_in(staff("alan"))
    register(alan)

    answer = decide(alan, approval, "approve", fields)

    assert answer.status_code == 403 and "not asked for by you" in said(answer)
    assert status_of(approval) == "pending"


def test_an_assertion_without_user_verification_is_refused(stepped_up, grace):
    approval = stepped_up
    browser = logged_in(grace)
    authenticator = register(browser)
    options = asked(browser, approval, "approve")
    fields = {"passkey_nonce": options["nonce"], "passkey_credential": authenticator.get(options["options"], flags=1)}

    answer = decide(browser, approval, "approve", fields)

    assert answer.status_code == 403 and status_of(approval) == "pending"


def test_a_broken_assertion_is_refused_with_403_not_a_500(stepped_up, grace):
    approval = stepped_up
    browser = logged_in(grace)
    register(browser)
    options = asked(browser, approval, "approve")

    for credential in ("not json", "{}", json.dumps({"id": "x", "rawId": "x", "type": "public-key", "response": {}})):
        answer = decide(
            browser, approval, "approve", {"passkey_nonce": options["nonce"], "passkey_credential": credential}
        )
        assert answer.status_code == 403, credential
    registered = StaffPasskey.objects.get(user=grace).credential_id
    # With the registered credential's id, so each reaches the signature's check.
    for response in [
        {"authenticatorData": "AAAA", "signature": "AAAA", "clientDataJSON": "e30"},
        {"authenticatorData": "A" * 50, "signature": "MEUCIQ", "clientDataJSON": "e30"},
    ]:
        options = asked(browser, approval, "approve")
        credential = json.dumps({"id": registered, "rawId": registered, "type": "public-key", "response": response})
        fields = {"passkey_nonce": options["nonce"], "passkey_credential": credential}
        assert decide(browser, approval, "approve", fields).status_code == 403, response
    for nonce in ("\x00", "x" * 10_000):
        answer = decide(browser, approval, "approve", {"passkey_nonce": nonce, "passkey_credential": "{}"})
        assert answer.status_code == 403, nonce[:10]
    assert status_of(approval) == "pending"


def test_the_decision_page_offers_the_passkey_to_staff_who_have_one(stepped_up, grace):
    approval = stepped_up
    browser = logged_in(grace)
    change = reverse("admin:approvals_approvalrequest_change", args=[approval.pk])
    assert 'id="use-passkey"' not in browser.get(change).content.decode()

    register(browser)

    assert 'id="use-passkey"' in browser.get(change).content.decode()


# --- a policy that takes only a passkey ----------------------------------------------------------


def test_a_policy_requiring_a_passkey_refuses_the_password(passkey_only, grace):
    answer = decide(logged_in(grace), passkey_only, "approve", {"step_up-password": PASSWORD})

    assert answer.status_code == 403 and "a password or a TOTP code does not step up for it" in said(answer)
    assert status_of(passkey_only) == "pending"


def test_a_policy_requiring_a_passkey_refuses_a_totp_code(passkey_only, grace):
    device = TOTPDevice.objects.create(user=grace, name="phone", confirmed=True)
    code = f"{TOTP(device.bin_key, device.step, device.t0, device.digits, device.drift).token():06d}"

    answer = decide(logged_in(grace), passkey_only, "approve", {"step_up-code": code})

    assert answer.status_code == 403 and status_of(passkey_only) == "pending"


def test_a_policy_requiring_a_passkey_is_not_decided_through_the_rest_api(passkey_only, grace, client):
    device = TOTPDevice.objects.create(user=grace, name="phone", confirmed=True)
    code = f"{TOTP(device.bin_key, device.step, device.t0, device.digits, device.drift).token():06d}"
    _, token = AuthToken.objects.create(grace)

    with committing():
        answer = client.post(
            f"/api/admin/approvals/{passkey_only.pk}", json.dumps({"approved": True}), content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_X_OTP_CODE=code,
        )  # fmt: skip

    assert answer.status_code == 403 and answer.json()["required"] == "passkey"
    assert "decision page in the admin" in answer.json()["error"]
    assert status_of(passkey_only) == "pending"


def test_a_policy_requiring_a_passkey_is_decided_with_one(passkey_only, grace):
    browser = logged_in(grace)
    fields = confirmed(register(browser), asked(browser, passkey_only, "request_changes"))

    answer = decide(browser, passkey_only, "request_changes", fields)

    assert answer.status_code == 302 and status_of(passkey_only) == "changes_requested"


def test_bulk_decisions_leave_out_the_approvals_that_require_a_passkey_saying_so(passkey_only, grace):
    browser = logged_in(grace)
    register(browser)
    with committing():
        answer = browser.post(
            reverse("admin:approvals_approvalrequest_changelist"),
            {"action": "approve_selected", "_selected_action": [str(passkey_only.pk)], "apply": "1", "note": ""},
            follow=True,
        )

    assert "requires a passkey for each decision. Decide it on its own page." in said(answer)
    assert status_of(passkey_only) == "pending"


def test_a_policy_may_require_a_passkey_only_with_step_up():
    policy = ApprovalPolicy(name="x", tool_pattern="*", requires_passkey=True)
    with pytest.raises(Exception) as refused:
        policy.full_clean()
    assert "requires_passkey" in refused.value.message_dict


# --- verifying again, offline --------------------------------------------------------------------


def approved_with_a_passkey(approval: ApprovalRequest, user) -> PasskeyProof:
    browser = logged_in(user)
    fields = confirmed(register(browser), asked(browser, approval, "approve"))
    assert decide(browser, approval, "approve", fields).status_code == 302
    return PasskeyProof.objects.get(approval=approval)


def verify_audit() -> str:
    out = io.StringIO()
    call_command("verify_audit", stdout=out)
    return out.getvalue()


def test_verify_audit_verifies_every_stored_assertion_again(stepped_up, grace):
    approved_with_a_passkey(stepped_up, grace)

    assert "Passkey confirmations verified again: 1." in verify_audit()


def test_verify_audit_fails_a_stored_assertion_whose_signature_was_altered(stepped_up, grace):
    proof = approved_with_a_passkey(stepped_up, grace)
    signature = bytearray(bytes(proof.signature))
    signature[-1] ^= 1
    PasskeyProof.objects.filter(pk=proof.pk).update(signature=bytes(signature))

    with pytest.raises(CommandError, match=f"passkey confirmation #{proof.pk} of grace .* fails"):
        verify_audit()


def test_verify_audit_fails_a_stored_assertion_whose_public_key_was_replaced(stepped_up, grace):
    proof = approved_with_a_passkey(stepped_up, grace)
    PasskeyProof.objects.filter(pk=proof.pk).update(public_key=b"\xa1\x01\x02")

    with pytest.raises(CommandError, match=f"passkey confirmation #{proof.pk} of grace .* fails"):
        verify_audit()


def test_verify_audit_fails_a_stored_assertion_whose_approval_digest_changed(stepped_up, grace):
    approval = stepped_up
    proof = approved_with_a_passkey(approval, grace)
    ApprovalRequest.objects.filter(pk=approval.pk).update(digest="0" * 64)
    assert passkeys.reverify(proof) != ""

    with pytest.raises(CommandError, match="fails"):
        verify_audit()


def test_the_evidence_names_the_passkey_and_its_verification(stepped_up, grace):
    approval = stepped_up
    proof = approved_with_a_passkey(approval, grace)
    browser = logged_in(get_user_model().objects.create_superuser("auditor", "a@example.com", PASSWORD))

    gathered = browser.get(
        reverse("admin:approvals_approvalrequest_evidence", args=[approval.pk]), {"format": "json"}
    ).json()
    page = browser.get(reverse("admin:approvals_approvalrequest_evidence", args=[approval.pk])).content.decode()

    step_up = gathered["approvals"][0]["decision"]["proof_of_presence"]["step_up"]
    assert step_up["method"] == "passkey"
    assert step_up["passkey"]["credential_name"] == "laptop" and step_up["passkey"]["verified"] is True
    assert step_up["passkey"]["credential_id"] == proof.credential_id
    assert "“laptop”" in page and "verified again now" in page
