"""Evidence an auditor can use: for one approval or the approvals requested in a period, the admin
exports (as JSON, and as a printable page) the exact action and its digest, the policy and its
version, every approver and sign-off with time, channel and proof of presence, delegation, notes
and requested changes, the agent's original and revised calls, what ran and its result, and the
audit chain's verification for those events with the head it was verified against."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from approvals import digests
from approvals.models import ApprovalPolicy, ApprovalRequest, AuditEvent, Delegation, Outcome
from tests.inprocess.driver import decide, paused_for_staff, request_changes, run_resumes, step_up_proof
from tests.staff_approvals import HIRE_ME

PASSWORD = "correct horse battery"

# The rule must be committed for the graph's thread to read it.
pytestmark = pytest.mark.django_db(transaction=True)


def staff(username: str):
    user = get_user_model().objects.create_user(username, password=PASSWORD, is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=["view_approvalrequest", "decide_approval"]))
    return user


def auditor() -> Client:
    """A member of staff who may view approvals, and nothing more."""
    user, _ = get_user_model().objects.get_or_create(username="auditor", defaults={"is_staff": True})
    user.user_permissions.set(Permission.objects.filter(codename="view_approvalrequest"))
    browser = Client()
    browser.force_login(user)
    return browser


def policy(**fields) -> ApprovalPolicy:
    return ApprovalPolicy.objects.create(name="Messages to the owner", tool_pattern="draft_contact_message", **fields)


def paused() -> ApprovalRequest:
    return paused_for_staff("digital_twin", {"message": HIRE_ME})


def evidence_of(approval: ApprovalRequest, **query: str) -> dict:
    url = reverse("admin:approvals_approvalrequest_evidence", args=[approval.pk])
    answer = auditor().get(url, {"format": "json", **query})
    assert answer.status_code == 200, answer
    (record,) = answer.json()["approvals"]
    return {**record, "audit_chain": answer.json()["audit_chain"]}


def test_the_evidence_holds_the_exact_action_and_its_digest(model_in_this_process):
    approval = paused()

    record = evidence_of(approval)

    assert record["action"] == approval.action()
    assert record["digest"] == approval.digest == digests.sha256(record["action"])


def test_the_evidence_names_the_policy_and_its_version(model_in_this_process):
    rule = policy(requires_step_up=True)
    approval = paused()

    assert evidence_of(approval)["policy"] == {
        "name": "Messages to the owner",
        "id": rule.pk,
        "version": rule.version,
        "approvals_required": 1,
        "requires_step_up": True,
        "requires_passkey": False,
    }


def test_the_evidence_names_every_approver_and_sign_off_with_time_and_channel(model_in_this_process):
    policy(outcome=Outcome.TWO_APPROVALS)
    approval = paused()
    ada, grace = staff("ada"), staff("grace")
    decide(approval, approved=True, by=ada, door="admin", note="Looks right.")
    decide(approval, approved=True, by=grace, door="api", note="Agreed.")
    approval.refresh_from_db()

    record = evidence_of(approval)

    assert [(s["kind"], s["who"], s["channel"], s["note"]) for s in record["approvers"]] == [
        ("sign-off", "ada", "admin", "Looks right."),
        ("sign-off", "grace", "api", "Agreed."),
    ]
    assert [s["at"] for s in record["approvers"]] == [
        s.created_at.isoformat() for s in approval.signoffs.order_by("created_at")
    ]
    decision = record["decision"]
    assert (decision["status"], decision["who"], decision["channel"], decision["at"]) == (
        "approved", "grace", "api", approval.decided_at.isoformat(),
    )  # fmt: skip


def test_the_evidence_gives_each_approvers_proof_of_presence(model_in_this_process):
    policy(requires_step_up=True)
    approval = paused()
    grace = staff("grace")
    decide(approval, approved=True, by=grace, door="admin", step_up=step_up_proof(grace, password=PASSWORD))

    proof = evidence_of(approval)["decision"]["proof_of_presence"]

    stepped = AuditEvent.objects.get(approval_id=approval.pk, kind="stepped_up")
    assert proof["authenticated_by"] == "the Django admin's login (session)"
    assert proof["step_up"] == {
        "method": "password", "at": stepped.at.isoformat(), "with_this_decision": True, "audit_event": stepped.seq,
    }  # fmt: skip


def test_the_evidence_names_the_delegation(model_in_this_process):
    approval = paused()
    ada, alan = staff("ada"), staff("alan")
    now = timezone.now()
    Delegation.objects.create(
        delegator=ada, delegate=alan, starts_at=now - timedelta(hours=1), ends_at=now + timedelta(days=1)
    )
    decide(approval, approved=True, by=alan, on_behalf_of=ada, door="admin")

    decision = evidence_of(approval)["decision"]

    assert (decision["who"], decision["on_behalf_of"]) == ("alan", "ada")


def test_the_evidence_holds_the_notes_and_the_changes_requested(model_in_this_process):
    approval = paused()
    request_changes(approval, "Reply to ada@work.example, not the personal address.", by=staff("grace"))

    decision = evidence_of(approval)["decision"]

    assert decision["status"] == "changes_requested"
    assert decision["note"] == decision["changes_requested"] == "Reply to ada@work.example, not the personal address."


def test_the_evidence_holds_the_agents_original_and_revised_calls(model_in_this_process):
    first = paused()
    request_changes(first, "Reply to ada@work.example, not the personal address.")
    run_resumes()
    second = ApprovalRequest.objects.get(revision_of=first)

    original, revision = evidence_of(first)["calls"], evidence_of(second)["calls"]

    assert original["as_requested"] == first.tool_calls
    assert original["revised_by"] == {"approval": str(second.pk), "tool_calls": second.tool_calls}
    assert revision["revises"] == {"approval": str(first.pk), "tool_calls": first.tool_calls}
    assert second.tool_calls[0]["input"]["email"] == "ada@work.example"


def test_the_evidence_holds_staffs_edit_of_the_arguments(model_in_this_process):
    approval = paused()
    edited = {**approval.tool_calls[0]["input"], "email": "ada@work.example"}
    decide(approval, approved=True, arguments=[edited], by=staff("grace"), door="admin")

    record = evidence_of(approval)

    assert record["calls"]["edited_by_staff"] == [{"name": "draft_contact_message", "input": edited}]
    assert record["ran"]["tool_calls"] == record["calls"]["edited_by_staff"]


def test_the_evidence_says_what_ran_and_its_result(model_in_this_process):
    approval = paused()
    decide(approval, approved=True, by=staff("grace"), door="admin")
    run_resumes()
    approval.refresh_from_db()

    ran = evidence_of(approval)["ran"]

    assert ran["approved_digest"] == approval.approved_digest and ran["resumed"] is True and ran["refused"] is None
    assert ran["answer"] == approval.answer and ran["answer"] and ran["answered_at"] == approval.answered_at.isoformat()


def test_the_evidence_verifies_the_audit_chain_for_its_events_and_names_the_head_it_was_verified_against(
    model_in_this_process,
):
    approval = paused()
    decide(approval, approved=True, by=staff("grace"), door="admin")
    last = AuditEvent.objects.order_by("-seq").first()

    record = evidence_of(approval)

    chain = record["audit_chain"]
    assert chain["holds"] is True and chain["broken"] is None
    assert chain["verified_against"] == {"seq": last.seq, "hash": last.hash, "recorded": "the head row"}
    assert [(e["kind"], e["hash"], e["verified"]) for e in record["audit_events"]] == [
        (event.kind, event.hash, True) for event in AuditEvent.objects.filter(approval_id=approval.pk).order_by("seq")
    ]


def test_the_evidence_against_a_head_recorded_elsewhere_shows_a_cut_tail(model_in_this_process):
    approval = paused()
    decide(approval, approved=True, by=staff("grace"), door="admin")
    last = AuditEvent.objects.order_by("-seq").first()
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM approvals_auditevent WHERE seq = %s", [last.seq])
        cursor.execute(
            "UPDATE approvals_audithead SET seq = %s, hash = (SELECT hash FROM approvals_auditevent WHERE seq = %s)",
            [last.seq - 1, last.seq - 1],
        )

    chain = evidence_of(approval, expect_head=f"{last.seq}:{last.hash}")["audit_chain"]

    assert chain["holds"] is False and "short of the head recorded elsewhere" in chain["broken"]
    assert chain["verified_against"] == {"seq": last.seq, "hash": last.hash, "recorded": "elsewhere"}


def test_the_evidence_for_a_period_holds_the_approvals_requested_in_it(model_in_this_process):
    approval = paused()
    today = timezone.now().date()

    inside = auditor().get(
        reverse("admin:approvals_approvalrequest_evidence_period"), {"since": str(today), "format": "json"}
    )
    after = auditor().get(
        reverse("admin:approvals_approvalrequest_evidence_period"),
        {"since": str(today + timedelta(days=1)), "format": "json"},
    )

    assert [a["approval"] for a in inside.json()["approvals"]] == [str(approval.pk)]
    assert after.json()["approvals"] == []


def test_the_printable_page_shows_each_field_of_the_evidence(model_in_this_process):
    policy(requires_step_up=True)
    approval = paused()
    grace = staff("grace")
    decide(
        approval,
        approved=True,
        by=grace,
        door="admin",
        note="Checked.",
        step_up=step_up_proof(grace, password=PASSWORD),
    )
    run_resumes()
    approval.refresh_from_db()

    page = auditor().get(reverse("admin:approvals_approvalrequest_evidence", args=[approval.pk])).content.decode()

    for shown in [
        approval.digest, "“Messages to the owner”", "with step-up", "decision: approved", "grace", "admin",
        "step-up: password", "Checked.", approval.approved_digest, "resumed</dt><dd>yes", "holds:", "verified against",
        "Download as JSON",
    ]:  # fmt: skip
        assert shown in page, shown


@pytest.mark.parametrize(
    "query",
    [{"since": "last tuesday"}, {"until": "2026-02-30"}, {"expect_head": "12"}],
    ids=["since", "until", "expect_head"],
)
def test_an_evidence_export_with_a_bad_filter_says_so_and_exports_nothing(model_in_this_process, query):
    answer = auditor().get(reverse("admin:approvals_approvalrequest_evidence_period"), query, follow=True)

    assert answer.status_code == 200
    assert "No evidence was exported:" in answer.content.decode()


def test_the_evidence_of_an_approval_that_does_not_exist_is_404(model_in_this_process):
    url = reverse("admin:approvals_approvalrequest_evidence", args=["00000000-0000-0000-0000-000000000000"])
    assert auditor().get(url).status_code == 404
    assert auditor().get(url.replace("00000000-0000-0000-0000-000000000000", "not-a-uuid")).status_code == 404


def test_the_evidence_needs_the_view_permission_on_approvals(model_in_this_process):
    approval = paused()
    stranger = get_user_model().objects.create_user("stranger", is_staff=True)
    browser = Client()
    browser.force_login(stranger)

    assert browser.get(reverse("admin:approvals_approvalrequest_evidence", args=[approval.pk])).status_code == 403
