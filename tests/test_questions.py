"""Questions: the product document's sections "Ask a text question", "Ask for typed input", "Relay
elicitation requests" and "Send the user to a URL", one test per rule, with the example agents
choose_region, plan_deployment, greeter and connect_calendar, through the HTTP endpoint against the
real database, Redis and Celery worker."""

from __future__ import annotations

import enum
import json
import re
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.utils import timezone
from pydantic import BaseModel, Field, TypeAdapter

from tests.clients import ACCEPT, CANCEL, DECLINE, Raw, by_message, elicit_result_accepting, run, sdk_client
from tests.rounds import (
    UNASKABLE,
    agent_answering,
    answer,
    asked,
    call_of,
    drive,
    error_of,
    form_only_session,
    input_response_accepting,
    only_key,
    result_of,
    text_of,
)

TEXT_KEY = re.compile(r"answer-[0-9a-f]{16}")
TEXT_FORM = {"properties": {"response": {"type": "string"}}, "required": ["response"], "type": "object"}
OK_FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
DECLINED = "The request for input was declined."
CANCELLED = "The request for input was cancelled."


def form_request(message: str, schema: dict) -> dict:
    return {"method": "elicitation/create", "params": {"message": message, "mode": "form", "requestedSchema": schema}}


def url_request(message: str, url: str) -> dict:
    return {"method": "elicitation/create", "params": {"message": message, "mode": "url", "url": url}}


def unaskable(result: dict) -> bool:
    return result.get("isError") is True and text_of(result).startswith(UNASKABLE)


# --- Ask a text question ----------------------------------------------------------------------------


def test_a_string_interrupt_is_asked_as_a_form_with_one_text_field(mcp_url, token):
    first = asked(Raw(mcp_url, token), "choose_region")

    key = only_key(first)
    assert TEXT_KEY.fullmatch(key)
    assert first["inputRequests"][key] == form_request("Which region should the service deploy to?", TEXT_FORM)


