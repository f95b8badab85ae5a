"""Policies as data, through real MCP calls: a rule staff saved decides, in the Celery worker's
run of digital_twin, whether a call runs, waits for one or two staff approvals, or is refused; the
staff REST API approves with edited arguments, checked against the tool's parameters."""

from __future__ import annotations

import pytest

from tests.clients import Raw
from tests.e2e.approvals import DRAFT, HIRE_ME, AdminAPI, pause, tool_messages
from tests.e2e.test_approvals_staff_tokens import staff_member, token_for


def rule(outcome: str, tool: str = "draft_contact_message"):
    from approvals.models import ApprovalPolicy

    policy = ApprovalPolicy(name=f"{outcome} for {tool}", graph_pattern="digital_*", tool_pattern=tool, outcome=outcome)
    policy.full_clean()
    policy.save()
    return policy


def finished(mcp_url: str, token: str, message: str = HIRE_ME) -> dict:
    response = Raw(mcp_url, token).call("digital_twin", {"message": message})
    assert response.status_code == 200, response.text
    return response.json()["result"]


def approval_of(result: dict):
    from approvals.models import ApprovalRequest

    return ApprovalRequest.objects.get(pk=result["structuredContent"]["approval_id"])


def test_a_run_without_approval_policy_runs_a_high_risk_call_at_once_over_mcp(mcp_url, token):
    from approvals.models import ApprovalRequest

    rule("run")

    result = finished(mcp_url, token)

    assert result["structuredContent"]["answer"].startswith("Your message was recorded")
    assert not ApprovalRequest.objects.exists()


def test_a_staff_approval_policy_pauses_a_call_over_mcp_and_the_approval_names_it(mcp_url, token, admin_api):
    policy = rule("approve", tool="get_availability")

    approval = approval_of(pause(mcp_url, token, "When are you available?"))

    assert (approval.tool_names, approval.policy_name) == ("get_availability", policy.name)
    body = admin_api.decide(str(approval.pk), approved=True).json()
    assert body["status"] == "approved" and "available_from" in body["answer"]


def test_a_refuse_policy_declines_the_call_over_mcp_and_the_model_hears_the_rule(mcp_url, token, model_requests):
    from approvals.models import ApprovalRequest, ContactMessage

    policy = rule("refuse")

    result = finished(mcp_url, token)

    assert result["structuredContent"]["answer"].startswith("Sorry, the owner declined")
    (said,) = tool_messages(model_requests()[-1])
    assert f"Not allowed by the policy “{policy.name}”" in said
    assert not ApprovalRequest.objects.exists() and not ContactMessage.objects.exists()


def test_a_two_approvals_policy_runs_the_call_over_mcp_only_after_two_different_staff_approve(
    live_server, mcp_url, token, settings
):
    from approvals.models import ContactMessage

    settings.ADMIN_TOKEN = ""
    rule("two_approvals")
    approval = approval_of(pause(mcp_url, token))
    grace = AdminAPI(live_server.url, token_for(staff_member("grace", "view_approvalrequest", "decide_approval")))
    alan = AdminAPI(live_server.url, token_for(staff_member("alan", "view_approvalrequest", "decide_approval")))

    first = grace.decide(str(approval.pk), approved=True)
    again = grace.decide(str(approval.pk), approved=True)
    listed = grace.pending().json()
    second = alan.decide(str(approval.pk), approved=True)

    assert first.status_code == 202 and first.json()["progress"] == "1 of 2"
    assert again.status_code == 403
    assert [(a["approvals_given"], a["approvals_required"], a["required_by"]) for a in listed] == [
        (1, 2, "two_approvals for draft_contact_message")
    ]
    assert second.status_code == 200 and second.json()["answer"].startswith("Your message was recorded")
    assert ContactMessage.objects.get(approval=approval).input == DRAFT


# --- the REST API edits arguments ----------------------------------------------------------------


def test_the_api_approves_with_edited_arguments_which_run_and_are_archived_beside_the_original(
    mcp_url, token, admin_api
):
    from approvals.models import ContactMessage

    approval = approval_of(pause(mcp_url, token))
    edited = {**DRAFT, "message": "Edited through the API."}

    response = admin_api.decide(str(approval.pk), approved=True, arguments=[edited])

    assert response.status_code == 200 and "Edited through the API." in response.json()["answer"]
    assert ContactMessage.objects.get(approval=approval).input == edited
    read = admin_api.http.get(f"{admin_api.base_url}/{approval.pk}").json()
    assert read["tool_calls"][0]["input"] == DRAFT
    assert read["edited_tool_calls"] == [{"name": "draft_contact_message", "input": edited}]


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ([{**DRAFT, "email": "not an address"}], "do not fit its parameters at email: 'not an address' is not a"),
        ([{"name": "Visitor"}], "do not fit its parameters: 'email' is a required property"),
        ([DRAFT, DRAFT], "Give arguments for each of the 1 tool call(s), in order."),
        (["a string"], "Expected a dictionary"),
    ],
)
def test_the_api_refuses_edited_arguments_that_do_not_fit_the_tools_parameters_with_400(
    mcp_url, token, admin_api, arguments, error
):
    approval = approval_of(pause(mcp_url, token))

    response = admin_api.decide(str(approval.pk), approved=True, arguments=arguments)

    assert response.status_code == 400
    assert error in str(response.json()["arguments"]), response.json()
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_the_openapi_schema_documents_edited_arguments(live_server):
    import httpx

    schema = httpx.get(f"{live_server.url}/api/schema/", params={"format": "json"}).json()

    decision = schema["components"]["schemas"]["Decision"]["properties"]
    assert decision["arguments"]["type"] == "array" and decision["arguments"]["items"]["type"] == "object"
    assert "parameters schema" in decision["arguments"]["description"]
