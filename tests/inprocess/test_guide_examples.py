"""Every example of docs/writing-agents.md, registered by the guide's own graphs file
(example_agents/guide/langgraph.json) and driven as an MCP client would: what the client is asked, and
what the agent made of the answer. Driven in-process."""

from __future__ import annotations

import base64
import json
import re
import struct
from pathlib import Path

import pytest

from tests.inprocess.driver import answer, asked, call, refused_answer, staff_decides, tools
from tests.rounds import input_response_accepting, only_key

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "example_agents" / "guide"
GUIDE = ROOT / "docs" / "writing-agents.md"


@pytest.fixture(autouse=True)
def the_guides_graphs(settings):
    settings.GRAPHS_CONFIG = EXAMPLES / "langgraph.json"


def shown_in_the_guide() -> dict[str, str]:
    """The guide's code blocks that show an example file: `<!-- example: NAME -->` on the line before."""
    blocks = re.findall(r"<!-- example: (\S+) -->\n```\w*\n(.*?)```", GUIDE.read_text(), re.S)
    return dict(blocks)


def test_the_guide_shows_every_example_file_as_it_is():
    shown = shown_in_the_guide()

    # The guide's own files, and the served agents its graphs file borrows (named relative to it).
    files = {path.name for path in EXAMPLES.iterdir() if path.suffix in (".py", ".json")}
    registered = json.loads((EXAMPLES / "langgraph.json").read_text())["graphs"].values()
    files |= {target.split(":")[0].removeprefix("./") for target in registered if isinstance(target, str)}
    assert set(shown) == files
    for name, text in shown.items():
        assert text == (EXAMPLES / name).read_text(), name


def test_the_guides_graphs_file_registers_every_example_with_its_input():
    schemas = {tool["name"]: tool["inputSchema"] for tool in tools()}

    assert sorted(schemas) == sorted(
        [
            "booking",
            "deployment",
            "contact",
            "shipping",
            "feedback",
            "greeter",
            "calendar_link",
            "emailer",
            "refund",
            "payout",
            "chart",
            "quote",
        ]
    )
    assert schemas["booking"]["required"] == ["party_size"]
    assert schemas["refund"]["required"] == ["order"]
    assert schemas["deployment"]["properties"] == {} and schemas["greeter"]["properties"] == {}
    assert schemas["emailer"]["properties"]["messages"]["type"] == "string"


def test_a_declared_output_schema_is_the_tools_result_and_its_advertised_output_schema():
    done = call("quote", {"nights": 3})

    assert done["structuredContent"] == {"price": "360 EUR for 3 nights"}
    (quote,) = [tool for tool in tools() if tool["name"] == "quote"]
    assert quote["outputSchema"]["properties"] == {"price": {"title": "Price", "type": "string"}}
    assert quote["outputSchema"]["required"] == ["price"]
    assert "outputSchema" not in next(tool for tool in tools() if tool["name"] == "booking")


def resumed(tool: str, arguments: dict, content: dict | None = None, **answered) -> dict:
    first = asked(tool, arguments)
    result = answer(tool, arguments, first, {only_key(first): input_response_accepting(**(content or answered))})
    assert result["isError"] is False, result
    return result["structuredContent"]


def test_a_string_interrupt_is_asked_as_one_text_field_and_returns_the_string():
    first = asked("booking", {"party_size": 2})
    (question,) = first["inputRequests"].values()
    assert question["params"]["message"] == "Whose name is the booking under?"
    assert question["params"]["requestedSchema"]["properties"] == {"response": {"type": "string"}}

    assert resumed("booking", {"party_size": 2}, response="Ada")["booking"] == "A table for 2, under Ada"


@pytest.mark.parametrize(
    ("tool", "answered", "outcome"),
    [
        ("deployment", {"region": "eu-west-1", "replicas": 3}, {"plan": "3 replica(s) in eu-west-1"}),
        (
            "contact",
            {"email": "ada@example.com", "newsletter": True},
            {"contact": "ada@example.com, with the newsletter"},
        ),
        ("contact", {"email": "ada@example.com"}, {"contact": "ada@example.com, without the newsletter"}),
        ("shipping", {"address": "1 Main St", "express": True}, {"shipping": "Express to 1 Main St"}),
        ("feedback", {"rating": 5, "comment": "Lovely"}, {"feedback": "5/5 Lovely"}),
    ],
)
def test_a_response_schema_is_asked_as_its_form_and_returns_an_answer_of_its_type(tool, answered, outcome):
    assert resumed(tool, {}, answered) == outcome


