"""Ask a text question and Ask for typed input, end to end: the example agents choose_region and
plan_deployment through the SDK client. The rules of both are checked in tests/inprocess/."""

from __future__ import annotations

from tests.asking import DECLINED, TEXT_KEY
from tests.clients import DECLINE, by_message, elicit_result_accepting, run, sdk_client
from tests.rounds import (
    only_key,
)


def test_the_choose_region_agent_through_the_sdk_client(mcp_url, token):
    callback = by_message({"region": elicit_result_accepting(response="eu-west-1")})

    async def go():
        async with sdk_client(mcp_url, token, callback) as client:
            return await client.call_tool("choose_region", {})

    assert run(go()).structured_content == {"region": "eu-west-1"}
    assert TEXT_KEY.fullmatch(callback.asked[0][0])


def test_a_decline_answer_to_a_text_question_through_the_sdk_client_ends_the_call(mcp_url, token):
    async def go():
        async with sdk_client(mcp_url, token, by_message({"region": DECLINE})) as client:
            return await client.call_tool("choose_region", {})

    result = run(go())
    assert result.is_error and result.content[0].text == DECLINED


def test_the_plan_deployment_agent_through_the_sdk_client_answers_again_after_an_invalid_answer(mcp_url, token):
    from mcp.shared.exceptions import MCPError

    async def go():
        async with sdk_client(mcp_url, token, by_message({})) as client:
            session = client.session
            first = await session.call_tool("plan_deployment", {}, allow_input_required=True)
            key = only_key({"inputRequests": first.input_requests})
            try:
                await session.call_tool(
                    "plan_deployment",
                    {},
                    input_responses={key: elicit_result_accepting(region="eu-west-1", replicas=20)},
                    request_state=first.request_state,
                    allow_input_required=True,
                )
            except MCPError as exc:
                error = exc.error
            else:
                raise AssertionError("replicas 20 was accepted")
            done = await session.call_tool(
                "plan_deployment",
                {},
                input_responses={key: elicit_result_accepting(region="eu-west-1", replicas=3)},
                request_state=first.request_state,
                allow_input_required=True,
            )
            return error, done

    error, done = run(go())
    assert (error.code, error.message) == (-32602, "Form content does not match requestedSchema")
    assert done.structured_content == {"region": "eu-west-1", "replicas": 3}
