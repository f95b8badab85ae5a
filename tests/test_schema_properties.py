"""Property tests of the schema side (hardening), without a server: whatever type or
JSON schema an agent author gives as response_schema, and whatever a client answers,
`form_schemas.form_from_schema`, `questions.build_round` and `questions.resume_values` either work or
refuse in their documented way (Unaskable, InvalidAnswer), never with another exception, and never
produce a form the 2026-07-28 revision forbids.

Answers are generated from the form by a small generator (`answers_for`), so "every answer the form
admits validates back into the agent's type" is checked with pydantic's own TypeAdapter."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import keyword
import re
import types
import typing
from typing import Annotated, Any, Literal

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from langgraph.types import Interrupt
from mcp_types._v2026_07_28 import ElicitRequestFormParams, ElicitRequestURLParams, PrimitiveSchemaDefinition
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model
from typing_extensions import TypedDict

from mcp_gateway import form_schemas, questions, review  # noqa: F401  (review registers its question kind)
from mcp_gateway.form_schemas import Unaskable

FAST = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MANY = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PRIMITIVE_MODELS = typing.get_args(PrimitiveSchemaDefinition)
SENSITIVE_NAMES = [
    "password",
    "api_key",
    "access_token",
    "card_number",
    "cvv",
    "pin",
    "iban",
    "private_key",
    "passphrase",
    "auth_token",
    "security_code",
    "credit_card",
]
SENSITIVE_TITLES = ["Your password", "API key", "Credit card", "Bank IBAN", "PIN", "Bearer token", "Secret"]
PLAIN_NAMES = [
    "name",
    "region",
    "replicas",
    "note",
    "colour",
    "count",
    "when",
    "url",
    "choice",
    "tags",
    "spinner",
    "passage",
    "opinion",
    "keyboard",
]


# --- what a valid form is -----------------------------------------------------------------------------


def exact_primitive(prop: dict[str, Any]) -> bool:
    """The field is one of the revision's shapes and carries nothing that shape lacks."""
    for model in PRIMITIVE_MODELS:
        try:
            parsed = model.model_validate(prop)
        except Exception:
            continue
        if parsed.model_dump(mode="json", by_alias=True, exclude_unset=True) == prop:
            return True
    return False


def assert_valid_form(schema: dict[str, Any]) -> None:
    assert set(schema) <= {"type", "properties", "required"}, schema
    assert schema["type"] == "object"
    assert 1 <= len(schema["properties"]) <= form_schemas.MAX_FIELDS
    assert set(schema.get("required", [])) <= set(schema["properties"])
    ElicitRequestFormParams.model_validate({"message": "m", "mode": "form", "requestedSchema": schema})
    for name, prop in schema["properties"].items():
        assert exact_primitive(prop), (name, prop)
        assert not any(form_schemas.is_sensitive(prop.get(k)) for k in ("title", "description")), (name, prop)
        assert not form_schemas.is_sensitive(name), (name, prop)
    text = json.dumps(schema, allow_nan=False)
    assert "$ref" not in text and 'anyOf": [{"type"' not in text
    assert len(text) <= form_schemas.MAX_SCHEMA_BYTES


# --- answers a form admits -------------------------------------------------------------------------


def _string(prop: dict[str, Any]) -> st.SearchStrategy[str]:
    fmt = prop.get("format")
    if fmt == "date":
        return st.dates().map(lambda d: d.isoformat())
    if fmt == "date-time":
        zones = st.sampled_from([datetime.UTC, datetime.timezone(datetime.timedelta(hours=-5, minutes=-30))])
        return st.datetimes(timezones=zones).map(lambda d: d.isoformat())
    if fmt == "email":
        return st.from_regex(r"[a-z]{1,8}@example\.(com|org)", fullmatch=True)
    if fmt == "uri":
        return st.from_regex(r"https://[a-z]{1,10}\.example/[a-z0-9]{0,8}", fullmatch=True)
    low, high = prop.get("minLength", 0), prop.get("maxLength")
    assume(high is None or high >= low)
    return st.text(min_size=low, max_size=high if high is not None else max(low, 20))


