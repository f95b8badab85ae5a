"""What the property tests of the schema side share: a valid form under the 2026-07-28 revision
(`assert_valid_form`), the answers a form admits (`answers_for`), the agent types and the
arbitrary JSON they generate (response schemas, interrupt values), and their example budgets."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import keyword
import os
import types
import typing
from typing import Annotated, Any, Literal

from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st
from mcp_types._v2026_07_28 import ElicitRequestFormParams, PrimitiveSchemaDefinition
from pydantic import BaseModel, ConfigDict, Field, create_model
from typing_extensions import TypedDict

from mcp_gateway.calls import form_schemas, questions, review  # noqa: F401  (review registers its question kind)

# `make test` explores each property with every example below; `make test-fast` sets
# PROPERTY_EXAMPLES=quick for a contributor's quick answer: the same properties over a tenth of the
# examples (generating them, not the code under test, is most of these tests' time).
_SCALE = 0.1 if os.environ.get("PROPERTY_EXAMPLES") == "quick" else 1.0


def examples(count: int) -> int:
    return max(20, int(count * _SCALE))


FAST = settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
MANY = settings(max_examples=examples(1500), deadline=None, suppress_health_check=[HealthCheck.too_slow])

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


def asks_for_a_secret(response_schema: dict[str, Any]) -> bool:
    """Does the (resolved) schema name a field that asks for a secret?"""
    properties = response_schema.get("properties") or {}
    for name, prop in properties.items():
        if form_schemas.is_sensitive(name):
            return True
        if isinstance(prop, dict) and any(form_schemas.is_sensitive(prop.get(k)) for k in ("title", "description")):
            return True
    return False


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


# --- interrupt values: forms and relayed requests ----------------------------------------------

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
