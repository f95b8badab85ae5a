"""An approval is bound to the exact action: the SHA-256 of the canonical JSON (RFC 8785) of the
graph, the tool calls, the caller and the policy (id and version). Edited arguments are another
action with a digest of their own; the resume runs nothing that differs from what was approved;
an approval is used once; and a decision on a call whose policy changed while it waited is
refused until the decider confirms having seen the policy as it is now."""

from __future__ import annotations

import hashlib
import json

import pytest
import rfc8785
from django.urls import reverse

from approvals.models import ApprovalPolicy, ApprovalRequest, AuditEvent, ContactMessage, Outcome
from tests.inprocess.driver import (
    ApprovalConflict,
    PolicyChanged,
    committing,
    decide,
    paused_for_staff,
    resume_approval,
    run_resumes,
    thread_state,
)
from tests.staff_approvals import DRAFT, HIRE_ME

EDITED = {**DRAFT, "message": "Edited before approving."}


def digest_of(calls: list[dict], *, policy: dict | None = None, caller: str = "user:1") -> str:
    """The digest as the documentation defines it, computed here from RFC 8785 directly."""
    action = {
        "graph": "digital_twin",
        "calls": [{"tool": call["name"], "arguments": call["input"]} for call in calls],
        "caller": caller,
        "policy": policy or {"id": None, "version": None},
    }
    return hashlib.sha256(rfc8785.dumps(action)).hexdigest()


def kinds(approval: ApprovalRequest) -> list[str]:
    return list(AuditEvent.objects.filter(approval_id=approval.pk).values_list("kind", flat=True))


def contact_rule() -> ApprovalPolicy:
    rule = ApprovalPolicy(name="Messages to the owner", outcome=Outcome.APPROVE, tool_pattern="draft_contact_message")
    rule.save()
    return rule


def test_an_approval_carries_the_sha256_of_the_canonical_json_of_its_action(paused_approval):
    assert paused_approval.digest == digest_of([{"name": "draft_contact_message", "input": DRAFT}])
    assert paused_approval.caller == "user:1"


@pytest.mark.django_db(transaction=True)
def test_the_digest_covers_the_policy_id_and_version(model_in_this_process):
    # Committed: the graph reads the rules on a connection of its own.
    rule = contact_rule()

    approval = paused_for_staff("digital_twin", {"message": HIRE_ME})

    assert (approval.policy_key, approval.policy_version) == (rule.pk, 1)
    assert approval.digest == digest_of(approval.tool_calls, policy={"id": rule.pk, "version": 1})


def test_edited_arguments_get_a_new_digest_recorded_in_the_audit(paused_approval):
    decide(paused_approval, approved=True, arguments=[EDITED])

    paused_approval.refresh_from_db()
    edited_digest = digest_of([{"name": "draft_contact_message", "input": EDITED}])
    assert paused_approval.approved_digest == edited_digest != paused_approval.digest
    edit = AuditEvent.objects.get(approval_id=paused_approval.pk, kind="edited")
    assert (edit.data["digest"], edit.data["requested_digest"]) == (edited_digest, paused_approval.digest)
    assert AuditEvent.objects.get(approval_id=paused_approval.pk, kind="decided").data["digest"] == edited_digest


def test_the_decision_page_shows_the_digest_and_the_edited_digest(paused_approval, admin_client):
    decide(paused_approval, approved=True, arguments=[EDITED])
    paused_approval.refresh_from_db()

    page = admin_client.get(reverse("admin:approvals_approvalrequest_change", args=[paused_approval.pk]))

    html = page.content.decode()
    assert f"<code>{paused_approval.digest}</code>" in html
    assert f'<code id="approved-digest">{paused_approval.approved_digest}</code>' in html


def test_the_api_shows_the_digest_and_the_approved_digest(paused_approval, client, settings):
    settings.ADMIN_TOKEN = "binding-admin-token"
    decide(paused_approval, approved=True, arguments=[EDITED])

    body = client.get(
        f"/api/admin/approvals/{paused_approval.pk}", HTTP_AUTHORIZATION="Bearer binding-admin-token"
    ).json()

    paused_approval.refresh_from_db()
    assert (body["digest"], body["approved_digest"]) == (paused_approval.digest, paused_approval.approved_digest)


def test_the_resume_runs_nothing_when_what_would_run_differs_from_what_was_approved(paused_approval):
    decide(paused_approval, approved=True)
    # The approved arguments changed after the decision, behind the service's back.
    ApprovalRequest.objects.filter(pk=paused_approval.pk).update(
        edited_tool_calls=[{"name": "draft_contact_message", "input": EDITED}]
    )

    run_resumes()

    paused_approval.refresh_from_db()
    assert not ContactMessage.objects.exists()
    assert thread_state(paused_approval.thread_id)["contact_drafts"] == []
    assert "a new approval is required" in paused_approval.error
    assert kinds(paused_approval)[-2:] == ["refused", "finished"]


