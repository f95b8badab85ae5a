"""Review of tool calls (HumanInTheLoopMiddleware): one question per reviewed tool call. One module:
the middlewares' two shapes, the question built from each and the decision read back from each
answer are one mapping, which must stay symmetrical.

docs/rules.md, "Review tool calls". The middleware, in Python or in JavaScript, pauses in one of two
shapes:

- batched (the default): one interrupt per model turn, whose value is
  {"action_requests": [...], "review_configs": [...]}, resumed with {"decisions": [...]},
  one decision per action, in the same order; the JavaScript middleware spells the same value
  and its edit decision in camelCase (see SPELLINGS);
- per call: one interrupt per gated call, whose value is {"type": "tool_approval", "name", "args",
  "description", ...} and whose response_schema is the discriminated oneOf of the decisions the
  call allows; resumed with that one decision. Both middlewares write it in snake_case.

Each reviewed call becomes one form question (decision, message, args), and each answer becomes
the middleware's decision. Answers are checked here, before anything resumes: the batched
middleware raises on a wrong count or a forbidden decision only after interrupt() has saved the
answer, which would poison the thread; per call, the decision is also checked against the
interrupt's response_schema, so an edit that breaks the tool's argument types is refused with a
message that names the field, and no tool runs.

Both shapes, both spellings and the per-call schema check are kept in this one module: they share
the question each reviewed call becomes and the decision each answer becomes.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from ipaddress import IPv4Address, IPv6Address
from typing import Annotated, Any
from uuid import UUID

import jsonschema
import pydantic_core
import referencing
import referencing.exceptions
from langgraph.types import Interrupt
from pydantic import AnyUrl, EmailStr, IPvAnyAddress, StringConstraints, TypeAdapter, ValidationError

from mcp_gateway.calls import questions
from mcp_gateway.calls.form_schemas import Unaskable
from mcp_gateway.calls.questions import End, InvalidAnswer

KIND = "review"
BATCHED = "batched"
PER_CALL = "per_call"


@dataclass(frozen=True)
class Spelling:
    """The key names of a review: of the batched interrupt value, and of the edit decision."""

    actions: str
    configs: str
    action_name: str
    allowed: str
    edited_action: str


SNAKE_CASE = "snake_case"
CAMEL_CASE = "camelCase"
# snake_case: Python's HumanInTheLoopMiddleware in both modes, and LangChain JS's per call ("Keys
# are snake_case, as in Python", libs/langchain/src/agents/middleware/hitl.ts). camelCase: LangChain
# JS's humanInTheLoopMiddleware in batched mode, whose value is {actionRequests, reviewConfigs} and
# whose edit decision is {"type": "edit", "editedAction": {...}}.
SPELLINGS = {
    SNAKE_CASE: Spelling("action_requests", "review_configs", "action_name", "allowed_decisions", "edited_action"),
    CAMEL_CASE: Spelling("actionRequests", "reviewConfigs", "actionName", "allowedDecisions", "editedAction"),
}

# The decisions the form offers, in the order it lists them, with their titles.
DECISION_TITLES = {
    "approve": "Approve",
    "edit": "Edit the arguments",
    "reject": "Reject",
    "respond": "Answer for the tool",
}
MESSAGE_FIELD = {
    "type": "string",
    "title": "Message",
    "description": "Why you reject the call, or the answer to send in its place",
}
ARGS_FIELD = {
    "type": "string",
    "title": "Arguments",
    "description": "The arguments to run the tool with, as a JSON object",
}

# A person edits the prefilled arguments in a text field; past this the form is unusable and
# the question grows towards the 1 MiB form limit, so the call is asked without the edit choice.
MAX_PREFILL_BYTES = 16 * 1024

ARGS_NOT_AN_OBJECT = "Invalid answer: args must be a JSON object"
MESSAGE_REQUIRED = "Invalid answer: a respond decision needs a message"
NOT_ALLOWED = "Invalid answer: this call allows only {allowed}"
DOES_NOT_FIT = "The decision does not fit the tool: {reason}"
ONLY_EDIT_TOO_LARGE = "the arguments of {tool} are too large to prefill, and an edit is the only decision it allows"


# --- the question ---------------------------------------------------------------------------------


def is_review(interrupt: Interrupt) -> bool:
    return _batched_spelling(interrupt.value) is not None or _is_per_call(interrupt.value)


def _batched_spelling(value: Any) -> str | None:
    if isinstance(value, dict):
        for name, spelling in SPELLINGS.items():
            if spelling.actions in value and spelling.configs in value:
                return name
    return None


def _is_per_call(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == "tool_approval"


def build_review(interrupt: Interrupt, prefix: str, taken: Collection[str] = ()) -> tuple[dict, list]:
    """One question per reviewed call, keyed `review-<digest of its question>.<n>`.

    The key is derived from the call's question alone, so a client that calls again from the
    start (as MCPAdapter does to replay its stored answers) gets the same key, in either mode and
    whatever other calls the turn proposes. The gateway's `prefix` is not used: it digests the
    whole interrupt value, which in per-call mode holds the model's tool_call_id, and a model
    gives new ids when the call starts over. `taken` holds the keys
    questions.build_round has already given out in this round, so identical calls pending in
    separate interrupts (per-call mode) still get a question each.
    """
    if _is_per_call(interrupt.value):
        mode, spelling, reviews = PER_CALL, SNAKE_CASE, [_per_call_review(interrupt)]
    else:
        batched = _batched_spelling(interrupt.value)
        assert batched is not None  # only reviews (is_review) are built here
        mode, spelling, reviews = BATCHED, batched, _batched_reviews(interrupt.value, SPELLINGS[batched])
    asked = [_question(**review) for review in reviews]
    requests = [request for request, _ in asked]
    keys: list[str] = []
    for request in requests:
        # Each call's own question, never the batch: MCPAdapter's rerun may propose only some of the
        # earlier calls, and each must still find its stored answer
        # (docs/rules.md, "Answer from a LangChain agent"). Digesting it as a one-item list keeps
        # the keys that a single call was asked under before, so paused calls keep their answers.
        stem = f"review-{questions.digest([request])}."
        # The suffix only separates identical calls, in this interrupt or others in the round.
        keys.append(f"{stem}{1 + sum(1 for key in (*taken, *keys) if key.startswith(stem))}")
    plan = {
        "interrupt": interrupt.id,
        "kind": KIND,
        "keys": keys,
        "mode": mode,
        "spelling": spelling,
        "calls": [call for _, call in asked],
        "response_schema": _checkable(interrupt.response_schema) if mode == PER_CALL else None,
    }
    return dict(zip(keys, requests, strict=True)), [plan]


def _batched_reviews(value: dict[str, Any], spelling: Spelling) -> list[dict[str, Any]]:
    actions, configs = value[spelling.actions], value[spelling.configs]
    if not isinstance(actions, list) or not actions or not isinstance(configs, list):
        raise Unaskable(f"a review needs a non-empty list of {spelling.actions} and a list of {spelling.configs}")
    reviews = []
    for index, action in enumerate(actions):
        if not isinstance(action, dict):
            raise Unaskable("each action request must be an object")
        name = action.get("name")
        # One config per action, in order; matching by name also reads a config list per tool.
        config = configs[index] if index < len(configs) else None
        if not isinstance(config, dict) or config.get(spelling.action_name) != name:
            config = next((c for c in configs if isinstance(c, dict) and c.get(spelling.action_name) == name), None)
        allowed = config.get(spelling.allowed) if config else None
        if not isinstance(allowed, list):
            raise Unaskable(f"the review of {name!r} has no {spelling.allowed}")
        reviews.append(
            {"name": name, "args": action.get("args"), "description": action.get("description"), "allowed": allowed}
        )
    return reviews


def _per_call_review(interrupt: Interrupt) -> dict[str, Any]:
    value = interrupt.value
    return {
        "name": value.get("name"),
        "args": value.get("args"),
        "description": value.get("description"),
        "allowed": _decision_types(interrupt.response_schema),
    }


def _question(name: Any, args: Any, description: Any, allowed: list[Any]) -> tuple[dict, dict]:
    """The elicitation request for one call, and what answering it needs (stored in the plan)."""
    if not isinstance(name, str) or not isinstance(args, dict):
        raise Unaskable("a reviewed tool call needs a tool name and its arguments as an object")
    prefill = _prefill(args)
    decisions = [d for d in DECISION_TITLES if d in allowed and (d != "edit" or prefill is not None)]
    if not decisions:
        if "edit" in allowed:
            raise Unaskable(ONLY_EDIT_TOO_LARGE.format(tool=name))
        raise Unaskable(f"the review of {name!r} allows none of {', '.join(DECISION_TITLES)}")
    properties: dict[str, Any] = {
        "decision": {
            "type": "string",
            "title": "Decision",
            "oneOf": [{"const": d, "title": DECISION_TITLES[d]} for d in decisions],
        }
    }
    if "reject" in decisions or "respond" in decisions:
        properties["message"] = dict(MESSAGE_FIELD)
    if "edit" in decisions:
        properties["args"] = {**ARGS_FIELD, "default": prefill}
    schema = {"properties": properties, "required": ["decision"], "type": "object"}
    message = description if isinstance(description, str) and description.strip() else f"Run {name}?"
    return questions.form_request(message, schema), {"name": name, "args": args, "decisions": decisions}


def _prefill(args: dict[str, Any]) -> str | None:
    """The model's arguments as compact JSON, or None when they cannot be prefilled."""
    try:
        text = json.dumps(args, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return None
    return text if len(text.encode()) <= MAX_PREFILL_BYTES else None


# --- the per-call response_schema -----------------------------------------------------------------


def _decision_types(schema: Any) -> list[str]:
    """The decisions a per-call schema allows: the `type` const of each oneOf branch, or of the
    schema itself when the call allows a single decision."""
    if not isinstance(schema, dict):
        raise Unaskable("a tool_approval interrupt needs the response_schema that lists its decisions")
    types = []
    branches = schema.get("oneOf") or schema.get("anyOf") or [schema]
    if not isinstance(branches, list):
        raise Unaskable("a tool_approval response_schema's oneOf must be a list")
    for branch in branches:
        if isinstance(branch, dict) and isinstance(branch.get("$ref"), str):
            branch = _pointer(schema, branch["$ref"])
        properties = branch.get("properties") if isinstance(branch, dict) else None
        kind = properties.get("type") if isinstance(properties, dict) else None
        if not isinstance(kind, dict):
            continue
        # Pydantic writes a Literal as a const; older versions as a one-value enum.
        enum = kind.get("enum")
        value = kind.get("const") or (enum[0] if isinstance(enum, list) and enum else None)
        if isinstance(value, str):
            types.append(value)
    return types


def _pointer(schema: dict[str, Any], ref: str) -> dict[str, Any] | None:
    """A `#/...` reference inside `schema`; anything else is not followed."""
    if not ref.startswith("#/"):
        return None
    node: Any = schema
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def _checkable(schema: Any) -> dict[str, Any] | None:
    """The schema to check decisions against, or None when it refers to a document outside itself:
    references are never fetched, so such a question is asked without the check."""
    return schema if isinstance(schema, dict) and not _refers_outside(schema) else None


REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")


def _refers_outside(node: Any) -> bool:
    if isinstance(node, dict):
        return any(
            (key in REFERENCES and not str(value).startswith("#")) or _refers_outside(value)
            for key, value in node.items()
        )
    if isinstance(node, list):
        return any(_refers_outside(item) for item in node)
    return False


# A decision must fail here whenever LangGraph would refuse it: LangGraph refuses it only after the
# round's other interrupts have resumed, so their tools would run while the client gets -32602
# (docs/rules.md, "Review tool calls": an edit that breaks the tool's argument types is -32602, and
# no tool runs). LangGraph checks with Pydantic, which enforces two things jsonschema does not:
# - the formats Pydantic writes for the types it parses (jsonschema only notes a format, and its
#   own checkers refuse what Pydantic reads, such as a date-time without a time zone), checked
#   here by Pydantic itself;
# - `pattern`, in Rust's regex syntax (`\p{L}`, and `$` only at the very end), not Python's.
PYDANTIC_FORMATS: dict[str, Any] = {
    "date-time": datetime,
    "date": date,
    "time": time,
    "duration": timedelta,
    "uuid": UUID,
    "uri": AnyUrl,
    "email": EmailStr,
    "ipv4": IPv4Address,
    "ipv6": IPv6Address,
    "ipvanyaddress": IPvAnyAddress,
}


def _format_checker() -> jsonschema.FormatChecker:
    checker = jsonschema.FormatChecker(formats=())
    for name, type_ in PYDANTIC_FORMATS.items():
        try:
            adapter = TypeAdapter(type_)
        except ImportError:  # EmailStr needs email-validator; without it no tool can declare one
            continue
        checker.checks(name, raises=ValidationError)(functools.partial(_parses, adapter))
    return checker


def _parses(adapter: TypeAdapter, instance: Any) -> bool:
    if isinstance(instance, str):
        adapter.validate_python(instance)  # a parsed timedelta(0) is falsy: only raising refuses
    return True


PYDANTIC_FORMAT_CHECKER = _format_checker()


@functools.lru_cache(maxsize=256)
def _pattern_adapter(pattern: str) -> TypeAdapter | None:
    try:
        return TypeAdapter(Annotated[str, StringConstraints(pattern=pattern)])
    except pydantic_core.SchemaError:  # not Rust's syntax (a lookaround in a JSON-schema tool's schema)
        return None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[jsonschema.ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    adapter = _pattern_adapter(pattern)
    if adapter is None:
        matches = re.search(pattern, instance) is not None
    else:
        try:
            adapter.validate_python(instance)
            matches = True
        except ValidationError:
            matches = False
    if not matches:
        yield jsonschema.ValidationError(f"{json.dumps(instance)} does not match {json.dumps(pattern)}")


@functools.cache
def _validator_class(cls: type) -> type:
    return jsonschema.validators.extend(cls, {"pattern": _pattern})


def _check_fits(schema: dict[str, Any], decision: dict[str, Any], key: str) -> None:
    cls = _validator_class(jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator))
    # An empty registry: references resolve inside the schema or not at all (jsonschema's default
    # registry would fetch a remote one).
    validator = cls(schema, registry=referencing.Registry(), format_checker=PYDANTIC_FORMAT_CHECKER)
    # Check only the branch the decision's type names, as LangGraph's discriminated union does, so
    # the error is about that decision rather than about every other branch.
    mapping = (schema.get("discriminator") or {}).get("mapping") or {}
    if decision["type"] in mapping:
        validator = validator.evolve(schema={"$ref": mapping[decision["type"]]})
    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(decision))
    except (
        referencing.exceptions.Unresolvable,
        jsonschema.exceptions.SchemaError,
        jsonschema.exceptions.UnknownType,
        # A pattern neither Pydantic's regex engine nor Python's re can compile, or one under
        # `patternProperties`, which jsonschema matches with re.
        re.error,
    ):
        return  # a reference to nothing or a broken schema: the middleware's own validation decides
    if error is not None:
        raise InvalidAnswer(
            DOES_NOT_FIT.format(reason=_reason(error)), {"key": key, "path": "/".join(map(str, error.absolute_path))}
        )


