"""Property testing of the MCP endpoint against the live server: hypothesis strategies for
envelopes, headers, _meta and JSON values, the checks every answer passes (`clean`: never a 5xx,
a traceback or an internal detail; always a JSON-RPC answer with the code and HTTP status the
revision assigns), and calls that a property test must never change or may answer at random.

pytest-django's function-scoped fixtures are set up once per test function, not once per
hypothesis example, so each test runs its hypothesis loop inside (`run()`) over state it set up
itself; the examples share the database on purpose (that is what a server sees)."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Any

import httpx
from django.conf import settings as django_settings
from django.db import connection
from hypothesis import HealthCheck, event
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from mcp.shared.inbound import encode_header_value
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from mcp_gateway.models import Round, ToolCall
from tests.clients import MODERN, Raw, meta
from tests.rounds import (
    CHECKPOINT_TABLES,
    asked,
)

# Statuses the transport rules give: 401 no/wrong token, 403 Origin, 405 method, 406 Accept,
# 413 size, 429 rate; every other error is a JSON-RPC code with the SDK's status on 2026-07-28
# (an older revision's request that reached its method is answered 200).
JSON_RPC_STATUS = {-32700: 400, -32600: 400, -32602: 400, -32020: 400, -32021: 400, -32022: 400, -32601: 404}


# Rate limiting has no MCP code: -32003 is from the implementation range (-32000..-32019), outside
# the -32020..-32099 MCP reserves for its own codes.
TRANSPORT = {401: {-32001}, 403: {-32600}, 405: {-32600}, 406: {-32600}, 413: {-32600}, 429: {-32003}}


LEAKS = (
    "Traceback",
    'File "/',
    "site-packages",
    "psycopg",
    "django.db",
    "DataError",
    "IntegrityError",
    "OperationalError",
    "RecursionError",
    "/work/",
)


SEEN: Counter[str] = Counter()


def note(what: str) -> None:
    """A hypothesis event, also counted for the summary this module prints at its end (-s)."""
    event(what)
    SEEN[what] += 1


def cases(n: int) -> hypothesis_settings:
    """Hypothesis settings for `n` generated cases (database=None: the examples depend on rows and
    round ids of this run, so replaying a stored failure would not reproduce it)."""
    return hypothesis_settings(
        max_examples=n,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


def clean(response: httpx.Response, sent: Any = None) -> dict[str, Any] | None:
    """The checks every answer passes; returns the JSON-RPC body (None for a 202)."""
    assert response.status_code < 500, response.text
    text = response.text
    for leak in (*LEAKS, django_settings.SECRET_KEY):
        assert leak not in text, (leak, text[:500])
    if response.status_code == 202:
        assert text == ""
        return None
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers.get("X-Content-Type-Options") == "nosniff"
    assert response.headers.get("Cache-Control") == "no-store"
    body = response.json()
    assert body["jsonrpc"] == "2.0" and ("result" in body) != ("error" in body), body
    if "error" in body:
        code = body["error"]["code"]
        assert isinstance(body["error"]["message"], str)
        expected = {s for s, codes in TRANSPORT.items() if code in codes} | {JSON_RPC_STATUS.get(code)}
        if _older_revision(response):
            expected.add(200)  # a request that reached its method
        assert response.status_code in expected, (response.status_code, body)
        sent_id = sent.get("id") if isinstance(sent, dict) else None
        if isinstance(sent_id, (str, int)) and not isinstance(sent_id, bool) and body["id"] is not None:
            assert body["id"] == sent_id
    else:
        assert response.status_code == 200
        assert isinstance(body["result"], dict)
        if isinstance(sent, dict):
            assert body["id"] == sent["id"]
    return body


def _older_revision(response: httpx.Response) -> bool:
    # How the server routes a request: no version header, or a handshake-era one.
    version = response.request.headers.get("MCP-Protocol-Version")
    return version is None or version in HANDSHAKE_PROTOCOL_VERSIONS


class Victim:
    """A paused greeter call owned by another user; `unchanged()` compares its rows and checkpoint."""

    def __init__(self, mcp_url: str, token: str):
        self.raw = Raw(mcp_url, token)
        self.first = asked(self.raw, "greeter")
        self.state = self.first["requestState"]
        self.call = Round.objects.get(pk=self.state.partition(".")[0]).call
        self.before = self.snapshot()

    def snapshot(self) -> tuple:
        call = list(ToolCall.objects.filter(pk=self.call.pk).values())
        rounds = list(Round.objects.filter(call_id=self.call.pk).order_by("number").values())
        with connection.cursor() as cursor:
            checkpoint = []
            for table in CHECKPOINT_TABLES:
                cursor.execute(f"SELECT t::text FROM {table} t WHERE thread_id = %s ORDER BY 1", [self.call.thread_id])
                checkpoint.append([row[0] for row in cursor.fetchall()])
        return call, rounds, checkpoint

    def assert_unchanged(self) -> None:
        assert self.snapshot() == self.before
        assert self.before[2][0], "the victim's checkpoint exists"


printable = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=20)


json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)


json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


METHODS = [
    "tools/list",
    "server/discover",
    "tools/call",
    "initialize",
    "ping",
    "notifications/initialized",
    "resources/list",
    "tools/call/",
    "",
    "TOOLS/LIST",
]


VERSIONS = [MODERN, "2025-11-25", "2025-06-18", "2024-11-05", "2099-01-01", "", "2026-07-28 "]


CAPABILITIES = st.one_of(
    st.just({"elicitation": {"form": {}, "url": {}}}),
    st.just({}),
    st.just({"elicitation": {"url": {}}}),
    st.just({"elicitation": None}),
    json_values,
)


# Tools whose arguments fail validation fast (each needs a string it is not given here).
STRICT_TOOLS = ["digital_twin", "send_email"] * 3 + ["no_such_tool", "", "greeter\x00"]


@st.composite
def meta_values(draw) -> Any:
    base = meta(draw(CAPABILITIES), draw(st.sampled_from([MODERN] * 8 + VERSIONS)))
    if draw(st.integers(0, 4)) == 0:
        base.pop(draw(st.sampled_from(sorted(base))))
    if draw(st.integers(0, 4)) == 0:
        base[draw(st.sampled_from([*sorted(base), "io.modelcontextprotocol/clientInfo", "x"]))] = draw(json_values)
    return draw(st.just(base) | json_values) if draw(st.integers(0, 9)) == 0 else base


@st.composite
def envelopes(draw) -> tuple[Any, str, str | None]:
    """(body, method for the headers, tool name for the headers): a request, then mutated."""
    method = draw(st.sampled_from(METHODS))
    params: dict[str, Any] = {"_meta": draw(meta_values())}
    name = None
    if method == "tools/call":
        name = draw(st.sampled_from(STRICT_TOOLS))
        params |= {
            "name": name,
            "arguments": draw(st.dictionaries(st.sampled_from(["greeting", "x", "to"]), json_values, max_size=3)),
        }
    if method == "initialize":
        params |= {
            "protocolVersion": draw(st.sampled_from(VERSIONS)),
            "capabilities": {},
            "clientInfo": {"name": "fuzz", "version": "0"},
        }
    body: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": draw(st.integers(0, 10**6) | st.text(max_size=8)),
        "method": method,
        "params": params,
    }
    for _ in range(draw(st.integers(0, 3))):
        where = draw(st.sampled_from(["top", "params", "drop-top", "drop-params"]))
        if where == "top":
            body[draw(st.sampled_from(["jsonrpc", "id", "method", "params", "result", "x"]))] = draw(json_values)
        elif where == "params" and isinstance(body.get("params"), dict):
            key = draw(
                st.sampled_from(
                    ["name", "arguments", "_meta", "inputResponses", "requestState", "context", "cursor", "task"]
                )
            )
            body["params"][key] = draw(json_values)
        elif where == "drop-top" and body:
            body.pop(draw(st.sampled_from(sorted(body))))
        elif where == "drop-params" and isinstance(body.get("params"), dict) and body["params"]:
            body["params"].pop(draw(st.sampled_from(sorted(body["params"]))))
    if draw(st.integers(0, 19)) == 0:
        return draw(json_values), method, name  # no request object at all
    return body, method, name


# Whether each Accept admits the JSON answer, as the SDK server decides it (its
# `check_accept_headers`, checked against the probe server): parameters are ignored, so even q=0
# admits, and a missing or empty Accept admits nothing.
ACCEPTS = {
    None: False,
    "": False,
    "application/json, text/event-stream": True,
    "application/json": True,
    "*/*": True,
    "application/*": True,
    "application/json;q=0": True,
    "application/json-seq, text/event-stream": False,
    "text/event-stream": False,
    "text/html": False,
}


ORIGINS = {
    None: True,
    "http://localhost:3000": True,
    "http://127.0.0.1": True,
    "https://evil.example": False,
    "null": False,
    "http://[::1": False,
    "http://localhost.evil.example": False,
}


def base_headers(method: str, name: str | None) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": encode_header_value(method),
    }
    if name is not None:
        headers["Mcp-Name"] = encode_header_value(name)
    return headers


@st.composite
def header_sets(draw, method: str, name: str | None, token: str) -> tuple[dict[str, str], int | None]:
    """Headers for the request, mutated, and the transport status they must get (None: not one)."""
    headers = base_headers(method, name)
    for header in ("MCP-Protocol-Version", "Mcp-Method", "Mcp-Name"):
        choice = draw(st.integers(0, 9))
        if choice == 0:
            headers.pop(header, None)
        elif choice == 1:
            headers[header] = draw(st.sampled_from(VERSIONS) | printable | st.just("=?base64?Z3JlZXRlcg==?=")).strip()
    # Mostly a clean transport, so that most cases reach the JSON-RPC layer; else one rule broken.
    accept, origin, auth = "application/json, text/event-stream", None, "ok"
    broken = draw(st.sampled_from([None] * 5 + ["accept", "origin", "auth"]))
    if broken == "accept":
        accept = draw(st.sampled_from(sorted(ACCEPTS, key=str)))
    elif broken == "origin":
        origin = draw(st.sampled_from(sorted(ORIGINS, key=str)))
    elif broken == "auth":
        auth = draw(st.sampled_from(["ok", "missing", "wrong", "basic", "empty"]))
    headers.pop("Accept")
    if accept is not None:
        headers["Accept"] = accept
    if origin is not None:
        headers["Origin"] = origin
    headers["Authorization"] = {
        "ok": f"Bearer {token}",
        "wrong": "Bearer hitl_wrong",
        "basic": f"Basic {token}",
        "empty": "Bearer",
        "missing": "",
    }[auth]
    if auth == "missing":
        headers.pop("Authorization")
    expected = 403 if not ORIGINS[origin] else 406 if not ACCEPTS[accept] else 401 if auth != "ok" else None
    return headers, expected


def _envelope_case(http: httpx.Client, url: str, token: str, data: st.DataObject, where: str) -> None:
    body, method, name = data.draw(envelopes())
    headers, expected = data.draw(header_sets(method, name, token))
    response = http.post(url, content=json.dumps(body).encode(), headers=headers)
    answer = clean(response, body)
    code = f" {answer['error']['code']}" if answer and "error" in answer else ""
    note(f"{where}: HTTP {response.status_code}{code}")
    if expected is not None:
        assert response.status_code == expected, (expected, response.text)
        if expected == 401:
            assert response.headers["WWW-Authenticate"] == 'Bearer realm="mcp"'
    if answer is not None and "result" in answer and body.get("method") == "tools/call":
        # Only tools that fail validation are called here: nothing may start.
        assert answer["result"].get("isError") is True, answer


class Paused:
    """One paused plan_deployment call of the test's own user, started again once it is answered."""

    TOOL, ARGUMENTS = "plan_deployment", {}

    def __init__(self, raw: Raw):
        self.raw = raw
        self.refresh()

    def refresh(self) -> None:
        first = asked(self.raw, self.TOOL, self.ARGUMENTS)
        self.state, self.requests = first["requestState"], first["inputRequests"]
        self.round_id = uuid.UUID(self.state.partition(".")[0])
        self.call_id = Round.objects.get(pk=self.round_id).call_id

    def rounds(self) -> int:
        return Round.objects.filter(call_id=self.call_id).count()

    def asking(self) -> bool:
        return Round.objects.filter(pk=self.round_id, state=Round.State.ASKING).exists()


def _mutated(state: str, draw) -> str:
    i = draw(st.integers(0, len(state) - 1))
    return state[:i] + draw(st.sampled_from("0aA-._")) + state[i + 1 :]
