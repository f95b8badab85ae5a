"""Relay elicitation requests: an agent's own requests, as a list or a key map, reach the client
under its keys, checked against the rules for forms and URLs. Driven in-process."""

from __future__ import annotations

import json
import re

import pytest
from pydantic import TypeAdapter

from tests.asking import OK_FORM, form_request, unaskable, url_request
from tests.inprocess.driver import answer, asked, call
from tests.inprocess.test_typed_input import Paint
from tests.rounds import input_response_accepting


def test_relayed_requests_can_be_a_list_with_requested_schema():
    requests = [{"key": "a", "message": "A?", "mode": "form", "requested_schema": OK_FORM}]
    first = asked("relay_from_input", {"value": requests})

    assert first["inputRequests"] == {"a": form_request("A?", OK_FORM)}


def test_a_relayed_list_may_also_name_the_schema_with_the_mcp_field_name():
    requests = [{"key": "a", "message": "A?", "mode": "form", "requestedSchema": OK_FORM}]
    first = asked("relay_from_input", {"value": requests})

    assert first["inputRequests"] == {"a": form_request("A?", OK_FORM)}


def test_relayed_requests_can_be_a_key_map_with_mcp_field_names_where_no_mode_means_form():
    first = asked("relay_map")

    assert first["inputRequests"] == {"confirm": form_request("Relayed confirm?", OK_FORM)}
    result = answer("relay_map", {}, first, {"confirm": input_response_accepting(ok=True)})
    assert result["structuredContent"] == {"answers": [{"confirm": {"action": "accept", "content": {"ok": True}}}]}


def test_a_key_map_can_relay_a_url_request():
    requests = {"login": {"message": "Log in.", "mode": "url", "url": "https://example.com/login"}}
    first = asked("relay_from_input", {"value": requests})

    assert first["inputRequests"] == {"login": url_request("Log in.", "https://example.com/login")}


def test_other_keys_in_the_interrupt_value_are_ignored():
    # relay_from_input adds "tool_name", as MCPAdapter does.
    requests = [{"key": "a", "message": "A?", "mode": "form", "requested_schema": OK_FORM}]
    first = asked("relay_from_input", {"value": requests})

    assert first["inputRequests"] == {"a": form_request("A?", OK_FORM)}


def test_the_agent_resumes_with_one_answer_per_request_under_its_own_keys():
    requests = [
        {"key": "a", "message": "A?", "mode": "form", "requested_schema": OK_FORM},
        {"key": "b", "message": "B?", "mode": "url", "url": "https://example.com/b"},
        {"key": "c", "message": "C?", "mode": "form", "requested_schema": OK_FORM},
        {"key": "d", "message": "D?", "mode": "form", "requested_schema": OK_FORM},
    ]
    first = asked("relay_from_input", {"value": requests})
    assert set(first["inputRequests"]) == {"a", "b", "c", "d"}

    responses = {
        "a": input_response_accepting(ok=True),
        "b": {"action": "accept"},
        "c": {"action": "decline", "content": {"ok": True}},
        "d": {"action": "cancel"},
    }
    result = answer("relay_from_input", {"value": requests}, first, responses)

    assert result["structuredContent"]["answers"] == [
        {
            "responses": {
                "a": {"action": "accept", "content": {"ok": True}},
                "b": {"action": "accept"},
                "c": {"action": "decline"},
                "d": {"action": "cancel"},
            }
        }
    ]


