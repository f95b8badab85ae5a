"""Ask for typed input: a response_schema (Pydantic, TypedDict, dataclass, JSON schema) becomes the
form, and the agent resumes with the answer in that type. Driven in-process."""

from __future__ import annotations

import enum
import json

import pytest
from pydantic import BaseModel, Field, TypeAdapter

from tests.asking import TEXT_KEY, form_request, unaskable
from tests.inprocess.driver import answer, asked, call, refused_answer
from tests.rounds import input_response_accepting, only_key, text_of

DEPLOYMENT_FORM = {
    "properties": {
        "region": {"enum": ["us-east-1", "eu-west-1"], "title": "Region", "type": "string"},
        "replicas": {"maximum": 10, "minimum": 1, "title": "Replicas", "type": "integer"},
    },
    "required": ["region", "replicas"],
    "type": "object",
}


def test_the_plan_deployment_agent_asks_its_pydantic_schema_as_a_form():
    first = asked("plan_deployment")

    key = only_key(first)
    assert TEXT_KEY.fullmatch(key)
    assert first["inputRequests"][key] == form_request("Where should the service deploy?", DEPLOYMENT_FORM)


def test_an_answer_outside_the_schema_fails_with_32602_and_the_client_can_answer_again():
    first = asked("plan_deployment")
    key = only_key(first)

    error = refused_answer(
        "plan_deployment", {}, first, {key: input_response_accepting(region="eu-west-1", replicas=20)}
    )

    assert error["code"] == -32602
    assert error["message"] == "Form content does not match requestedSchema"
    result = answer("plan_deployment", {}, first, {key: input_response_accepting(region="eu-west-1", replicas=3)})
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
def test_every_answer_is_checked_against_the_form(content):
    first = asked("plan_deployment")

    error = refused_answer("plan_deployment", {}, first, {only_key(first): input_response_accepting(**content)})

    assert (error["code"], error["message"]) == (-32602, "Form content does not match requestedSchema")


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
def test_a_response_schema_becomes_the_form_and_the_agent_resumes_with_the_answer(graph, form, content, value):
    first = asked(graph)
    key = only_key(first)

    assert first["inputRequests"][key]["params"]["requestedSchema"] == form
    result = answer(graph, {}, first, {key: input_response_accepting(**content)})
    assert result["structuredContent"] == {"answer": value}


def test_a_schema_that_does_not_describe_an_object_is_asked_as_one_response_field_and_resumes_with_its_value():
    first = asked("typed_int")
    key = only_key(first)

    assert first["inputRequests"][key] == form_request(
        "How many replicas?",
        {"type": "object", "properties": {"response": {"type": "integer"}}, "required": ["response"]},
    )
    assert refused_answer("typed_int", {}, first, {key: input_response_accepting(response="three")})["code"] == -32602
    result = answer("typed_int", {}, first, {key: input_response_accepting(response=3)})
    assert result["structuredContent"] == {"answer": 3}


def _refuse(constant: str):
    raise ValueError(f"{constant} is not JSON")


@pytest.mark.parametrize(
    "graph, shown",
    [("typed_dict_schema", {"question": "Pick a colour"}), ("typed_nan", {"ratio": None})],
    ids=["object", "NaN, which JSON lacks, as null"],
)
def test_when_the_interrupt_value_is_not_a_string_the_question_shows_it_as_json(graph, shown):
    first = asked(graph)

    message = first["inputRequests"][only_key(first)]["params"]["message"]
    assert json.loads(message, parse_constant=_refuse) == shown


def test_an_interrupt_whose_value_is_not_a_string_and_that_has_no_response_schema_cannot_be_asked():
    result = call("not_a_question")

    assert unaskable(result)


def test_pydantic_optional_fields_become_plain_fields_and_the_root_title_is_dropped():
    first = asked("typed_optional")
    key = only_key(first)

    assert first["inputRequests"][key]["params"]["requestedSchema"] == {
        "type": "object",
        "properties": {
            "note": {"title": "Note", "type": "string"},
            "priority": {"default": 1, "maximum": 5, "minimum": 1, "title": "Priority", "type": "integer"},
        },
    }
    result = answer("typed_optional", {}, first, {key: input_response_accepting(priority=2)})
    assert result["structuredContent"] == {"answer": {"note": None, "priority": 2}}


def test_null_for_an_optional_field_counts_as_left_empty():
    # The SDK's ElicitResult allows null values: a client may send one for a field left blank.
    first = asked("typed_optional")

    result = answer("typed_optional", {}, first, {only_key(first): input_response_accepting(note=None, priority=None)})

    assert result["structuredContent"] == {"answer": {"note": None, "priority": 1}}


def test_null_for_a_required_field_fails_with_32602():
    first = asked("plan_deployment")

    error = refused_answer(
        "plan_deployment", {}, first, {only_key(first): input_response_accepting(region=None, replicas=3)}
    )

    assert (error["code"], error["message"]) == (-32602, "Form content does not match requestedSchema")


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


class Paint(BaseModel):
    """Paint to order."""

    colour: Colour
    litres: int | None = Field(default=None, ge=1, le=20, description="How much")


def test_pydantic_local_defs_are_resolved_and_the_root_title_and_description_dropped():
    schema = TypeAdapter(Paint).json_schema()
    assert "$defs" in schema and schema["description"]  # what Pydantic publishes
    first = asked("typed_from_input", {"value": schema})
    key = only_key(first)

    assert first["inputRequests"][key]["params"]["requestedSchema"] == {
        "type": "object",
        "properties": {
            "colour": {"enum": ["red", "green"], "title": "Colour", "type": "string"},
            "litres": {"description": "How much", "maximum": 20, "minimum": 1, "title": "Litres", "type": "integer"},
        },
        "required": ["colour"],
    }
    result = answer("typed_from_input", {"value": schema}, first, {key: input_response_accepting(colour="green")})
    assert result["structuredContent"]["answer"] == {"colour": "green"}


class Door(BaseModel):
    colour: Colour | None = Field(default=None, title="Door colour")


def test_an_optional_pydantic_field_keeps_its_own_title_when_it_becomes_a_plain_field():
    schema = TypeAdapter(Door).json_schema()  # the field's title beside anyOf, Colour's in $defs

    first = asked("typed_from_input", {"value": schema})

    assert first["inputRequests"][only_key(first)]["params"]["requestedSchema"]["properties"] == {
        "colour": {"enum": ["red", "green"], "title": "Door colour", "type": "string"}
    }


@pytest.mark.parametrize("graph", ["typed_pattern", "typed_gt"])
def test_a_pattern_or_the_exclusive_minimum_of_a_pydantic_gt_makes_the_question_unaskable(graph):
    result = call(graph)

    assert unaskable(result)


def test_the_typed_password_graph_is_unaskable():
    assert unaskable(call("typed_password"))


def test_a_large_float_in_arguments_or_answers_reaches_the_agent_as_a_float():
    # PostgreSQL's jsonb would give 1e20 back as the integer 100000000000000000000, which LangGraph's
    # checkpoints cannot hold: the run would fail with a serializer error.
    arguments = {"value": {"type": "number", "maximum": 1e20}}
    first = asked("typed_from_input", arguments)

    done = answer("typed_from_input", arguments, first, {only_key(first): input_response_accepting(response=1e20)})

    assert done["isError"] is False and done["structuredContent"]["answer"] == 1e20
