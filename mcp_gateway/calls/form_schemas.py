"""Turn an interrupt's response_schema into an MCP elicitation form, and check answers against it.

docs/rules.md, "Form schemas": a form is a flat object whose fields are strings (formats email,
uri, date, date-time), numbers, integers, booleans, single-choice enums or multi-select arrays of
string choices; fields carry only title, description, default and the length/range/count bounds;
1 to 100 fields, at most 1 MiB. Local `$defs` are resolved, optional fields become plain fields,
a default its own field refuses is left out, and the root's title and description are dropped.
The SDK's own PrimitiveSchemaDefinition then checks each field, and a field must be exactly one of
its shapes (no keyword its shape lacks).
"""

from __future__ import annotations

import copy
import json
import re
import typing
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import jsonschema
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import validate_email
from mcp_types._v2026_07_28 import PrimitiveSchemaDefinition
from pydantic import BaseModel, ValidationError
from rfc3986_validator import validate_rfc3986

_PRIMITIVE_MODELS: tuple[type[BaseModel], ...] = typing.get_args(PrimitiveSchemaDefinition)

MAX_FIELDS = 100
MAX_SCHEMA_BYTES = 1024 * 1024
MAX_RESOLVED_NODES = 100_000
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
# The MCP specification forbids asking for passwords, API keys, access tokens or payment
# credentials in a form; send the user to a URL instead. A field's name, title and description are
# read as words (snake_case, kebab-case, camelCase, spaces), so card_cvv and GithubToken are caught
# while "secretary" or "spinner" are not.
SENSITIVE_WORDS = frozenset(
    {
        *("password", "passwd", "pwd", "passphrase", "passcode", "otp", "secret", "secrets"),
        *("credential", "credentials", "apikey", "bearer", "privatekey", "creditcard"),
        *("cvv", "cvv2", "cvc", "cvc2", "iban", "pin"),
    }
)
SENSITIVE_PAIRS = frozenset(
    {
        ("pass", "word"),
        ("pass", "phrase"),
        ("api", "key"),
        ("access", "key"),
        ("private", "key"),
        ("credit", "card"),
        ("debit", "card"),
        ("card", "number"),
        ("card", "no"),
        ("card", "num"),
        ("security", "code"),
    }
)
# "token" is a credential when it ends the text (token, github_token, "Github Token") or follows
# one of these (access_token_value); not when it counts or qualifies something (max_tokens,
# tokens_used, token_count).
TOKEN_QUALIFIERS = frozenset({"access", "refresh", "auth", "oauth", "bearer", "api", "id", "session", "personal"})
_CAMEL = re.compile(r"([a-z0-9])([A-Z])|([A-Z])([A-Z][a-z])")


class Unaskable(Exception):
    """The interrupt cannot become a valid question; the message says why."""


@dataclass(frozen=True)
class Form:
    schema: dict[str, Any]
    # True when the response_schema was not an object: the answer is the one `response` field.
    wrapped: bool


