"""Interrupts become questions; answers become the resume map.

A round is stored as {"requests": {key: elicitation/create request}, "plans": [one per interrupt]}.
Each plan names the interrupt it answers, its kind and the keys it reads, so that after the
client answers, every interrupt gets its value by id (`Command(resume={id: value})`).

Kinds: "text" (a string interrupt), "typed" (a response_schema), "relay" (an mcp_elicitation
value), and "review" (HumanInTheLoopMiddleware, in review.py).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from langgraph.types import Interrupt

from mcp_gateway import limits
from mcp_gateway.calls import form_schemas
from mcp_gateway.calls.form_schemas import Unaskable
from mcp_gateway.calls.results import jsonable
from mcp_gateway.protocol import INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY, RpcError

ELICIT = "elicitation/create"
DECLINED = "The request for input was declined."
CANCELLED = "The request for input was cancelled."
UNASKABLE = "This tool needs input that can't be asked over MCP"
INVALID_CONTENT = "Form content does not match requestedSchema"


class InvalidAnswer(Exception):
    def __init__(self, message: str, data: Any = None):
        super().__init__(message)
        self.message, self.data = message, data


@dataclass(frozen=True)
class End:
    """An answer that ends the tool call with an error result."""

    text: str


def canonical(value: Any) -> str:
    # Shown to the user as JSON (docs/rules.md, "Ask for typed input"): jsonable turns what JSON lacks
    # (NaN, Infinity, models, non-string keys) into JSON first, the way tool results are.
    return json.dumps(jsonable(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def digest(value: Any) -> str:
    return hashlib.sha256(canonical(value).encode()).hexdigest()[:16]


def form_request(message: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"method": ELICIT, "params": {"message": message, "mode": "form", "requestedSchema": schema}}


def url_request(message: str, url: str) -> dict[str, Any]:
    return {"method": ELICIT, "params": {"message": message, "mode": "url", "url": url}}


def by_link(request: dict[str, Any], link: str) -> dict[str, Any]:
    """A question as a client that opens links but fills no forms is asked it: a form becomes a URL
    question to the round's answer page, where the person answers the whole round; a URL question
    stays as it is."""
    params = request["params"]
    if params.get("mode", "form") == "url":
        return request
    return url_request(params["message"], link)


_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?", re.ASCII)


def _is_host(host: str) -> bool:
    """An IP address, or a host name of RFC 1123 labels (international names as IDNA)."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    try:
        labels = host.removesuffix(".").encode("idna").decode("ascii").split(".")
    except UnicodeError:
        return False
    # A name that ends in a number is read as an IPv4 address by browsers ("999.1.1.1").
    return all(_LABEL.fullmatch(label) for label in labels) and not labels[-1].isdigit() and len(host) <= 253


def check_url(url: Any) -> str:
    """docs/rules.md, "Send the user to a URL": the rules a URL must meet before it is asked."""
    if not isinstance(url, str) or len(url) > 4096:
        raise Unaskable("the URL must be a string of at most 4,096 characters")
    # urlsplit strips leading spaces and drops tabs and newlines, and keeps spaces in the host,
    # so a URL the client would open differently from what was checked must be refused here.
    if not url.isprintable() or any(c.isspace() for c in url):
        raise Unaskable("the URL contains whitespace or control characters")
    try:
        parts = urlsplit(url)  # raises on a malformed IPv6 host ("https://[::1")
        host = parts.hostname
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        raise Unaskable("the URL is malformed") from None
    if not host:
        raise Unaskable("the URL names no host")
    if not _is_host(host):
        raise Unaskable("the URL's host is not a host name or IP address")
    if parts.username is not None or parts.password is not None:
        raise Unaskable("the URL contains a user name or password")
    if parts.scheme == "https" or (parts.scheme == "http" and host in ("localhost", "127.0.0.1", "::1")):
        return url
    raise Unaskable("the URL must use HTTPS, or HTTP on localhost, 127.0.0.1 or [::1]")


# --- building questions ------------------------------------------------------------------------

Builder = Callable[[Interrupt, str, frozenset[str]], tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]]
"""(interrupt, key prefix, keys the round already asks) -> (requests by key, plans). Raises Unaskable."""


