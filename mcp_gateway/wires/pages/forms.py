"""A round's questions as one HTML form, and the form's POST as the round's answers.

Each question's requestedSchema (a flat 2026-07-28 form: strings, numbers, integers, booleans and
choices) becomes HTML fields; a URL question becomes a link out. The POST becomes an
`inputResponses` map, keyed as the round asks, which the core checks as it checks any client's
(`questions.checked_resume_values`): a value is parsed only as far as its field's type says
(a number field's text that is no number is sent as the text), so what a person gets wrong is
refused with the message a client's answer would get.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from django.http import QueryDict

# The buttons of the form: accept every question, or decline or cancel them all.
ACTIONS = ("accept", "decline", "cancel")
# Past this, a text field's default is edited in a text area (a review's arguments, say).
LONG_TEXT = 80


@dataclass
class Option:
    value: str
    label: str
    checked: bool = False


@dataclass
class Field:
    name: str
    label: str
    widget: str  # text, textarea, email, url, date, number, radio, checkbox-list, yes-no
    required: bool
    description: str = ""
    value: str = ""
    options: list[Option] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class Question:
    key: str
    number: int
    message: str
    mode: str  # form or url
    fields: list[Field] = field(default_factory=list)
    url: str = ""
    host: str = ""
    error: str = ""


def _html_name(number: int, position: int) -> str:
    # Keys and field names are the agent's text: the form names fields by position instead.
    return f"q{number}-f{position}"


def _choices(prop: dict[str, Any]) -> list[tuple[Any, str]] | None:
    """A field's choices as (value, label), from enum (with enumNames) or oneOf consts."""
    if isinstance(prop.get("enum"), list):
        names = prop.get("enumNames")
        labels = names if isinstance(names, list) and len(names) == len(prop["enum"]) else prop["enum"]
        return [(value, str(label)) for value, label in zip(prop["enum"], labels, strict=True)]
    if isinstance(prop.get("oneOf"), list):
        return [(o.get("const"), str(o.get("title", o.get("const")))) for o in prop["oneOf"] if isinstance(o, dict)]
    return None


def _item_choices(items: Any) -> list[tuple[Any, str]]:
    if not isinstance(items, dict):
        return []
    if isinstance(items.get("enum"), list):
        return [(value, str(value)) for value in items["enum"]]
    options = items.get("anyOf", items.get("oneOf"))
    if isinstance(options, list):
        return [(o.get("const"), str(o.get("title", o.get("const")))) for o in options if isinstance(o, dict)]
    return []


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _field(name: str, html_name: str, prop: dict[str, Any], required: bool, sent: QueryDict | None) -> Field:
    label = str(prop.get("title") or name)
    description = str(prop.get("description") or "")
    default = prop.get("default")
    kind = prop.get("type")
    f = Field(html_name, label, "text", required, description)
    if kind == "array":
        chosen = sent.getlist(html_name) if sent is not None else [_as_text(v) for v in default or []]
        f.widget = "checkbox-list"
        f.options = [Option(_as_text(v), label, _as_text(v) in chosen) for v, label in _item_choices(prop.get("items"))]
        return f
    if kind == "boolean":
        value = sent.get(html_name, "") if sent is not None else _as_text(default)
        f.widget = "yes-no"
        f.options = [Option("true", "Yes", value == "true"), Option("false", "No", value == "false")]
        return f
    if (choices := _choices(prop)) is not None:
        value = sent.get(html_name, "") if sent is not None else _as_text(default)
        f.widget = "radio"
        f.options = [Option(_as_text(v), label, _as_text(v) == value) for v, label in choices]
        return f
    f.value = sent.get(html_name, "") if sent is not None else _as_text(default)
    if kind in ("number", "integer"):
        f.widget = "number"
        f.attrs = {"step": "1" if kind == "integer" else "any"}
        for keyword, attr in (("minimum", "min"), ("maximum", "max")):
            if isinstance(prop.get(keyword), int | float):
                f.attrs[attr] = prop[keyword]
        return f
    f.widget = {"email": "email", "uri": "url", "date": "date"}.get(str(prop.get("format")), "text")
    if f.widget == "text" and ("\n" in f.value or len(f.value) > LONG_TEXT):
        f.widget = "textarea"
    for keyword, attr in (("minLength", "minlength"), ("maxLength", "maxlength")):
        if isinstance(prop.get(keyword), int):
            f.attrs[attr] = prop[keyword]
    if prop.get("format") == "date-time":
        f.attrs["placeholder"] = "2026-12-31T17:00:00Z"
    return f


def _fields_of(params: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """A form question's required field names and its fields, by name."""
    schema = params.get("requestedSchema")
    schema = schema if isinstance(schema, dict) else {}
    required, properties = schema.get("required"), schema.get("properties")
    return (required if isinstance(required, list) else []), (properties if isinstance(properties, dict) else {})


def questions_of(requests: dict[str, Any], sent: QueryDict | None = None) -> list[Question]:
    """The round's questions (its outcome's `requests`) as the page shows them, filled with what
    was `sent` when the form comes back with an error."""
    shown = []
    for number, (key, request) in enumerate(requests.items()):
        params = request.get("params", {})
        q = Question(key, number, str(params.get("message", "")), params.get("mode", "form"))
        if q.mode == "url":
            q.url = str(params.get("url", ""))
            q.host = urlsplit(q.url).hostname or ""
        else:
            required, properties = _fields_of(params)
            for position, (name, prop) in enumerate(properties.items()):
                html_name = _html_name(number, position)
                q.fields.append(_field(name, html_name, prop if isinstance(prop, dict) else {}, name in required, sent))
        shown.append(q)
    return shown


def _number(text: str, integer: bool) -> Any:
    """The text as the number it spells, or the text itself, which the check then refuses as a
    client's string would be."""
    try:
        return int(text)
    except ValueError:
        pass
    if integer:
        return text
    try:
        value = float(text)
    except ValueError:
        return text
    return value if math.isfinite(value) else text


def _value(prop: dict[str, Any], html_name: str, sent: QueryDict) -> tuple[bool, Any]:
    """(whether the field was answered, its value)."""
    kind = prop.get("type")
    if kind == "array":
        values = sent.getlist(html_name)
        choices = {_as_text(v): v for v, _ in _item_choices(prop.get("items"))}
        return True, [choices.get(v, v) for v in values]
    text = sent.get(html_name, "")
    if text == "":
        return False, None
    if kind == "boolean":
        return True, {"true": True, "false": False}.get(text, text)
    if (options := _choices(prop)) is not None:
        return True, {_as_text(v): v for v, _ in options}.get(text, text)
    if kind in ("number", "integer"):
        return True, _number(text.strip(), kind == "integer")
    return True, text


def responses_of(requests: dict[str, Any], sent: QueryDict) -> dict[str, Any]:
    """The POST as inputResponses: every question answered with the button pressed (`action`);
    an accepted form with the fields filled in (one left empty is not sent, as a client leaves
    out a field its user skipped)."""
    action = sent.get("action", "")
    responses: dict[str, Any] = {}
    for number, (key, request) in enumerate(requests.items()):
        params = request.get("params", {})
        if action != "accept" or params.get("mode", "form") != "form":
            responses[key] = {"action": action}
            continue
        _, properties = _fields_of(params)
        content = {}
        for position, (name, prop) in enumerate(properties.items()):
            answered, value = _value(prop if isinstance(prop, dict) else {}, _html_name(number, position), sent)
            if answered:
                content[name] = value
        responses[key] = {"action": "accept", "content": content}
    return responses
