"""Ask for typed input, the form's rules: which fields, formats, keywords, defaults and sizes a form
may have, and which credentials it may not ask for. Driven in-process."""

from __future__ import annotations

import json

import pytest

from tests.asking import unaskable
from tests.inprocess.driver import answer, asked, call, refused_answer
from tests.rounds import input_response_accepting, only_key


def _ask_form(properties: dict, **extra) -> dict:
    """Ask `properties` as a dict response_schema; the call's first result."""
    schema = {"type": "object", "properties": properties, **extra}
    return call("typed_from_input", {"value": schema})


def test_fields_are_strings_numbers_integers_booleans_single_choice_enums_or_multi_select_string_choices():
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
    first = asked("typed_from_input", {"value": schema})
    key = only_key(first)

    assert first["inputRequests"][key]["params"]["requestedSchema"] == schema
    content = {"s": "x", "n": 1.5, "i": 2, "b": True, "e": "a", "o": "b", "m": ["x", "y"], "ma": ["y"]}
    result = answer("typed_from_input", {"value": schema}, first, {key: input_response_accepting(**content)})
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
def test_a_field_that_is_not_a_primitive_makes_the_question_unaskable(field):
    assert unaskable(_ask_form({"f": field}))


@pytest.mark.parametrize("fmt", ["email", "uri", "date", "date-time"])
def test_strings_can_use_the_email_uri_date_and_date_time_formats(fmt):
    first = _ask_form({"f": {"type": "string", "format": fmt}})

    assert first["resultType"] == "input_required"


@pytest.mark.parametrize("fmt", ["ipv4", "uuid", "hostname", "time"])
def test_other_string_formats_make_the_question_unaskable(fmt):
    assert unaskable(_ask_form({"f": {"type": "string", "format": fmt}}))


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
def test_an_answer_that_breaks_a_string_format_fails_with_32602(fmt, broken, fits):
    schema = {"type": "object", "properties": {"f": {"type": "string", "format": fmt}}, "required": ["f"]}
    first = asked("typed_from_input", {"value": schema})
    key = only_key(first)

    error = refused_answer("typed_from_input", {"value": schema}, first, {key: input_response_accepting(f=broken)})

    assert (error["code"], error["message"]) == (-32602, "Form content does not match requestedSchema")
    result = answer("typed_from_input", {"value": schema}, first, {key: input_response_accepting(f=fits)})
    assert result["structuredContent"]["answer"] == {"f": fits}


def test_fields_can_carry_title_description_default_and_the_length_range_and_count_bounds():
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
    first = asked("typed_from_input", {"value": schema})
    key = only_key(first)

    assert first["inputRequests"][key]["params"]["requestedSchema"]["properties"] == properties
    # A client that submits the prefilled defaults answers the form.
    defaults = {name: field["default"] for name, field in properties.items()}
    result = answer("typed_from_input", {"value": schema}, first, {key: input_response_accepting(**defaults)})
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
def test_a_default_that_its_own_field_refuses_is_left_out_and_the_field_is_still_asked(field):
    # A client would prefill it, and the form would refuse the prefilled answer.
    schema = {"type": "object", "properties": {"f": field}}
    first = asked("typed_from_input", {"value": schema})

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
def test_a_field_with_other_keywords_makes_the_question_unaskable(field):
    assert unaskable(_ask_form({"f": field}))


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
def test_the_length_range_and_count_bounds_are_allowed_only_where_they_apply(field):
    assert unaskable(_ask_form({"f": field}))


def test_a_form_has_1_to_100_fields():
    field = {"type": "string"}

    assert unaskable(_ask_form({}))
    assert _ask_form({"f": field})["resultType"] == "input_required"
    assert _ask_form({f"f{i}": field for i in range(100)})["resultType"] == "input_required"
    assert unaskable(_ask_form({f"f{i}": field for i in range(101)}))


def test_a_form_schema_larger_than_1_mib_is_unaskable():
    big = {"type": "string", "description": "x" * (1024 * 1024)}

    assert unaskable(_ask_form({"f": big}))


def _utf8_size(schema: dict) -> int:
    return len(json.dumps(schema, ensure_ascii=False, separators=(",", ":")).encode())


def test_a_form_schema_of_at_most_1_mib_counts_the_utf_8_bytes_of_its_compact_json():
    # Non-ASCII text counts its UTF-8 bytes (2 for an é), not the 6 of a \u00e9 escape.
    def field(size: int) -> dict:
        empty = _utf8_size({"type": "object", "properties": {"f": {"type": "string", "description": ""}}})
        room = size - empty
        return {"type": "string", "description": "é" * (room // 2) + "x" * (room % 2)}

    first = _ask_form({"f": field(1024 * 1024)})

    assert first["resultType"] == "input_required"
    assert _utf8_size(first["inputRequests"][only_key(first)]["params"]["requestedSchema"]) == 1024 * 1024
    assert unaskable(_ask_form({"f": field(1024 * 1024 + 1)}))


def test_a_schema_that_refers_outside_itself_is_unaskable():
    assert unaskable(_ask_form({"f": {"$ref": "https://example.com/schema.json"}}))


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
def test_a_form_that_asks_for_passwords_keys_tokens_or_payment_credentials_is_unaskable(properties):
    assert unaskable(_ask_form(properties))


def test_a_form_whose_fields_only_look_like_credentials_is_asked():
    # Names are read as words: a secretary, a spinner or a count of tokens asks for no credential.
    properties = {
        name: {"type": "string"}
        for name in ("name", "email", "region", "description", "secretary", "spinner", "keyboard", "passenger")
    } | {name: {"type": "integer"} for name in ("tokens_used", "max_tokens", "token_count")}

    first = _ask_form(properties)

    assert set(first["inputRequests"][only_key(first)]["params"]["requestedSchema"]["properties"]) == set(properties)
