"""The decision service holds every rule of a decision itself, whichever door calls it: these tests
call it directly, as a door would, with no door in front of it to remember anything. Who may decide
at all, a policy's step-up (the proof the door received, checked under the row lock), and the order
of the refusals: the approval's state first, then who decides, then their step-up."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.utils import timezone
from django_otp.oath import TOTP
from django_otp.plugins.otp_totp.models import TOTPDevice
from knox.models import AuthToken

from approvals.models import ApprovalPolicy, ApprovalRequest, AuditEvent, Outcome
from tests.inprocess.driver import (
    ApprovalConflict,
    NotAllowed,
    StepUpProofInvalid,
    StepUpRequired,
    committing,
    decide,
    paused_for_staff,
    request_changes,
    resumes_enqueued,
    step_up_proof,
)
from tests.staff_approvals import HIRE_ME

PASSWORD = "correct horse battery"
DOORS = ["admin", "api", "slack", "email"]

# The rule must be committed for the graph's thread to read it (test_approval_policies.py), and a
# wrong code's back-off must be seen committed.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def high_risk(model_in_this_process) -> ApprovalRequest:
    """An approval required by a policy that requires step-up."""
    ApprovalPolicy.objects.create(
        name="Messages to the owner",
        tool_pattern="draft_contact_message",
        outcome=Outcome.APPROVE,
        requires_step_up=True,
    )
    return paused_for_staff("digital_twin", {"message": HIRE_ME})


@pytest.fixture
def ordinary(model_in_this_process) -> ApprovalRequest:
    return paused_for_staff("digital_twin", {"message": HIRE_ME})


def staff(username: str, *, may_decide: bool = True):
    user = get_user_model().objects.create_user(username, password=PASSWORD, is_staff=True)
    codenames = ["view_approvalrequest", "decide_approval"] if may_decide else ["view_approvalrequest"]
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    return user


def current_code(user) -> str:
    """What the authenticator app of `user`'s (new) TOTP device shows now."""
    device = TOTPDevice.objects.filter(user=user).first() or TOTPDevice.objects.create(
        user=user, name="phone", confirmed=True
    )
    totp = TOTP(device.bin_key, device.step, device.t0, device.digits, device.drift)
    return f"{totp.token():0{device.digits}d}"


def status_of(approval: ApprovalRequest) -> str:
    approval.refresh_from_db()
    return approval.status


# --- step-up ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("door", DOORS)
def test_a_decision_without_step_up_proof_on_a_step_up_policy_is_refused(high_risk, door):
    grace = staff("grace")

    with pytest.raises(StepUpRequired, match="requires step-up") as refused:
        decide(high_risk, approved=True, by=grace, door=door)

    assert refused.value.status == 403
    assert status_of(high_risk) == "pending" and resumes_enqueued() == []


def test_a_rejection_or_a_request_for_changes_without_step_up_proof_is_refused_too(high_risk):
    grace = staff("grace")

    with pytest.raises(StepUpRequired):
        decide(high_risk, approved=False, by=grace, door="admin")
    with pytest.raises(StepUpRequired):
        request_changes(high_risk, "Ask for the phone number too.", by=grace, door="admin")

    assert status_of(high_risk) == "pending"


def test_a_step_up_older_than_step_up_minutes_is_refused(high_risk, settings):
    settings.STEP_UP_MINUTES = 10
    grace = staff("grace")
    stale = step_up_proof(grace, at=time.time() - 10 * 60 - 1)

    with pytest.raises(StepUpRequired, match="more than 10 minutes old"):
        decide(high_risk, approved=True, by=grace, door="admin", step_up=stale)

    decide(high_risk, approved=True, by=grace, door="admin", step_up=step_up_proof(grace, at=time.time() - 9 * 60))
    assert status_of(high_risk) == "approved"


def test_a_step_up_of_someone_else_is_refused(high_risk):
    grace, alan = staff("grace"), staff("alan")

    with pytest.raises(StepUpRequired):
        decide(high_risk, approved=True, by=alan, door="admin", step_up=step_up_proof(grace, password=PASSWORD))

    assert status_of(high_risk) == "pending"


