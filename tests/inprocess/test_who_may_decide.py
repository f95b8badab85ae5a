"""Who may decide an approval: the members of its policy's approver group (handed to the next
group by escalation), M of N different staff, a delegate on a staff member's behalf within the
delegation's period (the audit says so), and never the MCP caller's own user on their own call.
Each refusal says why, and nothing is decided."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.urls import reverse
from django.utils import timezone
from knox.models import AuthToken

from approvals.models import ApprovalPolicy, ApprovalRequest, AuditEvent, Delegation, Outcome, PolicyApproverGroup
from tests.inprocess.driver import (
    NotAllowed,
    SameApprover,
    caller_of,
    committing,
    decide,
    escalate_approvals,
    paused_for_staff,
    request_changes,
    resumes_enqueued,
)

CONTACT = "Please pass a message to the owner: can we talk about a Django project?"
ADMIN_TOKEN = "who-may-decide-admin-token"

# The rule must be committed for the graph's thread to read it (test_approval_policies.py).
pytestmark = pytest.mark.django_db(transaction=True)


def staff(username: str, *groups: Group):
    user = get_user_model().objects.create_user(username, password="pw", is_staff=True, email=f"{username}@example.com")
    user.user_permissions.set(Permission.objects.filter(codename__in=["view_approvalrequest", "decide_approval"]))
    user.groups.set(groups)
    return user


def rule(*groups: Group, outcome: str = Outcome.APPROVE, approvals_required: int = 1) -> ApprovalPolicy:
    policy = ApprovalPolicy.objects.create(
        name="Messages to the owner",
        tool_pattern="draft_contact_message",
        outcome=outcome,
        approvals_required=approvals_required,
    )
    for position, group in enumerate(groups, start=1):
        PolicyApproverGroup.objects.create(policy=policy, group=group, position=position)
    return policy


def paused(**request) -> ApprovalRequest:
    return paused_for_staff("digital_twin", {"message": CONTACT}, **request)


def approve(approval, user, **kw) -> ApprovalRequest:
    return decide(approval, approved=True, by=user, door="admin", **kw)


def delegation(delegator, delegate, *, starts_in: timedelta, lasts: timedelta = timedelta(days=7)) -> Delegation:
    starts_at = timezone.now() + starts_in
    return Delegation.objects.create(
        delegator=delegator, delegate=delegate, starts_at=starts_at, ends_at=starts_at + lasts
    )


def assert_undecided(approval: ApprovalRequest, signoffs: int = 0) -> None:
    approval.refresh_from_db()
    assert (approval.status, approval.decided_at, approval.signoffs.count()) == ("pending", None, signoffs)
    assert resumes_enqueued() == []


@pytest.fixture
def finance() -> Group:
    return Group.objects.create(name="Finance")


# --- approver groups ---------------------------------------------------------------------------


def test_only_members_of_the_policys_approver_group_may_decide(finance):
    rule(finance)
    approval = paused()
    assert approval.approver_group == finance

    for decision in (True, False):
        with pytest.raises(
            NotAllowed, match="Only members of the group “Finance” may decide this approval. You are not one."
        ):
            decide(approval, approved=decision, by=staff(f"outsider-{decision}"), door="admin")
    with pytest.raises(NotAllowed, match="Only members of the group “Finance”"):
        request_changes(approval, "Shorter.", by=staff("outsider"), door="admin")
    assert_undecided(approval)

    assert approve(approval, staff("grace", finance)).status == "approved"


def test_the_admin_token_which_names_nobody_cannot_decide_an_approval_for_a_group(finance):
    rule(finance)
    approval = paused()

    with pytest.raises(NotAllowed, match="decide with your own login or staff API token"):
        decide(approval, approved=False)
    assert_undecided(approval)


def test_without_approver_groups_any_member_of_staff_who_may_decide_decides():
    rule()
    approval = paused()

    assert approval.approver_group is None
    assert approve(approval, staff("grace")).status == "approved"


# --- M of N ------------------------------------------------------------------------------------


def test_m_of_n_needs_m_different_approvers_and_the_last_one_decides(finance):
    rule(finance, approvals_required=3)
    approval = paused()
    grace, alan, edsger = (staff(name, finance) for name in ("grace", "alan", "edsger"))

    assert approval.approvals_required == 3
    approve(approval, grace)
    assert approve(approval, alan).progress == "2 of 3" and resumes_enqueued() == []
    decided = approve(approval, edsger)

    assert decided.status == "approved" and resumes_enqueued() == [str(approval.pk)]
    assert [s.username for s in decided.signoffs.all()] == ["grace", "alan", "edsger"]


def test_the_same_person_cannot_approve_twice_in_m_of_n(finance):
    rule(finance, approvals_required=3)
    approval = paused()
    grace = staff("grace", finance)
    approve(approval, grace)

    with pytest.raises(SameApprover, match="You approved this already: another member of staff must give the second"):
        approve(approval, grace)
    assert_undecided(approval, signoffs=1)


def test_the_same_person_cannot_approve_twice_in_m_of_n_through_a_delegate(finance):
    rule(finance, approvals_required=2)
    approval = paused()
    grace, alan = staff("grace", finance), staff("alan", finance)
    delegation(grace, alan, starts_in=-timedelta(hours=1))
    approve(approval, grace)

    with pytest.raises(SameApprover, match="grace approved this already"):
        approve(approval, alan, on_behalf_of=grace)
    assert_undecided(approval, signoffs=1)


def test_a_delegate_who_approved_in_person_cannot_approve_again_for_someone_else(finance):
    rule(finance, approvals_required=3)
    approval = paused()
    grace, alan = staff("grace", finance), staff("alan", finance)
    delegation(grace, alan, starts_in=-timedelta(hours=1))
    approve(approval, alan)

    with pytest.raises(SameApprover, match="You approved this already"):
        approve(approval, alan, on_behalf_of=grace)
    assert_undecided(approval, signoffs=1)


# --- delegation --------------------------------------------------------------------------------


def test_a_delegate_decides_on_behalf_of_the_delegator_within_the_period_and_the_audit_says_so(finance):
    rule(finance)
    approval = paused()
    grace, alan = staff("grace", finance), staff("alan")  # alan is not in Finance: grace is
    delegation(grace, alan, starts_in=-timedelta(hours=1))

    decided = approve(approval, alan, on_behalf_of=grace)

    assert (decided.status, decided.decided_by, decided.decider) == (
        "approved",
        alan,
        "alan on behalf of grace (in the Django admin)",
    )
    ((signoff),) = decided.signoffs.all()
    assert (signoff.user, signoff.on_behalf_of, signoff.who) == (alan, grace, "alan on behalf of grace")
    audited = AuditEvent.objects.get(approval_id=approval.pk, kind="decided")
    assert (audited.actor, audited.data["on_behalf_of"]) == ("alan", "grace")


@pytest.mark.parametrize("starts_in", [timedelta(days=1), -timedelta(days=8)], ids=["not-yet", "over"])
def test_a_delegate_acting_outside_the_period_is_refused(finance, starts_in):
    rule(finance)
    approval = paused()
    grace, alan = staff("grace", finance), staff("alan")
    delegation(grace, alan, starts_in=starts_in)

    with pytest.raises(
        NotAllowed, match=r"You may act for grace only while their delegation runs \(from .* to .*\); it does not now."
    ):
        approve(approval, alan, on_behalf_of=grace)
    assert_undecided(approval)


def test_nobody_may_act_for_someone_who_did_not_name_them_their_delegate(finance):
    rule(finance)
    approval = paused()
    grace, alan = staff("grace", finance), staff("alan")

    with pytest.raises(NotAllowed, match="grace has not named you as their delegate."):
        approve(approval, alan, on_behalf_of=grace)
    assert_undecided(approval)


def test_nobody_may_act_for_someone_who_may_not_decide_themselves():
    rule()
    approval = paused()
    viewer, alan = staff("victor"), staff("alan")
    viewer.user_permissions.remove(Permission.objects.get(codename="decide_approval"))
    delegation(viewer, alan, starts_in=-timedelta(hours=1))

    with pytest.raises(NotAllowed, match="victor may not decide approvals themselves, so nobody may on their behalf."):
        approve(approval, alan, on_behalf_of=viewer)
    assert_undecided(approval)


# --- self-approval -----------------------------------------------------------------------------


def test_the_callers_own_user_cannot_approve_their_own_call():
    ada = staff("ada")
    approval = paused(by=caller_of(ada))
    assert approval.requested_by == ada

    with pytest.raises(NotAllowed, match="Nobody may approve their own call: this one was made with your MCP token."):
        approve(approval, ada)
    assert_undecided(approval)
    assert approve(approval, staff("grace")).status == "approved"


def test_a_delegate_cannot_approve_a_call_on_behalf_of_the_user_who_made_it():
    ada, alan = staff("ada"), staff("alan")
    delegation(ada, alan, starts_in=-timedelta(hours=1))
    approval = paused(by=caller_of(ada))

    with pytest.raises(NotAllowed, match="Nobody may approve their own call: this one was made with their MCP token."):
        approve(approval, alan, on_behalf_of=ada)
    assert_undecided(approval)


def test_the_caller_may_still_reject_their_own_call():
    ada = staff("ada")
    approval = paused(by=caller_of(ada))

    assert decide(approval, approved=False, by=ada, door="admin").status == "rejected"


# --- escalation --------------------------------------------------------------------------------


def test_escalation_hands_the_approval_to_the_policys_next_group_after_its_deadline(settings, finance, mailoutbox):
    settings.APPROVAL_ESCALATE_AFTER = timedelta(hours=1)
    directors = Group.objects.create(name="Directors")
    rule(finance, directors)
    approval = paused()
    grace, ceo = staff("grace", finance), staff("ceo", directors)

    assert escalate_approvals() == 0
    with time_machine.travel(timezone.now() + timedelta(hours=2)):
        assert escalate_approvals() == 1
    approval.refresh_from_db()

    assert (approval.approver_group, approval.escalation_level) == (directors, 1)
    assert AuditEvent.objects.get(approval_id=approval.pk, kind="escalated").data == {"approver_group": "Directors"}
    assert "ceo@example.com" in [address for sent in mailoutbox for address in sent.to]
    with pytest.raises(NotAllowed, match="Only members of the group “Directors”"):
        approve(approval, grace)
    assert approve(approval, ceo).status == "approved"


def test_an_approval_whose_policy_has_no_further_group_is_escalated_once(settings, finance):
    settings.APPROVAL_ESCALATE_AFTER = timedelta(hours=1)
    rule(finance)
    approval = paused()

    with time_machine.travel(timezone.now() + timedelta(hours=2)):
        assert escalate_approvals() == 1
    with time_machine.travel(timezone.now() + timedelta(hours=4)):
        assert escalate_approvals() == 0
    approval.refresh_from_db()
    assert (approval.approver_group, approval.escalation_level) == (finance, 0) and approval.escalated_at is not None


# --- the admin and the REST API ------------------------------------------------------------------


def test_the_decision_page_names_the_group_offers_acting_for_a_delegator_and_shows_a_refusal(client, finance):
    rule(finance)
    approval = paused()
    grace, alan = staff("grace", finance), staff("alan")
    delegation(grace, alan, starts_in=timedelta(days=1))
    client.force_login(alan)
    change = reverse("admin:approvals_approvalrequest_change", args=[approval.pk])

    page = client.get(change).content.decode()
    with committing():
        refused = client.post(
            reverse("admin:approvals_approvalrequest_decide", args=[approval.pk]),
            {"decision": "approve", "note": "", "on_behalf_of": "grace"},
            follow=True,
        ).content.decode()

    assert "decided by the group “Finance”" in page
    assert '<option value="grace">on behalf of grace (as their delegate)</option>' in page
    assert "Nothing was decided: You may act for grace only while their delegation runs" in refused
    assert_undecided(approval)


def test_the_api_refuses_who_may_not_decide_with_403_and_the_reason(client, settings, finance):
    settings.ADMIN_TOKEN = ADMIN_TOKEN
    rule(finance)
    approval = paused()

    def post(user, body):
        return client.post(
            f"/api/admin/approvals/{approval.pk}",
            body,
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {AuthToken.objects.create(user)[1]}",
        )

    outsider = post(staff("outsider"), {"approved": True})
    unknown = post(staff("alan"), {"approved": True, "on_behalf_of": "nobody"})

    assert outsider.status_code == 403
    assert outsider.json() == {
        "detail": "Only members of the group “Finance” may decide this approval. You are not one."
    }
    assert unknown.status_code == 403 and "no staff member named “nobody”" in unknown.json()["detail"]
    assert_undecided(approval)


def test_staff_name_their_own_delegates_in_the_admin_and_not_themselves(client):
    grace, alan = staff("grace"), staff("alan")
    client.force_login(grace)
    add = reverse("admin:approvals_delegation_add")
    period = {"starts_at_0": "2030-01-01", "starts_at_1": "09:00", "ends_at_0": "2030-01-08", "ends_at_1": "09:00"}

    myself = client.post(add, {"delegate": grace.pk, **period})
    client.post(add, {"delegate": alan.pk, **period})

    assert "Name someone else" in myself.content.decode()
    assert [(d.delegator, d.delegate) for d in Delegation.objects.all()] == [(grace, alan)]


def test_the_decision_page_leaves_out_what_its_viewer_may_not_do_and_says_why(client, finance):
    rule(finance)
    ada = staff("ada", finance)
    own = paused(by=caller_of(ada))
    change = reverse("admin:approvals_approvalrequest_change", args=[own.pk])

    client.force_login(staff("outsider"))
    outsider = client.get(change).content.decode()
    client.force_login(ada)
    caller = client.get(change).content.decode()

    assert 'id="not-in-group"' in outsider and 'value="reject"' not in outsider
    assert "only members of the group “Finance” decide it" in outsider
    assert 'id="own-call"' in caller and 'value="approve"' not in caller and 'value="reject"' in caller


def test_a_policys_approver_groups_are_saved_in_turn_and_a_group_too_small_for_m_of_n_is_warned_of(
    admin_client, finance
):
    directors = Group.objects.create(name="Directors")
    staff("grace", finance)
    form = {
        "position": "10", "name": "Big refunds", "enabled": "on", "outcome": Outcome.APPROVE,
        "approvals_required": "2", "graph_pattern": "*", "tool_pattern": "refund",
        "group_links-TOTAL_FORMS": "2", "group_links-INITIAL_FORMS": "0",
        "group_links-0-position": "2", "group_links-0-group": directors.pk,
        "group_links-1-position": "1", "group_links-1-group": finance.pk,
    }  # fmt: skip

    response = admin_client.post(reverse("admin:approvals_approvalpolicy_add"), form, follow=True)

    (saved,) = ApprovalPolicy.objects.all()
    assert saved.approver_group_ids() == [finance.pk, directors.pk]
    assert "The group “Finance” has 1 active member(s), fewer than the 2 approvals" in response.content.decode()