def _number(prop: dict[str, Any]) -> st.SearchStrategy[Any]:
    low, high = prop.get("minimum"), prop.get("maximum")
    assume(low is None or high is None or low <= high)
    if prop["type"] == "integer":
        ints = st.integers(
            min_value=None if low is None else int(-(-low // 1)), max_value=None if high is None else int(high // 1)
        )
        # 2.0 is an integer to JSON Schema, and pydantic's int takes it (within 2**53: past that
        # pydantic refuses a float for an int, and LangGraph's validation refuses the answer).
        return ints | ints.filter(lambda n: abs(n) < 2**53).map(float)
    return st.floats(min_value=low, max_value=high, allow_nan=False, allow_infinity=False) | st.integers(
        min_value=None if low is None else int(-(-low // 1)), max_value=None if high is None else int(high // 1)
    )


def _field_value(prop: dict[str, Any]) -> st.SearchStrategy[Any]:
    if "enum" in prop:
        return st.sampled_from(prop["enum"])
    if "oneOf" in prop:
        return st.sampled_from([o["const"] for o in prop["oneOf"]])
    kind = prop["type"]
    if kind == "string":
        return _string(prop)
    if kind in ("integer", "number"):
        return _number(prop)
    if kind == "boolean":
        return st.booleans()
    items = prop["items"]
    choices = items.get("enum") or [o["const"] for o in items.get("anyOf", [])]
    low, high = prop.get("minItems", 0), prop.get("maxItems", len(choices))
    assume(low <= min(high, len(choices)))
    return st.lists(st.sampled_from(choices), min_size=low, max_size=min(high, len(choices)), unique=True)


@st.composite
def answers_for(draw, schema: dict[str, Any]) -> dict[str, Any]:
    required = set(schema.get("required", []))
    content = {}
    for name, prop in schema["properties"].items():
        if name in required or draw(st.booleans()):
            content[name] = draw(_field_value(prop))
    return content


# --- agent types ---------------------------------------------------------------------------------------

Colour = enum.Enum("Colour", {"RED": "red", "GREEN": "green", "BLUE": "blue"})
Level = enum.IntEnum("Level", {"LOW": 1, "HIGH": 2})


class Inner(BaseModel):
    x: int


_words = st.sampled_from(["a", "b", "north", "south", "Ada", "x y", "é"])
# Types a form can ask for ...
_askable = st.one_of(
    st.sampled_from([str, int, float, bool, datetime.date, datetime.datetime, Colour]),
    st.lists(_words, min_size=1, max_size=4, unique=True).map(lambda ws: Literal[tuple(ws)]),
    st.lists(_words, min_size=1, max_size=4, unique=True).map(lambda ws: list[Literal[tuple(ws)]]),
    st.tuples(st.integers(-5, 5), st.integers(0, 10)).map(lambda t: Annotated[int, Field(ge=t[0], le=t[0] + t[1])]),
    st.integers(-5, 5).map(lambda n: Annotated[int, Field(ge=n)]),
    st.floats(-10, 10).map(lambda n: Annotated[float, Field(ge=n)]),
    st.tuples(st.integers(0, 5), st.integers(0, 5)).map(
        lambda t: Annotated[str, Field(min_length=t[0], max_length=t[0] + t[1])]
    ),
    st.lists(_words, min_size=1, max_size=3, unique=True).map(
        lambda ws: Annotated[list[Literal[tuple(ws)]], Field(min_length=1)]
    ),
)
# ... and types it cannot (nested, unions, sets, patterns, exclusive bounds, int choices, ...).
_unaskable = st.one_of(
    st.sampled_from(
        [datetime.time, Level, Inner, list[str], list[int], dict[str, int], set[str], bytes, type(None), Any]
    ),
    st.lists(st.integers(0, 9), min_size=1, max_size=3, unique=True).map(lambda ns: Literal[tuple(ns)]),
    st.integers(-5, 5).map(lambda n: Annotated[int, Field(gt=n)]),
    st.just(Annotated[str, Field(pattern=r"^[a-z]+$")]),
    st.just(Annotated[int, Field(multiple_of=2)]),
    st.tuples(_askable, _askable).map(lambda t: t[0] | t[1] if all(isinstance(x, type) for x in t) else Inner),
)
field_types = st.one_of(_askable, _askable, _askable.map(lambda t: t | None), _unaskable)


def _usable_name(name: str) -> bool:
    """A name create_model, TypedDict and make_dataclass all take."""
    return not (name.endswith("_") or name.startswith("model_") or hasattr(BaseModel, name) or keyword.iskeyword(name))


field_names = st.one_of(
    st.sampled_from(PLAIN_NAMES),
    st.sampled_from(SENSITIVE_NAMES),
    st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True).filter(_usable_name),
)


@st.composite
def fields(draw) -> dict[str, tuple[Any, Any]]:
    names = draw(st.lists(field_names, min_size=1, max_size=4, unique=True))
    spec = {}
    for name in names:
        kind = draw(field_types)
        info = Field(title=draw(st.sampled_from(SENSITIVE_TITLES))) if draw(st.integers(0, 9)) == 0 else Field()
        optional = typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in typing.get_args(kind)
        if optional and draw(st.booleans()):
            info = Field(default=None, title=info.title)
        spec[name] = (kind, info)
    return spec


@st.composite
def agent_types(draw) -> Any:
    spec = draw(fields())
    shape = draw(st.sampled_from(["model", "forbid", "typeddict", "partial", "dataclass", "bare"]))
    if shape == "model":
        return create_model("Answer", **spec)
    if shape == "forbid":
        return create_model("Answer", __config__=ConfigDict(extra="forbid"), **spec)
    if shape in ("typeddict", "partial"):
        return TypedDict("Answer", {n: t for n, (t, _) in spec.items()}, total=shape == "typeddict")
    if shape == "dataclass":
        required = [(n, t) for n, (t, info) in spec.items() if info.default is not None or info.is_required()]
        return dataclasses.make_dataclass("Answer", required)
    return next(iter(spec.values()))[0]


def _sensitive(response_schema: dict[str, Any]) -> bool:
    """Does the (resolved) schema name a field that asks for a secret?"""
    properties = response_schema.get("properties") or {}
    for name, prop in properties.items():
        if form_schemas.is_sensitive(name):
            return True
        if isinstance(prop, dict) and any(form_schemas.is_sensitive(prop.get(k)) for k in ("title", "description")):
            return True
    return False


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
    assert not _sensitive(response_schema), response_schema
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


# --- any JSON as response_schema: a valid form or Unaskable, nothing else --------------------------------

KEYWORDS = [
    "type",
    "properties",
    "required",
    "$defs",
    "definitions",
    "$ref",
    "anyOf",
    "oneOf",
    "enum",
    "items",
    "format",
    "title",
    "description",
    "default",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "const",
    "enumNames",
    "additionalProperties",
    "pattern",
    "exclusiveMinimum",
]
TYPES = ["object", "string", "integer", "number", "boolean", "array", "null"]
json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 200),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(
        TYPES
        + [
            "email",
            "uri",
            "date",
            "date-time",
            "uuid",
            "#/$defs/A",
            "#/definitions/A",
            "#/$defs/missing",
            "https://example.com/s.json",
            "password",
            "a",
        ]
    ),
    st.text(max_size=6),
)
json_values = st.recursive(
    json_leaves,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(KEYWORDS) | st.sampled_from(["A", "a", "b", "password"]), inner, max_size=5)
    ),
    max_leaves=12,
)


