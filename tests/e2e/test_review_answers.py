"""Review tool calls, the answers: each answer becomes the middleware's decision (approve, edit,
reject, respond; a decline or cancel), and what the model was resumed with is read from the
gateway's own rounds."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from mcp_gateway.models import ToolCall
from tests.clients import CANCEL, DECLINE, Raw, elicit_result_accepting
from tests.e2e.review import (
    BOTH_MODES,
    DOCUMENTED_QUESTION,
    EMAIL,
    EMAIL_ARGS,
    KEY,
    answer,
    ask,
    decisions_received,
    final_text,
    only_key,
    review,
)
from tests.graphs_review import Proposes


@BOTH_MODES
def test_an_approval_runs_the_tool(mcp_url, token, tool):
    result, asked = review(mcp_url, token, tool, elicit_result_accepting(decision="approve"))
    assert len(asked) == 1
    assert decisions_received() == [{"type": "approve"}]
    assert final_text(result) == "Done: sent to ada@example.com: Launch"
    assert result.structured_content["sent"] == [{"to": "ada@example.com", "subject": "Launch"}]


@BOTH_MODES
def test_an_edit_runs_the_tool_with_the_edited_arguments(mcp_url, token, tool):
    edited = '{"to": "bob@example.com", "subject": "Launch, take two"}'
    result, _ = review(mcp_url, token, tool, elicit_result_accepting(decision="edit", args=edited))
    assert decisions_received() == [
        {
            "type": "edit",
            "edited_action": {"name": "send_email", "args": {"to": "bob@example.com", "subject": "Launch, take two"}},
        }
    ]
    text = final_text(result)
    assert "sent to bob@example.com: Launch, take two" in text
    assert "sent to ada@example.com" not in text


@BOTH_MODES
def test_an_edit_that_leaves_the_prefilled_arguments_out_runs_the_model_arguments(mcp_url, token, tool):
    result, _ = review(mcp_url, token, tool, elicit_result_accepting(decision="edit"))
    assert decisions_received() == [{"type": "edit", "edited_action": {"name": "send_email", "args": EMAIL_ARGS}}]
    assert "sent to ada@example.com: Launch" in final_text(result)


@BOTH_MODES
def test_a_rejection_gives_the_model_the_reason_and_the_tool_does_not_run(mcp_url, token, tool):
    result, _ = review(mcp_url, token, tool, elicit_result_accepting(decision="reject", message="Not before Monday"))
    assert decisions_received() == [{"type": "reject", "message": "Not before Monday"}]
    text = final_text(result)
    assert text == "Done: User rejected the tool call for `send_email` with reason: Not before Monday"
    assert result.structured_content["sent"] == []


@BOTH_MODES
def test_a_rejection_with_a_blank_message_leaves_the_message_out(mcp_url, token, tool):
    result, _ = review(mcp_url, token, tool, elicit_result_accepting(decision="reject", message="   "))
    assert decisions_received() == [{"type": "reject"}]
    text = final_text(result)
    assert "The tool was not executed" in text
    assert "sent to" not in text


@BOTH_MODES
def test_a_response_is_given_to_the_model_in_place_of_the_tool(mcp_url, token, tool):
    result, _ = review(
        mcp_url, token, tool, elicit_result_accepting(decision="respond", message="Ada is on holiday; not sent.")
    )
    assert decisions_received() == [{"type": "respond", "message": "Ada is on holiday; not sent."}]
    assert final_text(result) == "Done: Ada is on holiday; not sent."
    assert result.structured_content["sent"] == []


@BOTH_MODES
def test_a_decline_is_a_rejection_when_the_call_allows_reject(mcp_url, token, tool):
    result, _ = review(mcp_url, token, tool, DECLINE)
    assert decisions_received() == [{"type": "reject"}]
    text = final_text(result)
    assert "User rejected the tool call for `send_email`" in text
    assert "sent to" not in text


@pytest.mark.parametrize("tool", ["review_approve_only", "review_approve_only_per_call"])
def test_a_decline_ends_the_call_with_an_error_result_when_the_call_does_not_allow_reject(mcp_url, token, tool):
    result, _ = review(mcp_url, token, tool, DECLINE, {"messages": "go"}, about="publish")
    assert result.is_error
    assert result.content[0].text == "The request for input was declined."
    assert decisions_received() == []


@BOTH_MODES
def test_a_cancel_ends_the_call_with_an_error_result(mcp_url, token, tool):
    result, _ = review(mcp_url, token, tool, CANCEL)
    assert result.is_error
    assert result.content[0].text == "The request for input was cancelled."
    assert decisions_received() == []


@BOTH_MODES
def test_in_batched_and_per_call_mode_an_edit_keeps_the_reviewed_tool(mcp_url, token, tool):
    # The form has no field for the tool: whatever else the answer carries, the edit names it.
    raw = Raw(mcp_url, token)
    asked = ask(raw, tool)
    edit = {
        "action": "accept",
        "content": {"decision": "edit", "args": '{"to": "bob@example.com", "subject": "Hi"}', "name": "another_tool"},
    }
    response = answer(raw, tool, asked, {only_key(asked): edit})
    assert response.status_code == 200
    assert decisions_received()[0]["edited_action"]["name"] == "send_email"


def test_an_agent_using_mcp_adapter_answers_the_review_by_key_and_the_replayed_call_finishes(mcp_url, token):
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport
    from langchain.agents import create_agent
    from langchain.mcp import MCPAdapter
    from langchain_core.messages import ToolMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    async def go():
        transport = StreamableHttpTransport(mcp_url, headers={"Authorization": f"Bearer {token}"})
        tools = await MCPAdapter(Client(transport, timeout=120)).list_tools()
        agent = create_agent(Proposes(tool_name="send_email", args=EMAIL), tools, checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        out = await agent.ainvoke({"messages": [{"role": "user", "content": "email Ada"}]}, config, version="v2")
        (paused,) = out.interrupts
        (question,) = paused.value["requests"]
        answers = {question["key"]: {"action": "accept", "content": {"decision": "approve"}}}
        # The adapter calls the tool again from the start and replays the stored answer by key.
        out = await agent.ainvoke(Command(resume={paused.id: {"responses": answers}}), config, version="v2")
        return paused.value, out

    relayed, out = asyncio.run(go())
    assert relayed["type"] == "mcp_elicitation" and relayed["tool_name"] == "send_email"
    (question,) = relayed["requests"]
    assert KEY.fullmatch(question["key"])
    assert question["message"] == DOCUMENTED_QUESTION["params"]["message"]
    assert question["requested_schema"] == DOCUMENTED_QUESTION["params"]["requestedSchema"]
    assert not out.interrupts
    (tool_message,) = [m for m in out.value["messages"] if isinstance(m, ToolMessage)]
    assert tool_message.status == "success"
    assert "Done: sent to ada@example.com: Launch" in tool_message.text
    assert "Done: sent to ada@example.com: Launch" in out.value["messages"][-1].text
    assert decisions_received() == [{"type": "approve"}]
    # The first attempt stays paused until it expires; the rerun that got the answer finished.
    assert sorted(ToolCall.objects.values_list("status", flat=True)) == [
        ToolCall.Status.FINISHED,
        ToolCall.Status.PAUSED,
    ]