@pytest.mark.parametrize(
    "request_",
    [
        {
            "key": "a",
            "message": "A?",
            "mode": "form",
            "requested_schema": {"type": "object", "properties": {"password": {"type": "string"}}},
        },
        {
            "key": "a",
            "message": "A?",
            "mode": "form",
            "requested_schema": {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[0-9]+$"}}},
        },
        {
            "key": "a",
            "message": "A?",
            "mode": "form",
            "requested_schema": {"type": "object", "properties": {"nested": {"type": "object"}}},
        },
        {"key": "a", "message": "A?", "mode": "form", "requested_schema": {"type": "object", "properties": {}}},
        {"key": "a", "message": "A?", "mode": "url", "url": "http://example.com/login"},
        {"key": "a", "message": "A?", "mode": "url", "url": "https://user:pw@example.com/login"},
        # key: the answer comes back under it, so a request without one could never be answered.
        {"message": "A?", "mode": "form", "requested_schema": OK_FORM},
        {"key": 1, "message": "A?", "mode": "form", "requested_schema": OK_FORM},
        # mode: form or url; message: the question to show the user.
        {"key": "a", "message": "A?", "mode": "sampling", "requested_schema": OK_FORM},
        {"key": "a", "mode": "form", "requested_schema": OK_FORM},
    ],
    ids=[
        "password field",
        "pattern",
        "nested object",
        "no fields",
        "http url",
        "credentials in url",
        "no key",
        "key not a string",
        "mode neither form nor url",
        "no message",
    ],
)
def test_relayed_requests_are_checked_against_the_rules_for_forms_and_urls(request_):
    result = call("relay_from_input", {"value": [request_]})

    assert unaskable(result)


@pytest.mark.parametrize("graph", ["relay_bad_url", "relay_url_with_password"])
def test_the_relay_test_graphs_with_bad_urls_are_unaskable(graph):
    assert unaskable(call(graph))


def test_with_several_interrupts_pending_keys_are_prefixed_with_a_digest_and_the_agent_gets_its_own_keys():
    first = asked("relay_twice")

    keys = sorted(first["inputRequests"])
    assert len(keys) == 2
    digests = {re.fullmatch(r"([0-9a-f]{16})\.([12])/confirm", k).group(1) for k in keys}
    assert len(digests) == 1  # the same interrupt value, asked as two separate questions
    assert [k.rsplit(".", 1)[1] for k in keys] == ["1/confirm", "2/confirm"]
    for key in keys:
        assert first["inputRequests"][key] == form_request("Relayed confirm?", OK_FORM)

    responses = {keys[0]: input_response_accepting(ok=True), keys[1]: input_response_accepting(ok=False)}
    result = answer("relay_twice", {}, first, responses)
    answers = sorted(result["structuredContent"]["answers"], key=json.dumps)
    assert answers == [
        {"confirm": {"action": "accept", "content": {"ok": False}}},
        {"confirm": {"action": "accept", "content": {"ok": True}}},
    ]


def test_with_identical_interrupts_pending_each_key_reaches_the_same_node_on_every_call():
    """docs/rules.md, "Answer from a LangChain agent": the adapter calls the tool again from the
    start, on a new thread, and answers each question with the answer stored for its key. Interrupt
    ids are new on every thread; with them as the tie-breaker between identical questions, `.1`
    reached either node."""
    outcomes = []
    for _ in range(6):  # a coin toss per call before: all six alike by chance 1 time in 32
        first = asked("relay_twice_tagged")
        one, two = sorted(first["inputRequests"])
        result = answer(
            "relay_twice_tagged",
            {},
            first,
            {one: input_response_accepting(ok=True), two: input_response_accepting(ok=False)},
        )
        outcomes.append(sorted(json.dumps(a, sort_keys=True) for a in result["structuredContent"]["answers"]))

    assert all(outcome == outcomes[0] for outcome in outcomes), outcomes


def test_with_one_interrupt_pending_the_client_sees_the_agents_own_keys():
    requests = {"my-key": {"message": "Mine?", "requestedSchema": OK_FORM}}
    first = asked("relay_from_input", {"value": requests})

    assert list(first["inputRequests"]) == ["my-key"]


def test_a_relayed_form_reaches_the_client_as_a_valid_mcp_form():
    from mcp_types._v2026_07_28 import PrimitiveSchemaDefinition

    schema = TypeAdapter(Paint).json_schema()  # $defs, a $ref, an optional field, a root title
    requests = {"paint": {"message": "Which paint?", "requestedSchema": schema}}
    first = asked("relay_from_input", {"value": requests})

    sent = first["inputRequests"]["paint"]["params"]["requestedSchema"]
    assert sent["type"] == "object" and set(sent["properties"]) == {"colour", "litres"}
    for field in sent["properties"].values():
        TypeAdapter(PrimitiveSchemaDefinition).validate_python(field)
        assert not {"$ref", "anyOf"} & set(field)
