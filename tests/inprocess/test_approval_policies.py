"""Policies as data: staff's rules decide which tool calls of an agent run at once, wait for one
or two staff approvals, or are refused; the tool's high_risk flag decides when no rule matches.
Each call goes through the real digital_twin graph (its scripted model) and the staff side."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from approvals.models import ApprovalPolicy, ApprovalRequest, ContactMessage, Outcome
from tests.inprocess.driver import call, staff_decides

CONTACT = "Please pass a message to the owner: can we talk about a Django project?"
AVAILABILITY = "When are you available for new work?"

# LangGraph runs a node on a thread of its own, with its own database connection: the rules a test
# saves must be committed for the graph to read them.
pytestmark = pytest.mark.django_db(transaction=True)


def policy(
    outcome: str, *, tool: str = "draft_contact_message", graph: str = "digital_twin", **fields
) -> ApprovalPolicy:
    rule = ApprovalPolicy(name=f"{outcome} {tool}", outcome=outcome, tool_pattern=tool, graph_pattern=graph, **fields)
    rule.full_clean()
    rule.save()
    return rule


def text_of(result: dict) -> str:
    """The agent's final answer to the MCP client."""
    return result["structuredContent"]["answer"]


def approval_of(result: dict) -> ApprovalRequest:
    return ApprovalRequest.objects.get(pk=result["structuredContent"]["approval_id"])


# --- the outcomes ------------------------------------------------------------------------------


def test_without_a_matching_policy_a_high_risk_tool_waits_for_staff_required_by_its_flag():
    result = call("digital_twin", {"message": CONTACT})

    approval = approval_of(result)
    assert (approval.policy, approval.policy_name, approval.approvals_required) == (None, "", 1)
    assert approval.required_by == "the tool's high_risk flag"


def test_without_a_matching_policy_a_tool_that_is_not_high_risk_runs_at_once():
    result = call("digital_twin", {"message": AVAILABILITY})

    assert "available_from" in text_of(result) and not ApprovalRequest.objects.exists()


def test_a_run_without_approval_policy_lets_a_high_risk_call_run_at_once():
    policy(Outcome.RUN)

    result = call("digital_twin", {"message": CONTACT})

    assert text_of(result).startswith("Your message was recorded")
    assert not ApprovalRequest.objects.exists()
    # Contact messages are the archive of what staff approved: nothing was.
    assert not ContactMessage.objects.exists()


def test_a_staff_approval_policy_pauses_a_call_its_tool_would_run_and_the_approval_records_the_rule():
    rule = policy(Outcome.APPROVE, tool="get_availability")

    result = call("digital_twin", {"message": AVAILABILITY})

    approval = approval_of(result)
    assert approval.tool_names == "get_availability"
    assert (approval.policy, approval.policy_name, approval.approvals_required) == (rule, rule.name, 1)
    assert "available_from" in staff_decides(str(approval.pk), approved=True)


def test_a_two_approvals_policy_asks_for_two_approvals():
    rule = policy(Outcome.TWO_APPROVALS)

    approval = approval_of(call("digital_twin", {"message": CONTACT}))

    assert (approval.policy, approval.approvals_required, approval.progress) == (rule, 2, "0 of 2")


def test_a_refuse_policy_declines_the_call_to_the_model_and_it_never_runs():
    rule = policy(Outcome.REFUSE)

    result = call("digital_twin", {"message": CONTACT})

    assert text_of(result).startswith("Sorry, the owner declined")
    assert f"Not allowed by the policy “{rule.name}”" in text_of(result)
    assert not ApprovalRequest.objects.exists() and not ContactMessage.objects.exists()


# --- matching ----------------------------------------------------------------------------------


def test_the_first_matching_policy_by_position_decides():
    policy(Outcome.REFUSE, position=20)
    first = policy(Outcome.TWO_APPROVALS, position=10)

    approval = approval_of(call("digital_twin", {"message": CONTACT}))

    assert approval.policy == first


def test_a_disabled_policy_is_skipped():
    policy(Outcome.REFUSE, enabled=False)

    approval = approval_of(call("digital_twin", {"message": CONTACT}))

    assert approval.required_by == "the tool's high_risk flag"


def test_graph_and_tool_patterns_match_names_with_wildcards_and_nothing_else():
    policy(Outcome.REFUSE, graph="other_*")  # another graph's rule
    rule = policy(Outcome.TWO_APPROVALS, graph="digital_*", tool="draft_*_message")

    approval = approval_of(call("digital_twin", {"message": CONTACT}))

    assert approval.policy == rule


def test_an_argument_condition_decides_whether_its_policy_matches():
    policy(Outcome.RUN, argument_path="/email", operator="matches", value="*@partner.example")
    rule = policy(Outcome.TWO_APPROVALS, argument_path="/email", operator="matches", value="*@example.com")

    approval = approval_of(call("digital_twin", {"message": CONTACT}))

    assert approval.policy == rule  # the scripted model writes from visitor@example.com


def test_a_condition_on_an_argument_the_call_does_not_have_does_not_match():
    policy(Outcome.RUN, argument_path="/amount", operator="less", value=100)

    approval = approval_of(call("digital_twin", {"message": CONTACT}))

    assert approval.required_by == "the tool's high_risk flag"


def test_a_policy_edited_while_a_call_waits_does_not_change_what_staff_were_shown_or_what_runs():
    rule = policy(Outcome.APPROVE)
    approval = approval_of(call("digital_twin", {"message": CONTACT}))

    rule.outcome = Outcome.REFUSE
    rule.save()
    answer = staff_decides(str(approval.pk), approved=True, seen_policy_version=rule.version)

    assert answer.startswith("Your message was recorded")
    assert ContactMessage.objects.filter(approval=approval).count() == 1