@st.composite
def schema_like(draw) -> dict[str, Any]:
    """Mostly object schemas with field-ish properties, mutated at random."""
    field = st.fixed_dictionaries(
        {"type": st.sampled_from(TYPES)},
        optional={
            k: json_values
            for k in (
                "enum",
                "format",
                "title",
                "default",
                "minimum",
                "items",
                "anyOf",
                "oneOf",
                "maxLength",
                "$ref",
                "description",
                "enumNames",
            )
        },
    )
    properties = draw(
        st.dictionaries(
            st.sampled_from(PLAIN_NAMES + SENSITIVE_NAMES[:3]) | st.text(max_size=4), field | json_values, max_size=4
        )
    )
    schema: dict[str, Any] = {
        "type": draw(st.sampled_from(["object", "object", "string", "array"])),
        "properties": properties,
    }
    for key in draw(st.lists(st.sampled_from(KEYWORDS), max_size=4)):
        schema[key] = draw(json_values)
    if draw(st.booleans()):
        schema["$defs"] = {"A": draw(field | json_values), "B": {"$ref": "#/$defs/A"}}
    return schema


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


# --- interrupts written by agent authors: a round or Unaskable; answers: values, End or InvalidAnswer --

GOOD_FIELDS = [
    {"type": "string"},
    {"type": "boolean"},
    {"type": "integer", "minimum": 1, "maximum": 10},
    {"type": "number"},
    {"type": "string", "format": "date"},
    {"type": "string", "enum": ["a", "b"]},
    {"type": "string", "oneOf": [{"const": "a", "title": "A"}]},
    {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}, "maxItems": 2},
    {"type": "string", "maxLength": 3, "title": "Short"},
]
good_form = st.builds(
    lambda props, required: {"type": "object", "properties": props, "required": [n for n in props if n in required]},
    st.dictionaries(st.sampled_from(PLAIN_NAMES), st.sampled_from(GOOD_FIELDS), min_size=1, max_size=3),
    st.sets(st.sampled_from(PLAIN_NAMES)),
)
relay_request = st.fixed_dictionaries(
    {"key": st.sampled_from(["a", "b", "confirm"]) | json_leaves},
    optional={
        "message": st.sampled_from(["Go?", "Name?"]) | json_leaves,
        "mode": st.sampled_from(["form", "url", "other"]) | json_leaves,
        "requested_schema": good_form | schema_like() | json_values,
        "requestedSchema": good_form | schema_like() | json_values,
        "url": st.sampled_from(
            [
                "https://example.com/x",
                "http://localhost:8000/cb",
                "http://example.com",
                "https://[::1",
                "https://u:p@example.com",
                "https://example.com:99999",
                "javascript:alert(1)",
            ]
        )
        | json_leaves,
    },
)
interrupt_values = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["Which region?", "Your name?", "Reset your password?"]),
    json_values,
    st.fixed_dictionaries(
        {
            "type": st.just("mcp_elicitation"),
            "requests": st.lists(relay_request, max_size=3)
            | st.dictionaries(st.text(max_size=3), relay_request, max_size=3)
            | json_values,
        }
    ),
    st.fixed_dictionaries(
        {
            "action_requests": st.lists(
                st.fixed_dictionaries(
                    {
                        "name": st.sampled_from(["send_email", "x"]) | json_leaves,
                        "args": st.dictionaries(st.text(max_size=3), json_values, max_size=3) | json_values,
                    },
                    optional={"description": st.text(max_size=10) | json_leaves},
                ),
                max_size=3,
            )
            | json_values,
            "review_configs": st.lists(
                st.fixed_dictionaries(
                    {
                        "action_name": st.sampled_from(["send_email", "x"]) | json_leaves,
                        "allowed_decisions": st.lists(
                            st.sampled_from(["approve", "edit", "reject", "respond", "x"]), max_size=4
                        )
                        | json_values,
                    }
                ),
                max_size=3,
            )
            | json_values,
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("tool_approval"),
            "name": st.sampled_from(["send_email"]) | json_leaves,
            "args": st.dictionaries(st.text(max_size=3), json_values, max_size=3) | json_values,
        }
    ),
)
# The per-call middleware's own response_schema: a discriminated oneOf of the decisions it allows.
PER_CALL_SCHEMA = {
    "oneOf": [
        {"properties": {"type": {"const": "approve"}}},
        {"properties": {"type": {"const": "reject"}, "message": {"type": "string"}}},
    ]
}