def test_an_answer_outside_the_response_schema_is_refused_and_the_question_stays_open():
    first = asked("deployment")

    error = refused_answer(
        "deployment", {}, first, {only_key(first): input_response_accepting(region="eu-west-1", replicas=20)}
    )

    assert error["code"] == -32602
    assert resumed("deployment", {}, region="us-east-1", replicas=1) == {"plan": "1 replica(s) in us-east-1"}


def test_a_relayed_form_is_asked_under_its_own_key_and_returns_the_responses():
    first = asked("greeter")
    assert list(first["inputRequests"]) == ["user_name"]

    assert resumed("greeter", {}, name="Ada") == {"greeting": "Hello, Ada!"}


def test_a_url_hand_off_sends_the_person_to_the_page_and_an_accept_says_they_finished():
    first = asked("calendar_link")
    assert first["inputRequests"]["sign_in"]["params"] == {
        "message": "Sign in to your calendar to continue.",
        "mode": "url",
        "url": "https://calendar.example.com/oauth/start",
    }

    done = answer("calendar_link", {}, first, {"sign_in": {"action": "accept"}})
    assert done["structuredContent"] == {"calendar": "connected"}


@pytest.mark.parametrize(
    ("decision", "said"),
    [
        ({"decision": "approve"}, "Done: sent to ada@example.com: Launch"),
        (
            {"decision": "edit", "args": '{"to": "bob@example.com", "subject": "Launch"}'},
            "sent to bob@example.com: Launch",
        ),
        ({"decision": "reject", "message": "Not today"}, "Not today"),
    ],
)
def test_a_reviewed_tool_call_is_one_form_and_the_middleware_gets_the_decision(decision, said):
    arguments = {"messages": "Email Ada about the launch"}
    first = asked("emailer", arguments)
    (question,) = first["inputRequests"].values()
    assert question["params"]["message"].startswith("Tool execution requires approval\n\nTool: send_email")

    result = answer("emailer", arguments, first, {only_key(first): input_response_accepting(**decision)})

    assert said in result["structuredContent"]["messages"][-1]["content"]


@pytest.mark.parametrize(
    ("approved", "note", "answered"),
    [(True, None, "Refunded order A-1001."), (False, "Past 30 days", "Not refunded: Past 30 days.")],
)
def test_a_staff_approval_ends_the_call_at_once_and_resumes_with_the_staff_decision(approved, note, answered):
    ended = call("refund", {"order": "A-1001"})

    assert ended["isError"] is False
    assert ended["structuredContent"]["status"] == "pending"
    assert staff_decides(ended["structuredContent"]["approval_id"], approved=approved, note=note) == answered


def test_a_graph_that_evaluates_policies_waits_for_staff_by_default_and_runs_what_they_approved():
    ended = call("payout", {"to": "Acme", "amount": 120})

    assert staff_decides(ended["structuredContent"]["approval_id"], approved=True) == "Paid 120 to Acme."


@pytest.mark.django_db(transaction=True)  # committed, for the graph's thread to read
@pytest.mark.parametrize(
    ("outcome", "answered"),
    [("run", "Paid 120 to Acme."), ("refuse", "Not paid: Not allowed by the policy “Payouts”.")],
)
def test_a_graph_that_evaluates_policies_runs_or_refuses_as_a_matching_policy_says(outcome, answered):
    from approvals.models import ApprovalPolicy

    ApprovalPolicy.objects.create(
        name="Payouts", graph_pattern="payout", tool_pattern="pay", argument_path="/amount", operator="greater",
        value=100, outcome=outcome,
    )  # fmt: skip

    assert call("payout", {"to": "Acme", "amount": 120})["structuredContent"]["answer"] == answered


def test_a_graphs_content_blocks_are_the_results_content_and_the_rest_of_its_state_is_structured_content():
    result = call("chart", {"values": [3, 1, 2]})

    assert result["isError"] is False
    text, image, resource = result["content"]
    assert text == {"type": "text", "text": "A bar chart of 3 values; the largest is 3."}
    assert image["type"] == "image" and image["mimeType"] == "image/png"
    png = base64.b64decode(image["data"])
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and struct.unpack(">II", png[16:24]) == (36, 100)
    assert resource == {
        "type": "resource",
        "resource": {"uri": "chart://values.csv", "mimeType": "text/csv", "text": "value\n3\n1\n2\n"},
    }
    assert result["structuredContent"] == {"values": [3, 1, 2], "total": 6}
    # The guide shows this result.
    assert image["data"].startswith("iVBORw0KGgoAAAANSUhEUgAAACQAAABk")


def test_the_chart_takes_only_values_it_can_draw():
    result = call("chart", {"values": []})

    assert result["isError"] is True and result["content"][0]["text"].startswith("Invalid arguments for chart")