def test_a_decision_outlives_its_policy_by_the_name_it_had():
    rule = policy(Outcome.APPROVE)
    approval = approval_of(call("digital_twin", {"message": CONTACT}))

    rule.delete()

    approval.refresh_from_db()
    assert (approval.policy, approval.required_by) == (None, "approve draft_contact_message")


# --- the admin ---------------------------------------------------------------------------------

# The admin's form for a rule, without its condition.
BIG_REFUNDS = {
    "position": "10",
    "name": "Big refunds",
    "enabled": "on",
    "outcome": Outcome.TWO_APPROVALS,
    "graph_pattern": "*",
    "tool_pattern": "refund",
    "approvals_required": "2",
    # The approver groups' inline, empty.
    "group_links-TOTAL_FORMS": "0",
    "group_links-INITIAL_FORMS": "0",
}


@pytest.mark.parametrize(
    ("fields", "field", "error"),
    [
        ({"argument_path": "amount", "operator": "greater", "value": "100"}, "argument_path", "did you mean /amount?"),
        ({"argument_path": "/amount", "operator": "greater", "value": '"a lot"'}, "value", "compare numbers"),
        ({"argument_path": "/amount", "operator": "", "value": "100"}, "operator", "Choose how to compare"),
        ({"argument_path": "/to", "operator": "matches", "value": "*@example.com"}, "value", "Enter a valid JSON"),
        ({"argument_path": "/to", "operator": "matches", "value": "3"}, "value", "A pattern is text"),
        ({"argument_path": "", "operator": "equals", "value": "3"}, "argument_path", "needs the argument's path"),
        ({"argument_path": "/to", "operator": "present", "value": "3"}, "value", "leave the value empty"),
    ],
)
def test_a_policy_whose_condition_cannot_be_read_as_meant_is_refused_on_save_with_the_reason_beside_its_field(
    admin_client, fields, field, error
):
    response = admin_client.post(reverse("admin:approvals_approvalpolicy_add"), {**BIG_REFUNDS, **fields})

    assert response.status_code == 200 and not ApprovalPolicy.objects.exists()
    errors = response.context["adminform"].form.errors
    assert error in " ".join(errors[field]), errors


def test_a_policy_is_saved_in_the_admin_and_listed_with_its_condition(admin_client):
    condition = {"argument_path": "/amount", "operator": "greater", "value": "100"}

    admin_client.post(reverse("admin:approvals_approvalpolicy_add"), {**BIG_REFUNDS, **condition})

    (saved,) = ApprovalPolicy.objects.all()
    assert (saved.value, saved.outcome) == (100, Outcome.TWO_APPROVALS)
    listed = admin_client.get(reverse("admin:approvals_approvalpolicy_changelist")).content.decode()
    assert "/amount is greater than 100" in listed


def test_the_queue_shows_and_filters_by_the_policy_that_required_each_approval(admin_client):
    rule = policy(Outcome.APPROVE, tool="get_availability")
    by_rule = approval_of(call("digital_twin", {"message": AVAILABILITY}))
    by_flag = approval_of(call("digital_twin", {"message": CONTACT}))
    queue = reverse("admin:approvals_approvalrequest_changelist")

    filtered = admin_client.get(queue, {"policy": rule.name})
    default = admin_client.get(queue, {"policy": "-"})
    page = admin_client.get(reverse("admin:approvals_approvalrequest_change", args=[by_rule.pk])).content.decode()

    assert list(filtered.context["cl"].result_list) == [by_rule]
    assert list(default.context["cl"].result_list) == [by_flag]
    assert f"Required by the policy “{rule.name}”" in page


def test_edited_arguments_are_checked_against_the_tools_parameters(admin_client):
    approval = approval_of(call("digital_twin", {"message": CONTACT}))
    edited = {"name": "Visitor", "email": "not an address", "message": "Hello"}

    page = admin_client.post(
        reverse("admin:approvals_approvalrequest_decide", args=[approval.pk]),
        {"decision": "approve", "note": "", "arguments": json.dumps(edited)},
        follow=True,
    )

    approval.refresh_from_db()
    assert approval.status == "pending"
    assert "The arguments of draft_contact_message do not fit its parameters at email:" in page.content.decode()


def test_the_empty_policy_list_says_what_a_policy_is_for(admin_client):
    empty = admin_client.get(reverse("admin:approvals_approvalpolicy_changelist")).content.decode()

    assert 'id="no-policies"' in empty
    assert "changes which of the agent's tool calls wait for staff" in empty
    assert "a tool marked <code>high_risk</code> waits for staff approval" in empty
    policy(Outcome.APPROVE, tool="get_availability")
    listed = admin_client.get(reverse("admin:approvals_approvalpolicy_changelist")).content.decode()
    assert 'id="no-policies"' not in listed


def test_the_policy_forms_value_is_one_empty_line_not_a_textarea_saying_null(admin_client):
    form = admin_client.get(reverse("admin:approvals_approvalpolicy_add")).context["adminform"].form

    html = str(form["value"])
    assert html.startswith("<input") and 'type="text"' in html
    assert "null" not in html
    saved = policy(Outcome.APPROVE, tool="get_availability")
    change = reverse("admin:approvals_approvalpolicy_change", args=[saved.pk])
    assert "null" not in str(admin_client.get(change).context["adminform"].form["value"])