def _message_of(value: Any) -> str:
    return value if isinstance(value, str) else canonical(value)


def build_text_or_typed(interrupt: Interrupt, prefix: str, taken: frozenset[str] = frozenset()) -> tuple[dict, list]:
    if interrupt.response_schema is None:
        if not isinstance(interrupt.value, str):
            raise Unaskable("the interrupt value is not a string and has no response_schema")
        form = form_schemas.Form(
            {"type": "object", "properties": {"response": {"type": "string"}}, "required": ["response"]},
            wrapped=True,
        )
        kind = "text"
    else:
        form = form_schemas.form_from_schema(interrupt.response_schema)
        kind = "typed"
    message = _message_of(interrupt.value)
    # Derived from the question, so a client that calls again from the start gets the same key,
    # and two interrupts asking the same thing share one question.
    key = f"answer-{digest({'message': message, 'schema': form.schema})}"
    plan = {"interrupt": interrupt.id, "kind": kind, "keys": [key], "wrapped": form.wrapped}
    return {key: form_request(message, form.schema)}, [plan]


def _relay_entries(requests: Any) -> list[tuple[str, dict[str, Any]]]:
    if isinstance(requests, list):
        entries = []
        for item in requests:
            if not isinstance(item, dict) or not isinstance(item.get("key"), str):
                raise Unaskable("each relayed request needs a string key")
            # The list shape names the schema requested_schema; accept the MCP spelling too.
            schema = item.get("requested_schema", item.get("requestedSchema"))
            entries.append((item["key"], {**item, "requestedSchema": schema}))
        return entries
    if isinstance(requests, dict):
        return [(str(key), item if isinstance(item, dict) else {}) for key, item in requests.items()]
    raise Unaskable("an mcp_elicitation interrupt needs its requests as a list or a key map")


def build_relay(interrupt: Interrupt, prefix: str, taken: frozenset[str] = frozenset()) -> tuple[dict, list]:
    entries = _relay_entries(interrupt.value.get("requests"))
    if not entries:
        raise Unaskable("the mcp_elicitation interrupt has no requests")
    requests: dict[str, dict[str, Any]] = {}
    own_keys = []
    for own_key, item in entries:
        message = item.get("message")
        if not isinstance(message, str):
            raise Unaskable(f"relayed request {own_key!r} has no message")
        mode = item.get("mode") or "form"
        if mode == "url":
            request = url_request(message, check_url(item.get("url")))
        elif mode == "form":
            request = form_request(message, form_schemas.check_form_schema(item.get("requestedSchema")))
        else:
            raise Unaskable(f"relayed request {own_key!r} has mode {mode!r}")
        if prefix + own_key in requests:
            raise Unaskable(f"relayed request key {own_key!r} appears twice")
        requests[prefix + own_key] = request
        own_keys.append(own_key)
    plan = {"interrupt": interrupt.id, "kind": "relay", "keys": list(requests), "own_keys": own_keys}
    return requests, [plan]


_builders: list[tuple[Callable[[Interrupt], bool], Builder]] = []


def register_kind(matches: Callable[[Interrupt], bool], build: Builder) -> None:
    """Add a kind of question; kinds registered first win."""
    _builders.append((matches, build))


def _is_relay(i: Interrupt) -> bool:
    return isinstance(i.value, dict) and i.value.get("type") == "mcp_elicitation"


def _builder_for(interrupt: Interrupt) -> Builder:
    for matches, build in _builders:
        if matches(interrupt):
            return build
    if _is_relay(interrupt):
        return build_relay
    return build_text_or_typed


def _asks(interrupt: Interrupt) -> str:
    """A digest of what the interrupt asks. For a relay, its requests alone: other keys in the value
    are ignored (docs/rules.md, "Relay elicitation requests"), and one that changes between runs (a
    call id, say) must not change the keys MCPAdapter replays its stored answers by."""
    return digest(interrupt.value.get("requests") if _is_relay(interrupt) else interrupt.value)