def test_a_wrong_password_is_refused_and_the_right_one_decides_and_is_audited(high_risk):
    grace = staff("grace")

    with pytest.raises(StepUpProofInvalid, match="That is not your password"):
        decide(high_risk, approved=True, by=grace, door="admin", step_up=step_up_proof(grace, password="guess"))
    assert status_of(high_risk) == "pending"

    with time_machine.travel(timezone.now() + timedelta(seconds=2)):  # past the wrong password's back-off
        decide(high_risk, approved=True, by=grace, door="admin", step_up=step_up_proof(grace, password=PASSWORD))

    assert status_of(high_risk) == "approved"
    stepped = AuditEvent.objects.get(approval_id=high_risk.pk, kind="stepped_up")
    assert (stepped.actor, stepped.data["method"]) == ("grace", "password")


def test_a_wrong_totp_code_is_refused_and_its_back_off_outlives_the_refusal(high_risk):
    grace = staff("grace")
    wrong = f"{(int(current_code(grace)) + 1) % 10**6:06d}"

    with pytest.raises(StepUpProofInvalid, match="not a current code"):
        decide(high_risk, approved=True, by=grace, door="api", step_up=step_up_proof(grace, code=wrong))

    # django-otp's count of wrong codes, which makes the device wait before it takes another.
    assert TOTPDevice.objects.get(user=grace).throttling_failure_count == 1
    assert status_of(high_risk) == "pending"


def test_the_admin_token_cannot_decide_a_step_up_policy(high_risk):
    with pytest.raises(StepUpRequired, match="the ADMIN_TOKEN names nobody") as refused:
        decide(high_risk, approved=True, by=None, door="api")

    assert refused.value.required == "staff token, X-OTP-Code"
    assert status_of(high_risk) == "pending"


def test_a_policy_without_step_up_needs_no_proof(ordinary):
    decide(ordinary, approved=True, by=staff("grace"), door="slack")

    assert status_of(ordinary) == "approved"


# --- the order of the refusals ---------------------------------------------------------------------


def test_a_decision_already_made_answers_already_decided_before_any_step_up_check(high_risk):
    grace, alan = staff("grace"), staff("alan")
    code = current_code(grace)
    decide(high_risk, approved=True, by=grace, door="api", step_up=step_up_proof(grace, code=code))

    for proof in (step_up_proof(grace, code=code), None, step_up_proof(alan, password="guess")):
        with pytest.raises(ApprovalConflict, match=r"^This approval was already approved\.$") as refused:
            decide(high_risk, approved=False, by=grace, door="api", step_up=proof)
        assert refused.value.status == 409

    assert status_of(high_risk) == "approved"


def test_the_api_answers_a_decision_resent_with_its_used_code_as_already_decided(high_risk, client, settings):
    settings.APPROVAL_WAIT_SECONDS = 0
    grace = staff("grace")
    token, code = AuthToken.objects.create(grace)[1], current_code(grace)

    def post():
        with committing():
            return client.post(
                f"/api/admin/approvals/{high_risk.pk}",
                json.dumps({"approved": True}),
                content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {token}",
                HTTP_X_OTP_CODE=code,
            )

    first, resent = post(), post()

    assert first.status_code == 202
    assert resent.status_code == 409 and resent.json() == {"detail": "This approval was already approved."}


def test_who_may_not_decide_is_refused_before_their_step_up_code_is_used(high_risk):
    grace = staff("grace", may_decide=False)
    code = current_code(grace)

    with pytest.raises(NotAllowed):
        decide(high_risk, approved=True, by=grace, door="api", step_up=step_up_proof(grace, code=code))

    # The code was not used up by the refused decision: it still steps up.
    grace.user_permissions.add(Permission.objects.get(codename="decide_approval"))
    grace = get_user_model().objects.get(pk=grace.pk)  # the permissions, read again
    decide(high_risk, approved=True, by=grace, door="api", step_up=step_up_proof(grace, code=code))
    assert status_of(high_risk) == "approved"


# --- who may decide at all -------------------------------------------------------------------------


@pytest.mark.parametrize("door", DOORS)
def test_only_active_staff_with_the_permission_to_decide_may_decide_through_any_door(ordinary, door):
    viewer = staff("linus", may_decide=False)
    former = staff("fred")
    former.is_active = False
    former.save()

    for user in (viewer, former):
        with pytest.raises(NotAllowed, match="You may not decide approvals") as refused:
            decide(ordinary, approved=False, by=user, door=door)
        assert refused.value.status == 403

    assert status_of(ordinary) == "pending"