def test_the_choose_region_agent_resumes_with_the_string_answered_in_the_response_field(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = asked(raw, "choose_region")

    result = result_of(
        answer(raw, "choose_region", {}, first, {only_key(first): input_response_accepting(response="eu-west-1")})
    )

    assert result["isError"] is False
    assert text_of(result) == '{"region":"eu-west-1"}'


def test_the_choose_region_agent_through_the_sdk_client(mcp_url, token):
    callback = by_message({"region": elicit_result_accepting(response="eu-west-1")})

    async def go():
        async with sdk_client(mcp_url, token, callback) as client:
            return await client.call_tool("choose_region", {})

    assert run(go()).structured_content == {"region": "eu-west-1"}
    assert TEXT_KEY.fullmatch(callback.asked[0][0])


@pytest.mark.parametrize("action, text", [("decline", DECLINED), ("cancel", CANCELLED)])
def test_a_decline_or_cancel_answer_to_a_text_question_ends_the_call_with_an_error_result(mcp_url, token, action, text):
    raw = Raw(mcp_url, token)
    first = asked(raw, "choose_region")

    result = result_of(answer(raw, "choose_region", {}, first, {only_key(first): {"action": action}}))

    assert result["isError"] is True
    assert [c["text"] for c in result["content"]] == [text]
    assert result_of(answer(raw, "choose_region", {}, first, {only_key(first): {"action": action}})) == result


def test_a_decline_answer_to_a_text_question_through_the_sdk_client_ends_the_call(mcp_url, token):
    async def go():
        async with sdk_client(mcp_url, token, by_message({"region": DECLINE})) as client:
            return await client.call_tool("choose_region", {})

    result = run(go())
    assert result.is_error and result.content[0].text == DECLINED


def test_the_key_of_a_text_question_is_derived_from_the_question_and_stays_the_same_when_called_again(
    mcp_url, token, make_token
):
    raw = Raw(mcp_url, token)

    keys = [only_key(asked(raw, "choose_region")) for _ in range(2)]
    survey_keys = set(asked(raw, "survey")["inputRequests"])
    keys.append(only_key(asked(Raw(mcp_url, make_token("bob")), "choose_region")))

    assert keys[0] == keys[1] == keys[2]
    assert len(survey_keys) == 2 and keys[0] not in survey_keys
    assert all(TEXT_KEY.fullmatch(k) for k in survey_keys)


def test_one_answer_resumes_two_pending_interrupts_that_ask_the_same_text(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = asked(raw, "same_text_twice")

    key = only_key(first)
    assert first["inputRequests"][key] == form_request("Same question?", TEXT_FORM)
    result = result_of(answer(raw, "same_text_twice", {}, first, {key: input_response_accepting(response="yes")}))
    assert result["structuredContent"] == {"answers": ["yes", "yes"]}


def test_several_pending_interrupts_are_asked_in_one_round_of_at_most_100_questions(mcp_url, token):
    # A round is answered in one request, and a request carries at most 100 answers: a round of
    # 101 questions could never be answered, so it is not asked.
    raw = Raw(mcp_url, token)
    first = asked(raw, "fan_out_questions", {"value": 100})

    assert len(first["inputRequests"]) == 100
    responses = {key: input_response_accepting(response="yes") for key in first["inputRequests"]}
    result = result_of(answer(raw, "fan_out_questions", {"value": 100}, first, responses))
    assert result["structuredContent"]["answers"] == ["yes"] * 100

    too_many = result_of(raw.call("fan_out_questions", {"value": 101}))
    assert unaskable(too_many)
    assert "more than 100 questions" in text_of(too_many)


# --- Ask for typed input ----------------------------------------------------------------------------

DEPLOYMENT_FORM = {
    "properties": {
        "region": {"enum": ["us-east-1", "eu-west-1"], "title": "Region", "type": "string"},
        "replicas": {"maximum": 10, "minimum": 1, "title": "Replicas", "type": "integer"},
    },
    "required": ["region", "replicas"],
    "type": "object",
}


def test_the_plan_deployment_agent_asks_its_pydantic_schema_as_a_form(mcp_url, token):
    first = asked(Raw(mcp_url, token), "plan_deployment")

    key = only_key(first)
    assert TEXT_KEY.fullmatch(key)
    assert first["inputRequests"][key] == form_request("Where should the service deploy?", DEPLOYMENT_FORM)


def test_an_answer_outside_the_schema_fails_with_32602_and_the_client_can_answer_again(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = asked(raw, "plan_deployment")
    key = only_key(first)

    response = answer(
        raw, "plan_deployment", {}, first, {key: input_response_accepting(region="eu-west-1", replicas=20)}
    )

    error = error_of(response)
    assert error["code"] == -32602
    assert error["message"] == "Form content does not match requestedSchema"
    result = result_of(
        answer(raw, "plan_deployment", {}, first, {key: input_response_accepting(region="eu-west-1", replicas=3)})
    )
    # interrupt() returned a Deployment instance: the agent read its attributes.
    assert text_of(result) == '{"region":"eu-west-1","replicas":3}'


@pytest.mark.parametrize(
    "content",
    [
        {"region": "mars-1", "replicas": 3},
        {"region": "eu-west-1"},
        {"region": "eu-west-1", "replicas": "three"},
        {"region": "eu-west-1", "replicas": 0},
    ],
    ids=["not a choice", "required missing", "not an integer", "below minimum"],
)
def test_every_answer_is_checked_against_the_form(mcp_url, token, content):
    raw = Raw(mcp_url, token)
    first = asked(raw, "plan_deployment")

    error = error_of(answer(raw, "plan_deployment", {}, first, {only_key(first): input_response_accepting(**content)}))

    assert (error["code"], error["message"]) == (-32602, "Form content does not match requestedSchema")


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


@pytest.mark.parametrize(
    "graph, form, content, value",
    [
        (
            "typed_typeddict",
            {
                "type": "object",
                "properties": {"name": {"title": "Name", "type": "string"}, "age": {"title": "Age", "type": "integer"}},
                "required": ["name", "age"],
            },
            {"name": "Rex", "age": 3},
            {"name": "Rex", "age": 3},
        ),
        (
            "typed_dataclass",
            {"type": "object", "properties": {"count": {"title": "Count", "type": "integer"}}, "required": ["count"]},
            {"count": 2},
            {"count": 2},
        ),
        (
            "typed_dict_schema",
            {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]},
            {"colour": "green"},
            {"colour": "green"},
        ),
    ],
    ids=["TypedDict", "dataclass", "dict schema"],
)
def test_a_response_schema_becomes_the_form_and_the_agent_resumes_with_the_answer(
    mcp_url, token, graph, form, content, value
):
    raw = Raw(mcp_url, token)
    first = asked(raw, graph)
    key = only_key(first)

    assert first["inputRequests"][key]["params"]["requestedSchema"] == form
    result = result_of(answer(raw, graph, {}, first, {key: input_response_accepting(**content)}))
    assert result["structuredContent"] == {"answer": value}


def test_a_schema_that_does_not_describe_an_object_is_asked_as_one_response_field_and_resumes_with_its_value(
    mcp_url, token
):
    raw = Raw(mcp_url, token)
    first = asked(raw, "typed_int")
    key = only_key(first)

    assert first["inputRequests"][key] == form_request(
        "How many replicas?",
        {"type": "object", "properties": {"response": {"type": "integer"}}, "required": ["response"]},
    )
    assert (
        error_of(answer(raw, "typed_int", {}, first, {key: input_response_accepting(response="three")}))["code"]
        == -32602
    )
    result = result_of(answer(raw, "typed_int", {}, first, {key: input_response_accepting(response=3)}))
    assert result["structuredContent"] == {"answer": 3}


def _refuse(constant: str):
    raise ValueError(f"{constant} is not JSON")


@pytest.mark.parametrize(
    "graph, shown",
    [("typed_dict_schema", {"question": "Pick a colour"}), ("typed_nan", {"ratio": None})],
    ids=["object", "NaN, which JSON lacks, as null"],
)
def test_when_the_interrupt_value_is_not_a_string_the_question_shows_it_as_json(mcp_url, token, graph, shown):
    first = asked(Raw(mcp_url, token), graph)

    message = first["inputRequests"][only_key(first)]["params"]["message"]
    assert json.loads(message, parse_constant=_refuse) == shown


def test_an_interrupt_whose_value_is_not_a_string_and_that_has_no_response_schema_cannot_be_asked(mcp_url, token):
    result = result_of(Raw(mcp_url, token).call("not_a_question"))

    assert unaskable(result)


def test_pydantic_optional_fields_become_plain_fields_and_the_root_title_is_dropped(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = asked(raw, "typed_optional")
    key = only_key(first)

    assert first["inputRequests"][key]["params"]["requestedSchema"] == {
        "type": "object",
        "properties": {
            "note": {"title": "Note", "type": "string"},
            "priority": {"default": 1, "maximum": 5, "minimum": 1, "title": "Priority", "type": "integer"},
        },
    }
    result = result_of(answer(raw, "typed_optional", {}, first, {key: input_response_accepting(priority=2)}))
    assert result["structuredContent"] == {"answer": {"note": None, "priority": 2}}


def test_null_for_an_optional_field_counts_as_left_empty(mcp_url, token):
    # The SDK's ElicitResult allows null values: a client may send one for a field left blank.
    raw = Raw(mcp_url, token)
    first = asked(raw, "typed_optional")

    result = result_of(
        answer(raw, "typed_optional", {}, first, {only_key(first): input_response_accepting(note=None, priority=None)})
    )

    assert result["structuredContent"] == {"answer": {"note": None, "priority": 1}}


def test_null_for_a_required_field_fails_with_32602(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = asked(raw, "plan_deployment")

    error = error_of(
        answer(raw, "plan_deployment", {}, first, {only_key(first): input_response_accepting(region=None, replicas=3)})
    )

    assert (error["code"], error["message"]) == (-32602, "Form content does not match requestedSchema")


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


class Paint(BaseModel):
    """Paint to order."""

    colour: Colour
    litres: int | None = Field(default=None, ge=1, le=20, description="How much")


def test_pydantic_local_defs_are_resolved_and_the_root_title_and_description_dropped(mcp_url, token):
    schema = TypeAdapter(Paint).json_schema()
    assert "$defs" in schema and schema["description"]  # what Pydantic publishes
    raw = Raw(mcp_url, token)
    first = asked(raw, "typed_from_input", {"value": schema})
    key = only_key(first)

    assert first["inputRequests"][key]["params"]["requestedSchema"] == {
        "type": "object",
        "properties": {
            "colour": {"enum": ["red", "green"], "title": "Colour", "type": "string"},
            "litres": {"description": "How much", "maximum": 20, "minimum": 1, "title": "Litres", "type": "integer"},
        },
        "required": ["colour"],
    }
    result = result_of(
        answer(raw, "typed_from_input", {"value": schema}, first, {key: input_response_accepting(colour="green")})
    )
    assert result["structuredContent"]["answer"] == {"colour": "green"}


class Door(BaseModel):
    colour: Colour | None = Field(default=None, title="Door colour")


def test_an_optional_pydantic_field_keeps_its_own_title_when_it_becomes_a_plain_field(mcp_url, token):
    schema = TypeAdapter(Door).json_schema()  # the field's title beside anyOf, Colour's in $defs

    first = asked(Raw(mcp_url, token), "typed_from_input", {"value": schema})

    assert first["inputRequests"][only_key(first)]["params"]["requestedSchema"]["properties"] == {
        "colour": {"enum": ["red", "green"], "title": "Door colour", "type": "string"}
    }


def _ask_form(mcp_url, token, properties: dict, **extra) -> dict:
    """Ask `properties` as a dict response_schema; the call's first result."""
    schema = {"type": "object", "properties": properties, **extra}
    return result_of(Raw(mcp_url, token).call("typed_from_input", {"value": schema}))


def test_fields_are_strings_numbers_integers_booleans_single_choice_enums_or_multi_select_string_choices(
    mcp_url, token
):
    properties = {
        "s": {"type": "string"},
        "n": {"type": "number"},
        "i": {"type": "integer"},
        "b": {"type": "boolean"},
        "e": {"type": "string", "enum": ["a", "b"]},
        "o": {"type": "string", "oneOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}]},
        "m": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}},
        "ma": {"type": "array", "items": {"anyOf": [{"const": "x", "title": "X"}, {"const": "y", "title": "Y"}]}},
    }
    schema = {"type": "object", "properties": properties}
    raw = Raw(mcp_url, token)
    first = asked(raw, "typed_from_input", {"value": schema})
    key = only_key(first)

    assert first["inputRequests"][key]["params"]["requestedSchema"] == schema
    content = {"s": "x", "n": 1.5, "i": 2, "b": True, "e": "a", "o": "b", "m": ["x", "y"], "ma": ["y"]}
    result = result_of(
        answer(raw, "typed_from_input", {"value": schema}, first, {key: input_response_accepting(**content)})
    )
    assert result["structuredContent"]["answer"] == content


@pytest.mark.parametrize(
    "field",
    [
        {"type": "object", "properties": {"a": {"type": "string"}}},
        {"type": "array", "items": {"type": "number"}},
        {"type": "array", "items": {"type": "object"}},
        {"type": "null"},
        {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        "a string, not a schema",
    ],
    ids=["nested object", "array of numbers", "array of objects", "null", "union", "not a schema"],
)
def test_a_field_that_is_not_a_primitive_makes_the_question_unaskable(mcp_url, token, field):
    assert unaskable(_ask_form(mcp_url, token, {"f": field}))


@pytest.mark.parametrize("fmt", ["email", "uri", "date", "date-time"])
def test_strings_can_use_the_email_uri_date_and_date_time_formats(mcp_url, token, fmt):
    first = _ask_form(mcp_url, token, {"f": {"type": "string", "format": fmt}})

    assert first["resultType"] == "input_required"


@pytest.mark.parametrize("fmt", ["ipv4", "uuid", "hostname", "time"])
def test_other_string_formats_make_the_question_unaskable(mcp_url, token, fmt):
    assert unaskable(_ask_form(mcp_url, token, {"f": {"type": "string", "format": fmt}}))


@pytest.mark.parametrize(
    "fmt, broken, fits",
    [
        ("email", "@", "ada@example.com"),
        ("email", "ada@", "ada@example.com"),
        ("email", "ada@example..com", "ada@example.com"),
        ("uri", "example.com/login", "https://example.com/login"),
        ("uri", "https://exa mple.com/", "https://example.com/"),
        ("uri", "https://example.com/<script>", "mailto:ada@example.com"),
        ("date", "31/12", "2026-12-31"),
        ("date", "2026-02-30", "2026-02-28"),
        ("date-time", "2026-12-31", "2026-12-31T10:00:00Z"),
        ("date-time", "2026-12-31T10:00:00", "2026-12-31T10:00:00+01:00"),
        ("date-time", "2026-12-31T25:00:00Z", "2026-12-31T23:00:00Z"),
    ],
)
def test_an_answer_that_breaks_a_string_format_fails_with_32602(mcp_url, token, fmt, broken, fits):
    schema = {"type": "object", "properties": {"f": {"type": "string", "format": fmt}}, "required": ["f"]}
    raw = Raw(mcp_url, token)
    first = asked(raw, "typed_from_input", {"value": schema})
    key = only_key(first)

    error = error_of(
        answer(raw, "typed_from_input", {"value": schema}, first, {key: input_response_accepting(f=broken)})
    )

    assert (error["code"], error["message"]) == (-32602, "Form content does not match requestedSchema")
    result = result_of(
        answer(raw, "typed_from_input", {"value": schema}, first, {key: input_response_accepting(f=fits)})
    )
    assert result["structuredContent"]["answer"] == {"f": fits}


def test_fields_can_carry_title_description_default_and_the_length_range_and_count_bounds(mcp_url, token):
    # Every kind of field, each with a title, a description and a default of its own kind.
    labels = {"title": "T", "description": "d"}
    choices = [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}]
    properties = {
        "s": {"type": "string", **labels, "default": "x", "minLength": 1, "maxLength": 5},
        "d": {"type": "string", **labels, "default": "2026-12-31", "format": "date"},
        "n": {"type": "number", **labels, "minimum": 0, "maximum": 1, "default": 0.5},
        "i": {"type": "integer", **labels, "minimum": 1, "maximum": 10, "default": 3},
        "b": {"type": "boolean", **labels, "default": True},
        "e": {"type": "string", **labels, "enum": ["a", "b"], "default": "b"},
        "o": {"type": "string", **labels, "oneOf": choices, "default": "a"},
        "m": {
            "type": "array",
            **labels,
            "items": {"type": "string", "enum": ["x", "y"]},
            "minItems": 1,
            "maxItems": 2,
            "default": ["x"],
        },
        "ma": {"type": "array", **labels, "items": {"anyOf": choices}, "default": ["b"]},
    }
    schema = {"type": "object", "properties": properties}
    raw = Raw(mcp_url, token)
    first = asked(raw, "typed_from_input", {"value": schema})
    key = only_key(first)

    assert first["inputRequests"][key]["params"]["requestedSchema"]["properties"] == properties
    # A client that submits the prefilled defaults answers the form.
    defaults = {name: field["default"] for name, field in properties.items()}
    result = result_of(
        answer(raw, "typed_from_input", {"value": schema}, first, {key: input_response_accepting(**defaults)})
    )
    assert result["structuredContent"]["answer"] == defaults


@pytest.mark.parametrize(
    "field",
    [
        {"type": "integer", "minimum": 1, "maximum": 10, "default": 0},
        {"type": "string", "maxLength": 2, "default": "too long"},
        {"type": "string", "format": "date", "default": "tomorrow"},
        {"type": "string", "enum": ["a", "b"], "default": "c"},
        {"type": "array", "items": {"type": "string", "enum": ["x"]}, "minItems": 1, "default": []},
        {"type": "number", "maximum": 1, "default": 2.5},
    ],
    ids=["below minimum", "too long", "not a date", "not a choice", "too few items", "above maximum"],
)
def test_a_default_that_its_own_field_refuses_is_left_out_and_the_field_is_still_asked(mcp_url, token, field):
    # A client would prefill it, and the form would refuse the prefilled answer.
    schema = {"type": "object", "properties": {"f": field}}
    raw = Raw(mcp_url, token)
    first = asked(raw, "typed_from_input", {"value": schema})

    asked_field = first["inputRequests"][only_key(first)]["params"]["requestedSchema"]["properties"]["f"]

    assert asked_field == {k: v for k, v in field.items() if k != "default"}


@pytest.mark.parametrize(
    "field",
    [
        {"type": "string", "pattern": "^[A-Z]+$"},
        {"type": "integer", "multipleOf": 2},
        {"type": "integer", "exclusiveMinimum": 0},
        {"type": "integer", "exclusiveMaximum": 10},
        {"type": "string", "const": "x"},
    ],
    ids=["pattern", "multipleOf", "exclusiveMinimum", "exclusiveMaximum", "const"],
)
def test_a_field_with_other_keywords_makes_the_question_unaskable(mcp_url, token, field):
    assert unaskable(_ask_form(mcp_url, token, {"f": field}))


@pytest.mark.parametrize(
    "field",
    [
        {"type": "integer", "minLength": 1},
        {"type": "boolean", "maxLength": 5},
        {"type": "string", "minimum": 0},
        {"type": "string", "enum": ["a", "b"], "maximum": 1},
        {"type": "number", "minItems": 1},
        {"type": "string", "maxItems": 2},
        {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}, "maxLength": 2},
    ],
    ids=[
        "minLength on an integer",
        "maxLength on a boolean",
        "minimum on a string",
        "maximum on a choice",
        "minItems on a number",
        "maxItems on a string",
        "maxLength on a multi-select",
    ],
)
def test_the_length_range_and_count_bounds_are_allowed_only_where_they_apply(mcp_url, token, field):
    assert unaskable(_ask_form(mcp_url, token, {"f": field}))


@pytest.mark.parametrize("graph", ["typed_pattern", "typed_gt"])
def test_a_pattern_or_the_exclusive_minimum_of_a_pydantic_gt_makes_the_question_unaskable(mcp_url, token, graph):
    result = result_of(Raw(mcp_url, token).call(graph))

    assert unaskable(result)


def test_a_form_has_1_to_100_fields(mcp_url, token):
    field = {"type": "string"}

    assert unaskable(_ask_form(mcp_url, token, {}))
    assert _ask_form(mcp_url, token, {"f": field})["resultType"] == "input_required"
    assert _ask_form(mcp_url, token, {f"f{i}": field for i in range(100)})["resultType"] == "input_required"
    assert unaskable(_ask_form(mcp_url, token, {f"f{i}": field for i in range(101)}))


def test_a_form_schema_larger_than_1_mib_is_unaskable(mcp_url, token):
    big = {"type": "string", "description": "x" * (1024 * 1024)}

    assert unaskable(_ask_form(mcp_url, token, {"f": big}))


def _utf8_size(schema: dict) -> int:
    return len(json.dumps(schema, ensure_ascii=False, separators=(",", ":")).encode())


def test_a_form_schema_of_at_most_1_mib_counts_the_utf_8_bytes_of_its_compact_json(mcp_url, token):
    # Non-ASCII text counts its UTF-8 bytes (2 for an é), not the 6 of a \u00e9 escape.
    def field(size: int) -> dict:
        empty = _utf8_size({"type": "object", "properties": {"f": {"type": "string", "description": ""}}})
        room = size - empty
        return {"type": "string", "description": "é" * (room // 2) + "x" * (room % 2)}

    first = _ask_form(mcp_url, token, {"f": field(1024 * 1024)})

    assert first["resultType"] == "input_required"
    assert _utf8_size(first["inputRequests"][only_key(first)]["params"]["requestedSchema"]) == 1024 * 1024
    assert unaskable(_ask_form(mcp_url, token, {"f": field(1024 * 1024 + 1)}))


def test_a_schema_that_refers_outside_itself_is_unaskable(mcp_url, token):
    assert unaskable(_ask_form(mcp_url, token, {"f": {"$ref": "https://example.com/schema.json"}}))


@pytest.mark.parametrize(
    "properties",
    [
        {"password": {"type": "string"}},
        {"api_key": {"type": "string"}},
        {"access_token": {"type": "string"}},
        {"card_number": {"type": "string"}},
        {"secret": {"type": "string", "title": "Your password"}},
        {"pwd": {"type": "string"}},
        {"login": {"type": "string", "title": "Pwd"}},
        {"apiKey": {"type": "string"}},
        {"refresh_token": {"type": "string"}},
        {"github_token": {"type": "string"}},
        {"gh": {"type": "string", "title": "Github Token"}},
        {"slackBotToken": {"type": "string"}},
        {"client_secret": {"type": "string"}},
        {"card_cvv": {"type": "string"}},
        {"cardNumber": {"type": "string"}},
        {"pin_code": {"type": "string"}},
        {"iban_number": {"type": "string"}},
        {"code": {"type": "string", "description": "The security code on the back of your card"}},
    ],
    ids=[
        "password",
        "API key",
        "access token",
        "payment card",
        "password in the title",
        "pwd",
        "Pwd title",
        "camelCase API key",
        "refresh token",
        "github token",
        "Github Token title",
        "camelCase token",
        "client secret",
        "card cvv",
        "camelCase card number",
        "pin code",
        "iban number",
        "security code in the description",
    ],
)
def test_a_form_that_asks_for_passwords_keys_tokens_or_payment_credentials_is_unaskable(mcp_url, token, properties):
    assert unaskable(_ask_form(mcp_url, token, properties))


def test_a_form_whose_fields_only_look_like_credentials_is_asked(mcp_url, token):
    # Names are read as words: a secretary, a spinner or a count of tokens asks for no credential.
    properties = {
        name: {"type": "string"}
        for name in ("name", "email", "region", "description", "secretary", "spinner", "keyboard", "passenger")
    } | {name: {"type": "integer"} for name in ("tokens_used", "max_tokens", "token_count")}

    first = _ask_form(mcp_url, token, properties)

    assert set(first["inputRequests"][only_key(first)]["params"]["requestedSchema"]["properties"]) == set(properties)


def test_the_typed_password_graph_is_unaskable(mcp_url, token):
    assert unaskable(result_of(Raw(mcp_url, token).call("typed_password")))


# --- Relay elicitation requests ---------------------------------------------------------------------


def test_the_greeter_relays_its_request_under_its_own_key_and_resumes_with_the_answer(mcp_url, token):
    callback = by_message({"name": elicit_result_accepting(name="Ada")})

    async def go():
        async with sdk_client(mcp_url, token, callback) as client:
            return await client.call_tool("greeter", {})

    result = run(go())
    assert result.structured_content == {"greeting": "Hello, Ada!"}
    assert result.content[0].text == '{"greeting":"Hello, Ada!"}'
    assert [key for key, _ in callback.asked] == ["user_name"]


@pytest.mark.parametrize("action", [DECLINE, CANCEL], ids=["decline", "cancel"])
def test_declined_and_cancelled_relay_answers_are_passed_to_the_agent(mcp_url, token, action):
    async def go():
        async with sdk_client(mcp_url, token, by_message({"name": action})) as client:
            return await client.call_tool("greeter", {})

    result = run(go())
    assert not result.is_error
    assert result.structured_content == {"greeting": "Hello, stranger!"}


def test_relayed_requests_can_be_a_list_with_requested_schema(mcp_url, token):
    requests = [{"key": "a", "message": "A?", "mode": "form", "requested_schema": OK_FORM}]
    first = asked(Raw(mcp_url, token), "relay_from_input", {"value": requests})

    assert first["inputRequests"] == {"a": form_request("A?", OK_FORM)}


def test_a_relayed_list_may_also_name_the_schema_with_the_mcp_field_name(mcp_url, token):
    requests = [{"key": "a", "message": "A?", "mode": "form", "requestedSchema": OK_FORM}]
    first = asked(Raw(mcp_url, token), "relay_from_input", {"value": requests})

    assert first["inputRequests"] == {"a": form_request("A?", OK_FORM)}


def test_relayed_requests_can_be_a_key_map_with_mcp_field_names_where_no_mode_means_form(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = asked(raw, "relay_map")

    assert first["inputRequests"] == {"confirm": form_request("Relayed confirm?", OK_FORM)}
    result = result_of(answer(raw, "relay_map", {}, first, {"confirm": input_response_accepting(ok=True)}))
    assert result["structuredContent"] == {"answers": [{"confirm": {"action": "accept", "content": {"ok": True}}}]}


def test_a_key_map_can_relay_a_url_request(mcp_url, token):
    requests = {"login": {"message": "Log in.", "mode": "url", "url": "https://example.com/login"}}
    first = asked(Raw(mcp_url, token), "relay_from_input", {"value": requests})

    assert first["inputRequests"] == {"login": url_request("Log in.", "https://example.com/login")}


def test_other_keys_in_the_interrupt_value_are_ignored(mcp_url, token):
    # relay_from_input adds "tool_name", as MCPAdapter does.
    requests = [{"key": "a", "message": "A?", "mode": "form", "requested_schema": OK_FORM}]
    first = asked(Raw(mcp_url, token), "relay_from_input", {"value": requests})

    assert first["inputRequests"] == {"a": form_request("A?", OK_FORM)}


def test_the_agent_resumes_with_one_answer_per_request_under_its_own_keys(mcp_url, token):
    requests = [
        {"key": "a", "message": "A?", "mode": "form", "requested_schema": OK_FORM},
        {"key": "b", "message": "B?", "mode": "url", "url": "https://example.com/b"},
        {"key": "c", "message": "C?", "mode": "form", "requested_schema": OK_FORM},
        {"key": "d", "message": "D?", "mode": "form", "requested_schema": OK_FORM},
    ]
    raw = Raw(mcp_url, token)
    first = asked(raw, "relay_from_input", {"value": requests})
    assert set(first["inputRequests"]) == {"a", "b", "c", "d"}

    responses = {
        "a": input_response_accepting(ok=True),
        "b": {"action": "accept"},
        "c": {"action": "decline", "content": {"ok": True}},
        "d": {"action": "cancel"},
    }
    result = result_of(answer(raw, "relay_from_input", {"value": requests}, first, responses))

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
def test_relayed_requests_are_checked_against_the_rules_for_forms_and_urls(mcp_url, token, request_):
    result = result_of(Raw(mcp_url, token).call("relay_from_input", {"value": [request_]}))

    assert unaskable(result)


@pytest.mark.parametrize("graph", ["relay_bad_url", "relay_url_with_password"])
def test_the_relay_test_graphs_with_bad_urls_are_unaskable(mcp_url, token, graph):
    assert unaskable(result_of(Raw(mcp_url, token).call(graph)))


def test_with_several_interrupts_pending_keys_are_prefixed_with_a_digest_and_the_agent_gets_its_own_keys(
    mcp_url, token
):
    raw = Raw(mcp_url, token)
    first = asked(raw, "relay_twice")

    keys = sorted(first["inputRequests"])
    assert len(keys) == 2
    digests = {re.fullmatch(r"([0-9a-f]{16})\.([12])/confirm", k).group(1) for k in keys}
    assert len(digests) == 1  # the same interrupt value, asked as two separate questions
    assert [k.rsplit(".", 1)[1] for k in keys] == ["1/confirm", "2/confirm"]
    for key in keys:
        assert first["inputRequests"][key] == form_request("Relayed confirm?", OK_FORM)

    responses = {keys[0]: input_response_accepting(ok=True), keys[1]: input_response_accepting(ok=False)}
    result = result_of(answer(raw, "relay_twice", {}, first, responses))
    answers = sorted(result["structuredContent"]["answers"], key=json.dumps)
    assert answers == [
        {"confirm": {"action": "accept", "content": {"ok": False}}},
        {"confirm": {"action": "accept", "content": {"ok": True}}},
    ]


def test_with_identical_interrupts_pending_each_key_reaches_the_same_node_on_every_call(mcp_url, token):
    """Document, MCPAdapter: the adapter calls the tool again from the start, on a new thread, and
    answers each question with the answer stored for its key. Interrupt ids are new on every thread;
    with them as the tie-breaker between identical questions, `.1` reached either node."""
    raw = Raw(mcp_url, token)
    outcomes = []
    for _ in range(6):  # a coin toss per call before: all six alike by chance 1 time in 32
        first = asked(raw, "relay_twice_tagged")
        one, two = sorted(first["inputRequests"])
        result = result_of(
            answer(
                raw,
                "relay_twice_tagged",
                {},
                first,
                {one: input_response_accepting(ok=True), two: input_response_accepting(ok=False)},
            )
        )
        outcomes.append(sorted(json.dumps(a, sort_keys=True) for a in result["structuredContent"]["answers"]))

    assert all(outcome == outcomes[0] for outcome in outcomes), outcomes


def test_other_keys_in_the_interrupt_values_leave_the_keys_of_several_pending_requests_unchanged(mcp_url, token):
    """Document: Agent Server ignores other keys in the interrupt value, and derives each key from
    its question, which is what lets MCPAdapter replay its stored answers: here each value carries a
    call id that is new on every run, and the adapter's call from the start must find the same keys."""
    message, seen = agent_answering(
        mcp_url, token, "relay_twice_with_fresh_ids", {"confirm": input_response_accepting(ok=True)}
    )

    (first,) = seen
    assert sorted(r["key"].split(".", 1)[1] for r in first["requests"]) == ["1/confirm", "2/confirm"]
    assert message.status == "success"
    assert message.text.count('"confirm":{"action":"accept","content":{"ok":true}}') == 2


def test_with_one_interrupt_pending_the_client_sees_the_agents_own_keys(mcp_url, token):
    requests = {"my-key": {"message": "Mine?", "requestedSchema": OK_FORM}}
    first = asked(Raw(mcp_url, token), "relay_from_input", {"value": requests})

    assert list(first["inputRequests"]) == ["my-key"]


# --- Send the user to a URL -------------------------------------------------------------------------

CALENDAR = url_request("Connect your calendar to continue.", "https://example.com/oauth/calendar/start")


def test_the_connect_calendar_agent_sends_the_user_to_its_url(mcp_url, token):
    first = asked(Raw(mcp_url, token), "connect_calendar")

    assert first["inputRequests"] == {"calendar_auth": CALENDAR}


@pytest.mark.parametrize(
    "response, status",
    [
        ({"action": "accept"}, "connected"),
        ({"action": "decline"}, "not connected"),
        ({"action": "cancel"}, "not connected"),
    ],
    ids=["accept", "decline", "cancel"],
)
def test_an_accept_answer_without_content_confirms_the_url_flow_and_others_do_not(mcp_url, token, response, status):
    raw = Raw(mcp_url, token)
    first = asked(raw, "connect_calendar")

    result = result_of(answer(raw, "connect_calendar", {}, first, {"calendar_auth": response}))

    assert result["structuredContent"] == {"status": status}


def test_an_accept_answer_to_a_url_question_reaches_the_agent_without_content(mcp_url, token):
    # relay_url returns what the agent received.
    arguments = {"value": "https://example.com/oauth"}
    raw = Raw(mcp_url, token)
    first = asked(raw, "relay_url", arguments)

    result = result_of(
        answer(raw, "relay_url", arguments, first, {"page": input_response_accepting(code="from the client")})
    )

    assert result["structuredContent"]["answers"] == [{"page": {"action": "accept"}}]


class _Visits(BaseHTTPRequestHandler):
    """A page that counts who opens it."""

    paths: list[str] = []

    def do_GET(self):
        self.paths.append(self.path)
        self.send_response(200)
        self.end_headers()

    do_HEAD = do_POST = do_GET

    def log_message(self, *args):
        pass


def test_the_client_receives_the_url_in_the_question_and_the_server_does_not_open_it(mcp_url, token):
    page = HTTPServer(("127.0.0.1", 0), _Visits)
    threading.Thread(target=page.serve_forever, daemon=True).start()
    try:
        arguments = {"value": f"http://127.0.0.1:{page.server_port}/oauth/start"}
        raw = Raw(mcp_url, token)
        first = asked(raw, "relay_url", arguments)
        assert first["inputRequests"] == {"page": url_request("Open this page.", arguments["value"])}

        result = result_of(answer(raw, "relay_url", arguments, first, {"page": {"action": "accept"}}))
        assert result["structuredContent"]["answers"] == [{"page": {"action": "accept"}}]
    finally:
        page.shutdown()
        page.server_close()
    assert _Visits.paths == []


@pytest.mark.parametrize(
    "action, status", [(ACCEPT, "connected"), (DECLINE, "not connected")], ids=["accept", "decline"]
)
def test_the_connect_calendar_agent_through_the_sdk_client(mcp_url, token, action, status):
    callback = by_message({"calendar": action})

    async def go():
        async with sdk_client(mcp_url, token, callback) as client:
            return await client.call_tool("connect_calendar", {})

    assert run(go()).structured_content == {"status": status}
    ((key, params),) = callback.asked
    assert (key, params.mode, params.url) == ("calendar_auth", "url", "https://example.com/oauth/calendar/start")


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/oauth",
        "http://localhost:8080/callback",
        "http://127.0.0.1/callback",
        "http://[::1]:9000/callback",
        "https://example.com/" + "a" * (4096 - len("https://example.com/")),
        "https://bücher.example/",
        "https://intranet/login",
    ],
    ids=["https", "http localhost", "http 127.0.0.1", "http [::1]", "4096 characters", "IDN host", "one-label host"],
)
def test_a_url_that_meets_the_rules_is_asked(mcp_url, token, url):
    first = asked(Raw(mcp_url, token), "relay_url", {"value": url})

    assert first["inputRequests"] == {"page": url_request("Open this page.", url)}


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/login",
        "http://localhost.example.com/login",
        "ftp://example.com/file",
        "javascript:alert(1)",
        "https:///no-host",
        "https://user:pw@example.com/login",
        "https://user@example.com/login",
        "https://:pw@example.com/login",
        "https://example.com/" + "a" * (4097 - len("https://example.com/")),
        "",
        " https://example.com/",
        "https://exa mple.com/",
        "https://example.com/\n",
        "https://example.com/a\tb",
        "https://exa%20mple.com/",
        "https://exa_mple.com/",
        "https://-example.com/",
        "https://999.1.1.1/",
    ],
    ids=[
        "http elsewhere",
        "http localhost lookalike",
        "ftp",
        "javascript",
        "no host",
        "user and password",
        "user name",
        "password",
        "4097 characters",
        "empty",
        "leading space",
        "space in the host",
        "trailing newline",
        "tab",
        "escape in the host",
        "underscore in the host",
        "label starting with a hyphen",
        "not an IPv4 address",
    ],
)
def test_a_url_that_breaks_the_rules_is_unaskable(mcp_url, token, url):
    assert unaskable(result_of(Raw(mcp_url, token).call("relay_url", {"value": url})))


NEEDS_URL = {
    "code": -32021,
    "message": "This tool asks for human input and needs url elicitation.",
    "data": {"requiredCapabilities": {"elicitation": {"url": {}}}},
}
FORM_ONLY = {"elicitation": {"form": {}}}


def test_a_client_that_declares_only_form_gets_32021_naming_url(mcp_url, token):
    response = Raw(mcp_url, token).call("connect_calendar", capabilities=FORM_ONLY)

    assert response.status_code == 400
    assert response.json()["error"] == NEEDS_URL


def test_a_client_that_declares_the_url_mode_is_sent_to_the_url_even_without_form(mcp_url, token):
    raw = Raw(mcp_url, token)
    url_only = {"elicitation": {"url": {}}}

    first = asked(raw, "connect_calendar", capabilities=url_only)

    assert first["inputRequests"] == {"calendar_auth": CALENDAR}
    result = result_of(
        answer(raw, "connect_calendar", {}, first, {"calendar_auth": {"action": "accept"}}, capabilities=url_only)
    )
    assert result["structuredContent"] == {"status": "connected"}


@pytest.mark.parametrize(
    "capabilities", [{"elicitation": {"form": {}, "url": None}}, {"elicitation": {"url": None}}], ids=["form", "none"]
)
def test_a_url_mode_declared_as_null_is_not_declared_and_the_call_fails_with_32021(mcp_url, token, capabilities):
    # The revision's schema lets a mode be null, and the SDK reads null as absent: form only.
    response = Raw(mcp_url, token).call("connect_calendar", capabilities=capabilities)

    assert response.status_code == 400
    assert response.json()["error"] == NEEDS_URL


def test_a_client_that_declares_only_url_gets_32021_naming_form(mcp_url, token):
    error = error_of(Raw(mcp_url, token).call("greeter", capabilities={"elicitation": {"url": {}}}))

    assert error["code"] == -32021
    assert error["message"] == "This tool asks for human input and needs form elicitation."


def test_a_form_only_sdk_client_gets_an_mcp_error_32021_naming_url(mcp_url, token):
    from mcp.shared.exceptions import MCPError

    async def go():
        async with form_only_session(mcp_url, token, by_message({})) as session:
            try:
                await drive(session, "connect_calendar", {})
            except MCPError as exc:
                return exc.error
        raise AssertionError("the call did not fail")

    error = run(go())
    assert (error.code, error.message, error.data) == (NEEDS_URL["code"], NEEDS_URL["message"], NEEDS_URL["data"])


def test_a_form_only_sdk_client_answers_form_questions(mcp_url, token):
    async def go():
        async with form_only_session(
            mcp_url, token, by_message({"name": elicit_result_accepting(name="Ada")})
        ) as session:
            return await drive(session, "greeter", {})

    assert run(go()).structured_content == {"greeting": "Hello, Ada!"}


def test_when_a_later_round_needs_url_the_call_fails_the_same_way_and_is_kept_ten_minutes_for_a_resend(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = asked(raw, "form_then_url", capabilities=FORM_ONLY)
    responses = {only_key(first): input_response_accepting(response="Ada")}

    response = answer(raw, "form_then_url", {}, first, responses, capabilities=FORM_ONLY)

    assert error_of(response) == NEEDS_URL
    call = call_of(first["requestState"])
    assert abs((call.expires_at - (timezone.now() + timedelta(minutes=10))).total_seconds()) < 5
    # Declaring url and resending the same answers and requestState gets the URL question.
    second = result_of(answer(raw, "form_then_url", {}, first, responses))
    assert second["inputRequests"] == {"login": url_request("Open this page.", "https://example.com/oauth")}
    done = result_of(answer(raw, "form_then_url", {}, second, {"login": {"action": "accept"}}))
    assert done["structuredContent"] == {"first": "Ada", "answers": [{"login": {"action": "accept"}}]}


def test_a_url_question_got_by_declaring_url_in_those_ten_minutes_stays_open_24_hours_after_its_round(mcp_url, token):
    # The ten minutes are for coming back with url declared; once the URL question is asked, the
    # call is paused on it like any other (document "Lifetime"), and the user has time for the page.
    raw = Raw(mcp_url, token)
    first = asked(raw, "form_then_url", capabilities=FORM_ONLY)
    responses = {only_key(first): input_response_accepting(response="Ada")}
    assert error_of(answer(raw, "form_then_url", {}, first, responses, capabilities=FORM_ONLY)) == NEEDS_URL

    second = result_of(answer(raw, "form_then_url", {}, first, responses))

    assert list(second["inputRequests"]) == ["login"]
    call = call_of(second["requestState"])
    assert abs((call.expires_at - (timezone.now() + timedelta(hours=24))).total_seconds()) < 60


def test_an_answer_that_langgraph_rejects_for_its_pydantic_model_fails_with_32602_and_the_round_stays_open(
    mcp_url, token
):
    raw = Raw(mcp_url, token)
    first = asked(raw, "typed_validator")
    key = only_key(first)

    error = error_of(answer(raw, "typed_validator", {}, first, {key: input_response_accepting(nickname="nobody")}))

    assert (error["code"], error["message"]) == (-32602, "Form content does not match requestedSchema")
    assert "nobody is not a nickname" in error["data"]["detail"]
    # The same answers again get the same error; other answers answer the round.
    assert (
        error_of(answer(raw, "typed_validator", {}, first, {key: input_response_accepting(nickname="nobody")})) == error
    )
    result = result_of(answer(raw, "typed_validator", {}, first, {key: input_response_accepting(nickname="Ada")}))
    assert result["structuredContent"] == {"answer": "Ada"}


def test_an_answer_that_langgraph_rejects_in_a_first_call_deletes_that_calls_thread(mcp_url, token):
    from mcp_gateway.models import ToolCall
    from tests.rounds import checkpoint_rows, eventually

    raw = Raw(mcp_url, token)
    key = only_key(asked(raw, "typed_validator"))

    error = error_of(raw.call("typed_validator", {}, inputResponses={key: input_response_accepting(nickname="nobody")}))

    assert error["code"] == -32602
    call = ToolCall.objects.filter(tool_name="typed_validator").latest("created_at")
    assert call.expires_at <= timezone.now()
    assert eventually(lambda: checkpoint_rows(call.thread_id) == 0)


def test_a_relayed_form_reaches_the_client_as_a_valid_mcp_form(mcp_url, token):
    from mcp_types._v2026_07_28 import PrimitiveSchemaDefinition

    schema = TypeAdapter(Paint).json_schema()  # $defs, a $ref, an optional field, a root title
    requests = {"paint": {"message": "Which paint?", "requestedSchema": schema}}
    first = asked(Raw(mcp_url, token), "relay_from_input", {"value": requests})

    sent = first["inputRequests"]["paint"]["params"]["requestedSchema"]
    assert sent["type"] == "object" and set(sent["properties"]) == {"colour", "litres"}
    for field in sent["properties"].values():
        TypeAdapter(PrimitiveSchemaDefinition).validate_python(field)
        assert not {"$ref", "anyOf"} & set(field)


def test_an_agent_relays_the_question_of_a_tool_it_calls_through_mcp_adapter_to_its_own_client(mcp_url, token):
    # The agent behind relay_through_adapter calls greeter on this same server through MCPAdapter.
    arguments = {"value": {"url": mcp_url, "token": token, "tool": "greeter"}}
    raw = Raw(mcp_url, token)
    first = asked(raw, "relay_through_adapter", arguments)

    assert first["inputRequests"] == {
        "user_name": form_request(
            "What is your name?", {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        )
    }
    result = result_of(
        answer(raw, "relay_through_adapter", arguments, first, {"user_name": input_response_accepting(name="Ada")})
    )
    assert result["isError"] is False
    assert "Hello, Ada!" in json.dumps(result["structuredContent"])