@st.composite
def an_interrupt(draw) -> Interrupt:
    value = draw(interrupt_values)
    if isinstance(value, dict) and value.get("type") == "tool_approval":
        # LangGraph's middleware writes this schema; malformed ones are the xfail test below.
        schema = draw(st.none() | st.just(PER_CALL_SCHEMA))
    else:
        schema = draw(st.none() | good_form | schema_like() | json_values | st.just(PER_CALL_SCHEMA))
    if draw(st.integers(0, 3)) == 0:
        event("a typed question")
        schema = TypeAdapter(draw(agent_types())).json_schema()
    return Interrupt(value=value, id=f"i-{draw(st.integers(0, 10**6))}", response_schema=schema)


interrupts = st.lists(an_interrupt(), min_size=1, max_size=3, unique_by=lambda i: i.id)
answer_values = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"action": st.sampled_from(["accept", "decline", "cancel", "other"])},
        optional={
            "content": st.dictionaries(
                st.sampled_from(["response", "decision", "message", "args", "ok", "name"]),
                json_leaves
                | st.sampled_from(["approve", "edit", "reject", "respond", "{}", '{"to": "x"}', "[1]", "{", "NaN"]),
                max_size=4,
            )
            | json_values
        },
    ),
)


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(interrupts, st.data())
def test_any_interrupts_become_a_round_of_valid_requests_or_unaskable_and_any_answers_resolve_or_are_invalid(
    pending, data
):
    try:
        round_ = questions.build_round(tuple(pending))
    except Unaskable:
        event("unaskable")
        return
    event("asked")
    json.dumps(round_, allow_nan=False)  # stored in a JSON column as is
    for request in round_["requests"].values():
        assert request["method"] == "elicitation/create"
        params = request["params"]
        if params["mode"] == "url":
            ElicitRequestURLParams.model_validate({**params, "elicitationId": "e"})
        else:
            assert_valid_form(params["requestedSchema"])
    keys = list(round_["requests"])
    responses = data.draw(st.dictionaries(st.sampled_from(keys + ["other"]), answer_values, max_size=len(keys) + 1))
    if data.draw(st.booleans()):
        # Answers the form admits, for every key.
        for key, request in round_["requests"].items():
            params = request["params"]
            if params["mode"] == "form":
                responses[key] = {"action": "accept", "content": data.draw(answers_for(params["requestedSchema"]))}
            else:
                responses[key] = {"action": data.draw(st.sampled_from(["accept", "decline", "cancel"]))}
    try:
        values = questions.resume_values(round_, responses)
    except questions.InvalidAnswer as exc:
        event("invalid answer")
        assert isinstance(exc.message, str)
        json.dumps(exc.data)
        return
    if values is None:
        event("an answer missing")
        assert set(round_["requests"]) - set(responses)
        return
    event("resumed")
    if not isinstance(values, questions.End):
        assert set(values) <= {i.id for i in pending}
        json.dumps(values, allow_nan=False)  # a resume value travels as JSON


@pytest.mark.parametrize(
    "schema",
    [{"anyOf": 1.0}, {"properties": True}, {"oneOf": [True]}],
    ids=["anyOf number", "properties true", "branch true"],
)
def test_a_tool_approval_interrupt_with_a_malformed_response_schema_is_unaskable(schema):
    pending = Interrupt(
        value={"type": "tool_approval", "name": "send_email", "args": {}}, id="i-1", response_schema=schema
    )
    with pytest.raises(Unaskable):
        questions.build_round((pending,))


@pytest.mark.parametrize("args", ["[" * 100_000, '{"a":' * 100_000])
def test_an_edit_whose_args_nest_too_deeply_for_python_is_an_invalid_answer(args):
    pending = Interrupt(
        value={
            "action_requests": [{"name": "send_email", "args": {"to": "a"}}],
            "review_configs": [{"action_name": "send_email", "allowed_decisions": ["approve", "edit"]}],
        },
        id="i-1",
    )
    round_ = questions.build_round((pending,))
    (key,) = round_["requests"]
    with pytest.raises(questions.InvalidAnswer):
        questions.resume_values(round_, {key: {"action": "accept", "content": {"decision": "edit", "args": args}}})


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