def build_round(interrupts: tuple[Interrupt, ...]) -> dict[str, Any]:
    """All pending interrupts as one round of questions. Raises Unaskable."""
    requests: dict[str, dict[str, Any]] = {}
    asked_by: dict[int, dict[str, dict[str, Any]]] = {}
    plans: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    # Identical interrupts take their numbers (.1, .2) in the order LangGraph lists the pending
    # tasks, which is the same on every thread of a graph (a stable sort keeps it), not by
    # interrupt id, which is new on every thread: MCPAdapter calls the tool again from the start
    # and answers each key with the answer stored for it, so a key must reach the same node.
    for index, interrupt in sorted(enumerate(interrupts), key=lambda pair: _asks(pair[1])):
        prefix = ""
        if len(interrupts) > 1:
            # Several pending: each interrupt's own keys are prefixed with its digest, so two tool
            # calls relaying the same key are asked separately.
            d = _asks(interrupt)
            seen[d] = seen.get(d, 0) + 1
            prefix = f"{d}.{seen[d]}/"
        new_requests, new_plans = _builder_for(interrupt)(interrupt, prefix, frozenset(requests))
        for key, request in new_requests.items():
            if key in requests and requests[key] != request:
                raise Unaskable(f"two questions share the key {key!r}")
            requests[key] = request
        asked_by[index] = new_requests
        # A round is answered in one request, and limits.check_input_responses refuses a request
        # with more answers than this: a larger round could be asked but never answered.
        if len(requests) > (most := settings.MCP_MAX_INPUT_RESPONSES):
            raise Unaskable(f"the round asks more than {most} questions, the most answers one request may carry")
        plans.extend(new_plans)
    # Keys are numbered by what they ask, but a client shows the questions in the order it gets
    # them: that is the order LangGraph lists the interrupts in, the order the graph asks them.
    in_asking_order = {key: requests[key] for index in sorted(asked_by) for key in asked_by[index]}
    return {"requests": in_asking_order, "plans": plans}


def modes_needed(round_: dict[str, Any]) -> list[str]:
    modes = {r["params"].get("mode", "form") for r in round_["requests"].values()}
    return sorted(modes)


def declared_modes(capabilities: dict[str, Any]) -> set[str]:
    """The elicitation modes the client declared; none for a missing or null capability."""
    elicitation = capabilities.get("elicitation")
    if not isinstance(elicitation, dict):
        return set()
    # A mode is declared by an object. The revision's schema lets a mode be null, and the SDK reads
    # null as absent (ElicitationCapability: "Present if the client supports ..."), so
    # {"form": {}, "url": null} declares form only and must not be sent a URL question.
    # A client that declares elicitation with no modes supports form.
    return {m for m in ("form", "url") if isinstance(elicitation.get(m), dict)} or {"form"}


def missing_modes(round_: dict[str, Any], capabilities: dict[str, Any]) -> list[str]:
    """The elicitation modes the round's questions need that the request's client did not declare."""
    declared = declared_modes(capabilities)
    return [m for m in modes_needed(round_) if m not in declared]


def missing_modes_error(round_: dict[str, Any], missing: list[str], *, asker: str) -> RpcError:
    """docs/rules.md, "Clients without elicitation": -32021 naming every mode the round needs,
    for a round's questions (asker "tool") and a task's alike ("task")."""
    return RpcError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"This {asker} asks for human input and needs {' and '.join(missing)} elicitation.",
        {"requiredCapabilities": {"elicitation": {m: {} for m in modes_needed(round_)}}},
    )


# --- answers to resume values -----------------------------------------------------------------

Resolver = Callable[[dict[str, Any], dict[str, Any], dict[str, dict[str, Any]]], Any]
"""(plan, answers by key, requests by key) -> resume value or End. Raises InvalidAnswer."""


def _ended(action: str) -> End:
    return End(DECLINED if action == "decline" else CANCELLED)


def resolve_single(plan: dict, answers: dict, requests: dict) -> Any:
    answer = answers[plan["keys"][0]]
    if answer["action"] != "accept":
        return _ended(answer["action"])
    content = answer["content"]
    return content["response"] if plan.get("wrapped") else content


