"""Property tests of typed input (docs/rules.md, "Ask for typed input"), without a server: whatever
type or JSON schema an agent author gives as response_schema, `form_schemas.form_from_schema` makes
a form the 2026-07-28 revision allows, whose every admitted answer validates back into the agent's
type (checked with pydantic's own TypeAdapter), or refuses it as Unaskable, never with another
exception; and an answer in a format the form names is checked."""

from __future__ import annotations

import datetime
import json
import re
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from langgraph.types import Interrupt
from pydantic import TypeAdapter, create_model

from mcp_gateway.calls import form_schemas, questions, review  # noqa: F401  (review registers its question kind)
from mcp_gateway.calls.form_schemas import Unaskable
from tests.schema_strategies import (
    FAST,
    MANY,
    PLAIN_NAMES,
    SENSITIVE_NAMES,
    SENSITIVE_TITLES,
    agent_types,
    answers_for,
    asks_for_a_secret,
    assert_valid_form,
    json_values,
    schema_like,
)

# --- typed response schemas: a valid form whose answers are the agent's type, or Unaskable ---------


@MANY
@given(st.data())
def test_a_response_schema_type_becomes_a_valid_form_whose_answers_validate_into_the_type_or_is_unaskable(data):
    kind = data.draw(agent_types())
    adapter = TypeAdapter(kind)
    response_schema = adapter.json_schema()

    try:
        form = form_schemas.form_from_schema(response_schema)
    except Unaskable:
        event("unaskable")
        return
    event("asked and answered")
    assert not asks_for_a_secret(response_schema), response_schema
    assert_valid_form(form.schema)

    # The same question through the round builder, and an answer back through the resume map.
    interrupt = Interrupt(value="Fill this in.", id="i-1", response_schema=response_schema)
    round_ = questions.build_round((interrupt,))
    ((key, request),) = round_["requests"].items()
    assert request["params"]["requestedSchema"] == form.schema
    content = data.draw(answers_for(form.schema))
    assert form_schemas.content_error(form.schema, content) is None, content
    values = questions.resume_values(round_, {key: {"action": "accept", "content": json.loads(json.dumps(content))}})
    assert values == {"i-1": content[form_schemas.RESPONSE_FIELD] if form.wrapped else content}
    # What LangGraph does with the resume value: validate it against the agent's own type.
    adapter.validate_python(values["i-1"])


@FAST
@given(st.sampled_from(SENSITIVE_NAMES), st.sampled_from(PLAIN_NAMES), st.sampled_from([str, int, str | None]))
def test_a_form_that_asks_for_a_password_key_or_payment_detail_is_refused(secret, plain, kind):
    model = create_model("Login", **{plain: (str, ...), secret: (kind, ...)})
    with pytest.raises(Unaskable, match="password, key, token or payment"):
        form_schemas.form_from_schema(TypeAdapter(model).json_schema())


@FAST
@given(st.sampled_from(SENSITIVE_TITLES), st.sampled_from(PLAIN_NAMES), st.sampled_from(["title", "description"]))
def test_a_field_whose_title_or_description_asks_for_a_secret_is_refused(label, name, where):
    schema = {"type": "object", "properties": {name: {"type": "string", where: label}}}
    with pytest.raises(Unaskable, match="password, key, token or payment"):
        form_schemas.form_from_schema(schema)


@MANY
@given(st.one_of(schema_like(), json_values))
def test_any_json_response_schema_is_a_valid_form_or_unaskable(response_schema):
    try:
        form = form_schemas.form_from_schema(response_schema)
    except Unaskable:
        return
    assert_valid_form(form.schema)


@FAST
@given(st.integers(2, 60))
def test_schemas_that_refer_to_each_other_twice_over_end_quickly(depth):
    defs = {
        f"D{i}": {
            "type": "object",
            "properties": {"a": {"$ref": f"#/$defs/D{i + 1}"}, "b": {"$ref": f"#/$defs/D{i + 1}"}},
        }
        for i in range(depth)
    }
    defs[f"D{depth}"] = {"type": "string"}
    with pytest.raises(Unaskable):
        form_schemas.form_from_schema({"$ref": "#/$defs/D0", "$defs": defs})


def test_a_schema_nested_too_deeply_for_python_is_unaskable():
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(5000):
        schema = {"type": "object", "properties": {"a": schema}}
    with pytest.raises(Unaskable):
        form_schemas.form_from_schema(schema)


# --- answers in a format the form names are checked ------------------------------------------------


@FAST
@given(st.text(max_size=40))
def test_a_date_time_or_uri_answer_that_is_not_one_is_refused_by_the_form_check(text):
    schema = {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}}}
    if form_schemas.content_error(schema, {"when": text}) is None:
        TypeAdapter(datetime.datetime).validate_python(text)
    uri = {"type": "object", "properties": {"url": {"type": "string", "format": "uri"}}}
    if form_schemas.content_error(uri, {"url": text}) is None:
        # An RFC 3986 URI: a scheme and a colon, then a hier-part that may be empty ("urn:" is one).
        assert re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", text)