def _resolve(node: Any, defs: dict[str, Any], depth: int = 0, budget: list[int] | None = None) -> Any:
    # Every node counts against one budget, so definitions that refer to each other twice over
    # (2**50 nodes within the depth limit) end quickly.
    budget = [MAX_RESOLVED_NODES] if budget is None else budget
    budget[0] -= 1
    if depth > 50 or budget[0] < 0:
        raise Unaskable("the schema's references are too deep")
    if isinstance(node, list):
        return [_resolve(item, defs, depth + 1, budget) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        ref = node["$ref"]
        match = re.fullmatch(r"#/(?:\$defs|definitions)/([^/]+)", ref) if isinstance(ref, str) else None
        if match is None or match.group(1) not in defs:
            # Never fetched: only references inside the schema itself are followed.
            raise Unaskable(f"the schema refers to {ref!r} outside itself")
        target = _resolve(defs[match.group(1)], defs, depth + 1, budget)
        if not isinstance(target, dict):
            raise Unaskable(f"the schema's {ref!r} is not a schema")
        extra = {k: v for k, v in node.items() if k != "$ref"}
        return {**target, **extra}
    return {k: _resolve(v, defs, depth + 1, budget) for k, v in node.items() if k not in ("$defs", "definitions")}


def _plain(prop: dict[str, Any]) -> dict[str, Any]:
    """An optional field (`anyOf: [X, {"type": "null"}]`) becomes plain X."""
    options = prop.get("anyOf")
    if isinstance(options, list):
        non_null = [o for o in options if o != {"type": "null"}]
        if len(non_null) == 1 and len(non_null) < len(options) and isinstance(non_null[0], dict):
            # The field's own title and description win over those of the type it refers to
            # (Pydantic titles an Optional[Colour] field on the field, Colour on its $defs entry).
            merged = {**non_null[0], **{k: v for k, v in prop.items() if k != "anyOf"}}
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
    if "format" in prop and (not isinstance(prop["format"], str) or prop["format"] not in FORMATS):
        raise Unaskable(f"field {name!r} has format {prop['format']!r}")
    items = prop.get("items")
    if items is not None:
        if not isinstance(items, dict) or set(items) - ITEM_KEYWORDS:
            raise Unaskable(f"field {name!r} is a list of something other than string choices")
    if any(is_sensitive(text) for text in (name, prop.get("title"), prop.get("description"))):
        raise Unaskable(
            f"field {name!r} asks for a password, key, token or payment credential; send the user to a URL instead"
        )
    if not _conforms(prop):
        raise Unaskable(f"field {name!r} is not a string, number, integer, boolean or choice")
    if "default" in prop:
        # Pydantic does not check a default against its own field (Field(default=0, ge=1)): a
        # client would prefill an answer the form refuses. Such a default is left out; the field
        # is still asked.
        field = {k: v for k, v in prop.items() if k != "default"}
        if not jsonschema.Draft202012Validator(field, format_checker=FORMAT_CHECKER).is_valid(prop["default"]):
            return field
    return prop


def _words(text: str) -> list[str]:
    """snake_case, kebab-case, camelCase (APIKey, githubToken) and prose, as lowercase words."""
    return [w for w in re.split(r"[\W_]+", _CAMEL.sub(r"\1\3 \2\4", text).lower()) if w]


def is_sensitive(text: Any) -> bool:
    """Does this field name, title or description ask for a password, key, token or payment credential?"""
    if not isinstance(text, str):
        return False
    words = _words(text)
    pairs = list(zip(words, words[1:], strict=False))
    if SENSITIVE_WORDS.intersection(words) or SENSITIVE_PAIRS.intersection(pairs):
        return True
    return (bool(words) and words[-1] == "token") or any(
        first in TOKEN_QUALIFIERS and second in ("token", "tokens") for first, second in pairs
    )


def _conforms(prop: dict[str, Any]) -> bool:
    """Exactly one of the revision's field shapes: its models ignore keys they do not define, so a
    field must also come back unchanged from the model it validates as (no `enum` on an integer,
    no `minimum` on a boolean, no `title` on a multi-select's items)."""
    for model in _PRIMITIVE_MODELS:
        try:
            parsed = model.model_validate(prop)
        except ValidationError:
            continue
        if parsed.model_dump(mode="json", by_alias=True, exclude_unset=True) == prop:
            return True
    return False


def form_from_schema(response_schema: Any) -> Form:
    """The form for an interrupt's response_schema (a JSON schema). Raises Unaskable."""
    if not isinstance(response_schema, dict):
        raise Unaskable("the response_schema is not a JSON schema")
    if not all(isinstance(response_schema.get(k, {}), dict) for k in ("definitions", "$defs")):
        raise Unaskable("the schema's $defs are not schemas")
    defs = {**response_schema.get("definitions", {}), **response_schema.get("$defs", {})}
    try:
        schema = _resolve(copy.deepcopy(response_schema), defs)
    except RecursionError:
        raise Unaskable("the schema is nested too deeply") from None
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
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        raise Unaskable("the form's required is not a list of field names")
    required = [name for name in required if name in fields]
    form = (
        {"type": "object", "properties": fields, "required": required}
        if required
        else {
            "type": "object",
            "properties": fields,
        }
    )
    try:
        # Only JSON: it is stored in a JSON column and sent as is (no NaN, no U+0000).
        text = json.dumps(form, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
        # "At most 1 MiB" counts the bytes sent: compact UTF-8, not \uXXXX escapes (6 bytes for
        # an é). An unpaired surrogate cannot be encoded, and is no Unicode text either.
        size = len(text.encode())
    except (TypeError, ValueError):
        raise Unaskable("the form's schema is not JSON") from None
    if "\\u0000" in text:
        raise Unaskable("the form's schema contains the character U+0000")
    if size > MAX_SCHEMA_BYTES:
        raise Unaskable("the form's schema is larger than 1 MiB")
    return Form(form, wrapped)


def check_form_schema(schema: Any) -> dict[str, Any]:
    """A relayed requestedSchema must be a form: check it and pass on the form the check built.
    The check resolves $ref and makes optional fields plain, so the schema as relayed could still
    carry $ref or anyOf, which an MCP client cannot render."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise Unaskable("a relayed form's requestedSchema must be an object schema")
    return form_from_schema(schema).schema


# jsonschema checks "date-time" and "uri" with the packages it names for them (rfc3339-validator,
# rfc3986-validator; without them any string would pass), and "email" only for an "@", too weak
# for answers: a dict response_schema has no Pydantic type behind it, so what passes here is what
# the agent gets.
FORMAT_CHECKER = jsonschema.FormatChecker()


@FORMAT_CHECKER.checks("email", raises=DjangoValidationError)
def _is_email(value: object) -> bool:
    # Django's validator: a local part and a domain name (or address literal), not just an "@".
    if isinstance(value, str):
        validate_email(value)
    return True


@FORMAT_CHECKER.checks("uri", raises=ValueError)
def _is_uri(value: object) -> bool:
    """RFC 3986 absolute URI (any scheme, so mailto: and urn: too; Django's URLValidator takes
    only web URLs), with a port a URL can have: urlsplit raises past 65535."""
    if not isinstance(value, str):
        return True
    urlsplit(value).port  # noqa: B018 - raises ValueError on a malformed host or port
    return bool(validate_rfc3986(value, rule="URI"))


def content_error(form_schema: dict[str, Any], content: Any) -> str | None:
    """Why `content` does not fit the form, or None. A real JSON Schema validator decides."""
    if not isinstance(content, dict):
        return "content must be an object"
    validator = jsonschema.Draft202012Validator(form_schema, format_checker=FORMAT_CHECKER)
    error = jsonschema.exceptions.best_match(validator.iter_errors(content))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message