def resolve_relay(plan: dict, answers: dict, requests: dict) -> Any:
    responses = {}
    for wire_key, own_key in zip(plan["keys"], plan["own_keys"], strict=True):
        answer = answers[wire_key]
        is_form = requests[wire_key]["params"].get("mode", "form") == "form"
        # Declined and cancelled answers go to the agent, which decides what happens next. An
        # accept to a URL question has no content (docs/rules.md, "Send the user to a URL": it only
        # confirms the flow on that page), so whatever a client sent with it is not passed on.
        responses[own_key] = (
            {"action": "accept", "content": answer["content"]}
            if answer["action"] == "accept" and is_form and "content" in answer
            else {"action": answer["action"]}
        )
    return {"responses": responses}


_resolvers: dict[str, Resolver] = {"text": resolve_single, "typed": resolve_single, "relay": resolve_relay}


def register_resolver(kind: str, resolver: Resolver) -> None:
    _resolvers[kind] = resolver


def check_answer(key: str, request: dict[str, Any], answer: Any) -> dict[str, Any]:
    """The answer, checked against its question. A form's fields that were not asked are dropped,
    as answers to questions not asked are: the agent gets only what its form asked for (a form
    cannot carry a schema's additionalProperties: false, and an agent that allows extra fields
    did not ask for them either)."""
    if not isinstance(answer, dict) or answer.get("action") not in ("accept", "decline", "cancel"):
        raise InvalidAnswer("Invalid answer: action must be accept, decline or cancel", {"key": key})
    params = request["params"]
    if answer["action"] == "accept" and params.get("mode", "form") == "form":
        if "content" not in answer:
            raise InvalidAnswer(INVALID_CONTENT, {"key": key, "detail": "no content"})
        schema, content = params["requestedSchema"], answer["content"]
        if isinstance(content, dict):
            # A field left empty may come as null (the SDK's ElicitResult allows it): an optional
            # one counts as not answered; a required one stays, and fails below.
            required = schema.get("required")
            required = required if isinstance(required, list) else ()
            content = {name: value for name, value in content.items() if value is not None or name in required}
        if (error := form_schemas.content_error(schema, content)) is not None:
            raise InvalidAnswer(INVALID_CONTENT, {"key": key, "detail": error})
        asked = schema.get("properties")
        if isinstance(asked, dict):  # a kind of question of one's own (register_kind) may not name them
            content = {name: value for name, value in content.items() if name in asked}
        return {**answer, "content": content}
    return answer


def resume_values(round_: dict[str, Any], responses: dict[str, Any]) -> dict[str, Any] | End | None:
    """{interrupt_id: value} for a fully answered round, End, or None when an answer is missing
    (docs/rules.md, "Missing answers": the same questions are asked again). Answers to keys not
    asked are ignored.

    Raises InvalidAnswer, even when another answer is missing (docs/rules.md, "Invalid answers"):
    the client learns at once what to fix, where asking again would drop its answer without a word.
    And before anything is resumed: LangGraph saves an answer as soon as interrupt() returns it, so
    one that breaks the node afterwards would poison the thread."""
    requests = round_["requests"]
    answers = {key: check_answer(key, request, responses[key]) for key, request in requests.items() if key in responses}
    values: dict[str, Any] = {}
    ended: End | None = None
    for plan in round_["plans"]:
        # Every fully answered question is resolved, so what only its resolver refuses (a review's
        # edit that does not parse, a respond without a message) fails too while another is missing.
        if all(key in answers for key in plan["keys"]):
            value = _resolvers[plan["kind"]](plan, answers, requests)
            if isinstance(value, End):
                ended = ended or value
            else:
                values[plan["interrupt"]] = value
    if len(answers) < len(requests):
        return None
    return ended if ended is not None else values


def checked_resume_values(round_: dict[str, Any], responses: dict[str, Any]) -> dict[str, Any] | End | None:
    """resume_values, with what the answers turned into held to the storage limits: a -32602
    RpcError for an invalid answer (docs/rules.md, "Invalid answers"), whether it came in a round or
    in a task's tasks/update."""
    try:
        values = resume_values(round_, responses)
    except InvalidAnswer as exc:
        raise RpcError(INVALID_PARAMS, exc.message, exc.data) from None
    if isinstance(values, dict) and (error := limits.resume_value_error(values)) is not None:
        raise error
    return values