def test_the_resume_runs_nothing_for_another_caller_than_the_one_that_asked(paused_approval):
    decide(paused_approval, approved=True)
    ApprovalRequest.objects.filter(pk=paused_approval.pk).update(caller="user:2")

    run_resumes()

    paused_approval.refresh_from_db()
    assert not ContactMessage.objects.exists() and "a new approval is required" in paused_approval.error


def test_an_approval_is_used_once(paused_approval):
    decide(paused_approval, approved=True)
    run_resumes()

    # The resume delivered again, and a second decision: neither runs the action again.
    resume_approval(str(paused_approval.pk))
    with pytest.raises(ApprovalConflict):
        decide(paused_approval, approved=True)

    assert ContactMessage.objects.count() == 1
    assert kinds(paused_approval) == ["requested", "decided", "resumed", "finished"]


@pytest.mark.django_db(transaction=True)
def test_editing_a_policy_gives_it_a_new_version():
    rule = contact_rule()

    rule.outcome = Outcome.TWO_APPROVALS
    rule.save()
    ApprovalPolicy.objects.get(pk=rule.pk).save()

    assert ApprovalPolicy.objects.get(pk=rule.pk).version == 3


@pytest.mark.django_db(transaction=True)
def test_a_decision_on_a_call_whose_policy_changed_is_refused_until_its_current_version_is_confirmed(
    model_in_this_process,
):
    rule = contact_rule()
    approval = paused_for_staff("digital_twin", {"message": HIRE_ME})
    rule.name = "Messages to the owner, reworded"
    rule.save()

    with pytest.raises(PolicyChanged, match=r"changed since this call was requested \(version 1, now 2\)"):
        decide(approval, approved=True)
    with pytest.raises(PolicyChanged):
        decide(approval, approved=True, seen_policy_version=1)
    decided = decide(approval, approved=True, seen_policy_version=2)

    assert decided.status == "approved"
    assert AuditEvent.objects.get(approval_id=approval.pk, kind="decided").data["policy_version_seen"] == 2


@pytest.mark.django_db(transaction=True)
def test_a_decision_on_a_call_whose_policy_was_deleted_is_refused_until_that_is_confirmed(model_in_this_process):
    rule = contact_rule()
    approval = paused_for_staff("digital_twin", {"message": HIRE_ME})
    rule.delete()

    with pytest.raises(PolicyChanged, match="was deleted since this call was requested"):
        decide(approval, approved=False)

    assert decide(approval, approved=False, seen_policy_version=0).status == "rejected"


@pytest.mark.django_db(transaction=True)
def test_the_decision_page_says_the_policy_changed_and_decides_only_once_it_is_confirmed(
    model_in_this_process, admin_client
):
    rule = contact_rule()
    approval = paused_for_staff("digital_twin", {"message": HIRE_ME})
    rule.save()
    page = admin_client.get(reverse("admin:approvals_approvalrequest_change", args=[approval.pk])).content.decode()
    decide_url = reverse("admin:approvals_approvalrequest_decide", args=[approval.pk])

    unconfirmed = admin_client.post(decide_url, {"decision": "approve", "note": ""}, follow=True).content.decode()
    approval.refresh_from_db()
    assert approval.status == "pending"
    with committing():
        admin_client.post(decide_url, {"decision": "approve", "note": "", "seen_policy_version": "2"})

    assert 'id="policy-changed"' in page and "(version 1, now 2)" in page
    assert 'name="seen_policy_version" value="2" required' in page
    assert "Nothing was decided. The policy “Messages to the owner” changed" in unconfirmed
    approval.refresh_from_db()
    assert approval.status == "approved"


@pytest.mark.django_db(transaction=True)
def test_the_api_refuses_a_decision_on_a_changed_policy_with_409_until_it_names_the_current_version(
    model_in_this_process, client, settings
):
    settings.ADMIN_TOKEN, settings.APPROVAL_WAIT_SECONDS = "binding-admin-token", 0
    rule = contact_rule()
    approval = paused_for_staff("digital_twin", {"message": HIRE_ME})
    rule.save()

    def post(body):
        return client.post(
            f"/api/admin/approvals/{approval.pk}",
            json.dumps(body),
            content_type="application/json",
            HTTP_AUTHORIZATION="Bearer binding-admin-token",
        )

    shown = client.get(f"/api/admin/approvals/{approval.pk}", HTTP_AUTHORIZATION="Bearer binding-admin-token").json()
    refused = post({"approved": True})
    accepted = post({"approved": True, "seen_policy_version": 2})

    assert (shown["policy_version"], shown["current_policy_version"], shown["policy_changed"]) == (1, 2, True)
    assert refused.status_code == 409 and "(version 1, now 2)" in refused.json()["detail"]
    assert accepted.status_code == 202 and accepted.json()["status"] == "approved"