def _reason(error: jsonschema.ValidationError) -> str:
    """jsonschema's message with the values written as JSON (it uses Python reprs)."""
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = next((p for p in error.validator_value if p not in error.instance), None)
        if missing is not None:
            return f"{json.dumps(missing)} is a required property"
    if error.validator == "type":
        expected = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        return f"{json.dumps(error.instance)} is not of type {', '.join(map(json.dumps, expected))}"
    if error.validator == "const":
        return f"{json.dumps(error.validator_value)} was expected"
    if error.validator == "enum":
        return f"{json.dumps(error.instance)} is not one of {json.dumps(error.validator_value)}"
    if error.validator == "format":
        return f"{json.dumps(error.instance)} is not a {json.dumps(error.validator_value)}"
    return error.message


# --- answers to decisions -------------------------------------------------------------------------


def resolve_review(plan: dict[str, Any], answers: dict[str, Any], requests: dict[str, Any]) -> Any:
    # A round asked before the camelCase spelling was read has none: it was snake_case.
    spelling = SPELLINGS[plan.get("spelling", SNAKE_CASE)]
    decisions = []
    for key, call in zip(plan["keys"], plan["calls"], strict=True):
        decision = _decision(key, call, answers[key], spelling)
        if isinstance(decision, End):
            return decision
        if plan["response_schema"] is not None:
            _check_fits(plan["response_schema"], decision, key)
        decisions.append(decision)
    if plan["mode"] == PER_CALL:
        return decisions[0]
    # One decision per action, in order, each of a type its call allows: the middleware checks
    # both only after interrupt() has saved the answer.
    return {"decisions": decisions}


