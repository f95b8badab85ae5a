"""Turn an interrupt's response_schema into an MCP elicitation form, and check answers against it.

Document, "Ask for typed input": a form is a flat object whose fields are strings (formats email,
uri, date, date-time), numbers, integers, booleans, single-choice enums or multi-select arrays of
string choices; fields carry only title, description, default and the length/range/count bounds;
1 to 100 fields, at most 1 MiB. Local `$defs` are resolved, optional fields become plain fields,
and the root's title and description are dropped. The SDK's own PrimitiveSchemaDefinition then
checks each field.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any

import jsonschema
from mcp_types._v2026_07_28 import PrimitiveSchemaDefinition
from pydantic import TypeAdapter, ValidationError

_PRIMITIVE = TypeAdapter(PrimitiveSchemaDefinition)

MAX_FIELDS = 100
MAX_SCHEMA_BYTES = 1024 * 1024
RESPONSE_FIELD = "response"

FIELD_KEYWORDS = frozenset(
    {
        "type",
        "title",
        "description",
        "default",
        "format",
        "enum",
        "enumNames",
        "oneOf",
        "items",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "minItems",
        "maxItems",
    }
)
ITEM_KEYWORDS = frozenset({"type", "enum", "anyOf", "oneOf", "title", "description"})
FORMATS = frozenset({"email", "uri", "date", "date-time"})
# The MCP specification forbids asking for these in a form; send the user to a URL instead.
SENSITIVE = re.compile(
    r"pass(word|wd|phrase)|secret|api[\s_-]?key|access[\s_-]?token|auth[\s_-]?token|bearer|"
    r"private[\s_-]?key|credit[\s_-]?card|card[\s_-]?(number|no)|\bcvv\b|\bcvc\b|security[\s_-]?code|\biban\b|\bpin\b",
    re.IGNORECASE,
)


class Unaskable(Exception):
    """The interrupt cannot become a valid question; the message says why."""


@dataclass(frozen=True)
class Form:
    schema: dict[str, Any]
    # True when the response_schema was not an object: the answer is the one `response` field.
    wrapped: bool

    def answer_value(self, content: dict[str, Any]) -> Any:
        return content[RESPONSE_FIELD] if self.wrapped else content


def _resolve(node: Any, defs: dict[str, Any], depth: int = 0) -> Any:
    if depth > 50:
        raise Unaskable("the schema's references are too deep")
    if isinstance(node, list):
        return [_resolve(item, defs, depth + 1) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        ref = node["$ref"]
        match = re.fullmatch(r"#/(?:\$defs|definitions)/([^/]+)", ref) if isinstance(ref, str) else None
        if match is None or match.group(1) not in defs:
            # Never fetched: only references inside the schema itself are followed.
            raise Unaskable(f"the schema refers to {ref!r} outside itself")
        extra = {k: v for k, v in node.items() if k != "$ref"}
        return {**_resolve(defs[match.group(1)], defs, depth + 1), **extra}
    return {k: _resolve(v, defs, depth + 1) for k, v in node.items() if k not in ("$defs", "definitions")}


def _plain(prop: dict[str, Any]) -> dict[str, Any]:
    """An optional field (`anyOf: [X, {"type": "null"}]`) becomes plain X."""
    options = prop.get("anyOf")
    if isinstance(options, list):
        non_null = [o for o in options if o != {"type": "null"}]
        if len(non_null) == 1 and len(non_null) < len(options):
            merged = {**{k: v for k, v in prop.items() if k != "anyOf"}, **non_null[0]}
            if merged.get("default", 0) is None:
                merged.pop("default")
            return merged
    return prop


def _check_field(name: str, prop: Any) -> dict[str, Any]:
    if not isinstance(prop, dict):
        raise Unaskable(f"field {name!r} is not a schema")
    prop = _plain(prop)
    if extra := sorted(set(prop) - FIELD_KEYWORDS):
        raise Unaskable(f"field {name!r} uses {', '.join(extra)}, which MCP forms do not allow")
    if "format" in prop and prop["format"] not in FORMATS:
        raise Unaskable(f"field {name!r} has format {prop['format']!r}")
    items = prop.get("items")
    if items is not None:
        if not isinstance(items, dict) or set(items) - ITEM_KEYWORDS:
            raise Unaskable(f"field {name!r} is a list of something other than string choices")
    label = " ".join(str(prop.get(k, "")) for k in ("title", "description"))
    if SENSITIVE.search(name) or SENSITIVE.search(label):
        raise Unaskable(
            f"field {name!r} asks for a password, key, token or payment credential; send the user to a URL instead"
        )
    try:
        _PRIMITIVE.validate_python(prop)
    except ValidationError:
        raise Unaskable(f"field {name!r} is not a string, number, integer, boolean or choice") from None
    return prop


def form_from_schema(response_schema: dict[str, Any]) -> Form:
    if not isinstance(response_schema, dict):
        raise Unaskable("the response_schema is not a JSON schema")
    defs = {**response_schema.get("definitions", {}), **response_schema.get("$defs", {})}
    schema = _resolve(copy.deepcopy(response_schema), defs)
    wrapped = schema.get("type") != "object" or "properties" not in schema
    if wrapped:
        field_schema = {k: v for k, v in schema.items() if k != "title"}
        schema = {"type": "object", "properties": {RESPONSE_FIELD: field_schema}, "required": [RESPONSE_FIELD]}
    if extra := sorted(
        set(schema) - {"type", "properties", "required", "title", "description", "additionalProperties"}
    ):
        raise Unaskable(f"the form uses {', '.join(extra)} at its root; a form is a flat object")
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not 1 <= len(properties) <= MAX_FIELDS:
        raise Unaskable(f"a form has 1 to {MAX_FIELDS} fields")
    fields = {name: _check_field(name, prop) for name, prop in properties.items()}
    required = [name for name in schema.get("required", []) if name in fields]
    form = (
        {"type": "object", "properties": fields, "required": required}
        if required
        else {
            "type": "object",
            "properties": fields,
        }
    )
    if len(json.dumps(form)) > MAX_SCHEMA_BYTES:
        raise Unaskable("the form's schema is larger than 1 MiB")
    return Form(form, wrapped)


def check_form_schema(schema: Any) -> dict[str, Any]:
    """A relayed requestedSchema must already be a valid form: check it, but do not rewrite it."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise Unaskable("a relayed form's requestedSchema must be an object schema")
    form_from_schema(schema)
    return schema


def content_error(form_schema: dict[str, Any], content: Any) -> str | None:
    """Why `content` does not fit the form, or None. A real JSON Schema validator decides."""
    if not isinstance(content, dict):
        return "content must be an object"
    validator = jsonschema.Draft202012Validator(form_schema, format_checker=jsonschema.FormatChecker())
    error = jsonschema.exceptions.best_match(validator.iter_errors(content))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message
