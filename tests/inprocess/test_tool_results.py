"""What a finished call returns: a graph's declared output (`StateGraph(..., output_schema=...)`),
advertised as the tool's outputSchema, or, for a graph that declares none, its whole state."""

from __future__ import annotations

import jsonschema
import pytest

from tests.inprocess.driver import ToolCall, answer, asked, call, staff_decides, tools
from tests.test_startup_checks import graphs_file

pytestmark = pytest.mark.django_db(transaction=True)


def output_schema(name: str) -> dict | None:
    return {tool["name"]: tool for tool in tools()}[name].get("outputSchema")


def test_a_graph_that_declares_an_output_schema_returns_only_that_output_and_advertises_it():
    done = call("digital_twin", {"message": "What do you know about django?"})

    assert done["isError"] is False
    assert set(done["structuredContent"]) == {"answer", "contact_drafts", "staff_decision"}
    assert "built Django services since 2012" in done["structuredContent"]["answer"]
    schema = output_schema("digital_twin")
    assert schema["type"] == "object" and set(schema["properties"]) == {"answer", "contact_drafts", "staff_decision"}
    jsonschema.validate(done["structuredContent"], schema)


def test_a_graph_without_an_output_schema_returns_its_whole_state_and_advertises_none():
    done = call("slow", {"value": 0})

    assert done["structuredContent"] == {"value": 0, "answer": "slept"}
    assert output_schema("slow") is None


def test_the_send_email_agent_returns_its_answer_and_the_emails_it_sent_as_reviewed():
    round_ = asked("send_email", {"message": "E-mail bob@example.com with the subject 'Board meeting'"})
    (key,) = round_["inputRequests"]
    edited = '{"to": "bob@example.com", "subject": "Board meeting moved"}'

    done = answer(
        "send_email",
        {"message": "E-mail bob@example.com with the subject 'Board meeting'"},
        round_,
        {key: {"action": "accept", "content": {"decision": "edit", "args": edited}}},
    )

    assert set(done["structuredContent"]) == {"answer", "sent"}
    assert done["structuredContent"]["sent"] == [{"to": "bob@example.com", "subject": "Board meeting moved"}]
    assert done["structuredContent"]["answer"].endswith("sent to bob@example.com: Board meeting moved")
    jsonschema.validate(done["structuredContent"], output_schema("send_email"))


def test_the_send_email_agent_reports_nothing_sent_when_the_reviewer_rejects_the_email():
    message = {"message": "E-mail bob@example.com"}
    round_ = asked("send_email_per_call", message)
    (key,) = round_["inputRequests"]

    done = answer(
        "send_email_per_call", message, round_, {key: {"action": "accept", "content": {"decision": "reject"}}}
    )

    assert done["structuredContent"]["sent"] == [] and set(done["structuredContent"]) == {"answer", "sent"}


def test_the_digital_twin_returns_staffs_decision_and_the_message_it_recorded_once_staff_approve():
    paused = call("digital_twin", {"message": "Please pass a message to the owner: hire me?"})

    staff_decides(paused["structuredContent"]["approval_id"], approved=True, note="Go ahead")

    result = ToolCall.objects.get(tool_name="digital_twin").final_outcome["result"]
    assert result["structuredContent"]["staff_decision"] == {"approved": True, "note": "Go ahead"}
    assert [d["input"]["message"] for d in result["structuredContent"]["contact_drafts"]] == [
        "Please pass a message to the owner: hire me?"
    ]
    assert "messages" not in result["structuredContent"]
    jsonschema.validate(result["structuredContent"], output_schema("digital_twin"))


NOTE_WITH_CONTENT = """
    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict

    class Output(TypedDict):
        title: str
        content: list[dict]

    class State(TypedDict, total=False):
        title: str
        draft: str
        content: list[dict]

    def write(state: State) -> State:
        return {"title": "Note", "draft": "working notes", "content": [{"type": "text", "text": "Hello"}]}

    graph = StateGraph(State, output_schema=Output).add_node(write).add_edge(START, "write").compile()
"""


def test_a_declared_outputs_content_blocks_are_the_results_content_and_the_rest_conforms_to_its_schema(
    tmp_path, settings
):
    settings.GRAPHS_CONFIG = graphs_file(tmp_path, {"note": "./note.py:graph"}, **{"note.py": NOTE_WITH_CONTENT})

    done = call("note")

    assert done["content"] == [{"type": "text", "text": "Hello"}]
    assert done["structuredContent"] == {"title": "Note"}
    schema = output_schema("note")
    assert "content" not in schema["properties"] and schema["required"] == ["title"]
    jsonschema.validate(done["structuredContent"], schema)