def _decision(key: str, call: dict[str, Any], answer: dict[str, Any], spelling: Spelling) -> dict[str, Any] | End:
    """docs/rules.md, "Review tool calls": the table from answer to the middleware's decision."""
    if answer["action"] == "cancel":
        return End(questions.CANCELLED)
    if answer["action"] == "decline":
        return {"type": "reject"} if "reject" in call["decisions"] else End(questions.DECLINED)
    content = answer["content"]
    choice = content.get("decision")
    if choice not in call["decisions"]:
        raise InvalidAnswer(NOT_ALLOWED.format(allowed=", ".join(call["decisions"])), {"key": key})
    if choice == "approve":
        return {"type": "approve"}
    if choice == "edit":
        # The reviewed tool's name: an edit can change the arguments, not the tool.
        edited_action = {"name": call["name"], "args": _edited_args(key, call, content)}
        return {"type": "edit", spelling.edited_action: edited_action}
    message = content.get("message")
    message = message if isinstance(message, str) and message.strip() else None
    if choice == "respond":
        if message is None:
            raise InvalidAnswer(MESSAGE_REQUIRED, {"key": key})
        return {"type": "respond", "message": message}
    return {"type": "reject", "message": message} if message else {"type": "reject"}


def _edited_args(key: str, call: dict[str, Any], content: dict[str, Any]) -> dict[str, Any]:
    if "args" not in content:
        # The field is prefilled: a client that sends no value keeps the model's arguments.
        return call["args"]
    try:
        # NaN and Infinity are not JSON, and the resume value is stored as JSON.
        args = json.loads(content["args"], parse_constant=_not_json)
    except (TypeError, ValueError, RecursionError):  # RecursionError: "[[[[…" nested past Python's limit
        args = None
    if not isinstance(args, dict):
        raise InvalidAnswer(ARGS_NOT_AN_OBJECT, {"key": key})
    return args


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


questions.register_kind(is_review, build_review)
questions.register_resolver(KIND, resolve_review)
