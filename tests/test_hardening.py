"""Hardening of the MCP endpoint (issue 8): property tests against the live server, the real
PostgreSQL database and the real Celery worker, plus the limits.

Whatever a client sends (JSON-RPC envelopes, headers, `_meta`, tool arguments, `inputResponses`,
`requestState`), the answer is never a 5xx, never a traceback or an internal detail, always a
JSON-RPC error with the code and HTTP status the revision assigns, and no request touches a call
of another caller: each property test first pauses a call owned by someone else and checks at the
end that its rows and its checkpoint are exactly as they were.

pytest-django's function-scoped fixtures are set up once per test function, not once per
hypothesis example, so each test runs its hypothesis loop inside (`run()` below) over state it set
up itself; the examples share the database on purpose (that is what a server sees).
"""

from __future__ import annotations

import json
import socket
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings as django_settings
from django.db import connection
from hypothesis import HealthCheck, assume, event, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from mcp.shared.inbound import encode_header_value

from mcp_gateway import limits
from mcp_gateway.models import Round, ToolCall
from tests.clients import MODERN, Raw, meta, plain_http
from tests.processes import Web, service_env
from tests.rounds import (
    CHECKPOINT_TABLES,
    INVALID_STATE,
    UNASKABLE,
    asked,
    error_of,
    input_response_accepting,
    only_key,
    result_of,
)
from tests.test_schema_properties import answers_for, assert_valid_form

# Statuses the transport rules give: 401 no/wrong token, 403 Origin, 405 method, 406 Accept,
# 413 size, 429 rate; every other error is a JSON-RPC code with the SDK's status.
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


@pytest.fixture(scope="module", autouse=True)
def summary():
    yield
    print("\ngenerated cases by outcome:", dict(sorted(SEEN.items())), "total:", SEEN.total())


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


# --- someone else's paused call, which nothing here may change -----------------------------------------


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


@pytest.fixture
def victim(mcp_url, make_token):
    return Victim(mcp_url, make_token("victim"))


# --- strategies ------------------------------------------------------------------------------------------

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


# Whether each Accept admits the JSON answer, as the SDK server decides it (notes §2; its
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


# --- envelopes, headers and _meta ---------------------------------------------------------------------


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


def test_random_and_mutated_envelopes_and_headers_get_a_json_rpc_answer_never_a_500(mcp_url, token, victim):
    http = plain_http(timeout=60)

    @cases(800)
    @given(st.data())
    def run(data):
        _envelope_case(http, mcp_url, token, data, "envelope")

    run()
    victim.assert_unchanged()
    assert not ToolCall.objects.exclude(pk=victim.call.pk).exists()


@pytest.fixture
def production_web(celery_queue, fake_model, tmp_path):
    """The production ASGI app under uvicorn, where /mcp/ runs without Django's middleware
    (hitl_project/asgi.py), on the test database and this session's queue."""
    web = Web(service_env(celery_queue, fake_model), tmp_path / "web.log").start()
    yield web
    web.stop()


def test_the_production_asgi_app_answers_random_envelopes_the_same_way(production_web, token, victim):
    url = f"{production_web.url}/mcp/"
    http = plain_http(timeout=60)

    @cases(250)
    @given(st.data())
    def run(data):
        _envelope_case(http, url, token, data, "envelope (ASGI)")

    run()
    # ASGI keeps every header line: a routing header sent twice is a -32020 there.
    headers = [*base_headers("tools/list", None).items(), ("Mcp-Method", "tools/list")]
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}}
    response = http.post(url, json=body, headers=[*headers, ("Authorization", f"Bearer {token}")])
    assert clean(response, body)["error"]["code"] == -32020
    # Over the limits, through uvicorn too.
    deep = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"x": ' + b"[" * 100_000 + b"]" * 100_000
    response = http.post(
        url, content=deep + b"}}", headers={**base_headers("tools/list", None), "Authorization": f"Bearer {token}"}
    )
    assert clean(response)["error"]["code"] == -32600
    big = http.post(
        url,
        content=b" " * (django_settings.MCP_MAX_BODY_BYTES + 1),
        headers={**base_headers("tools/list", None), "Authorization": f"Bearer {token}"},
    )
    assert big.status_code == 413 and clean(big)["error"]["code"] == -32600
    assert "Traceback" not in production_web.log.read_text(errors="replace")
    victim.assert_unchanged()


def _read_response(sock: socket.socket) -> bytes:
    """One HTTP response off the socket ("" once the server has closed it)."""
    received = b""
    while b"\r\n\r\n" not in received:
        if not (chunk := sock.recv(65536)):
            return received
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def test_a_request_head_over_16_kib_gets_431_before_it_is_parsed(production_web, token):
    """httptools sets no limit on a header's size, and parsing one takes time that grows with the
    square of its size: unchecked, one unauthenticated request could hold the web process's event
    loop, and every call it serves (hitl_project/http.py)."""
    host, port = production_web.url.removeprefix("http://").split(":")
    start = b"GET /health/?format=json HTTP/1.1\r\nHost: 127.0.0.1\r\n"

    with socket.create_connection((host, int(port)), timeout=30) as sock:
        try:
            sock.sendall(start + b"X-Big: " + b"a" * 1_000_000 + b"\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before the server had read it all
        assert _read_response(sock).startswith(b"HTTP/1.1 431 ")
        try:  # and the connection closed (reset, as the server leaves the rest of the head unread)
            assert sock.recv(1) == b""
        except ConnectionResetError:
            pass

    # Heads within the limit on one kept-alive connection, more than 16 KiB together: each
    # request's head is counted on its own, and the next one over the limit is refused.
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        for _ in range(4):
            sock.sendall(start + b"X-Padding: " + b"a" * 8_000 + b"\r\n\r\n")
            assert _read_response(sock).startswith(b"HTTP/1.1 200 ")
        sock.sendall(start + b"X-Big: " + b"a" * 100_000 + b"\r\n\r\n")
        assert _read_response(sock).startswith(b"HTTP/1.1 431 ")

    # A body is not a head: the MCP endpoint still answers a large one itself.
    big = plain_http(timeout=60).post(
        f"{production_web.url}/mcp/",
        content=b" " * (django_settings.MCP_MAX_BODY_BYTES + 1),
        headers={**base_headers("tools/list", None), "Authorization": f"Bearer {token}"},
    )
    assert big.status_code == 413 and clean(big)["error"]["code"] == -32600
    assert "Traceback" not in production_web.log.read_text(errors="replace")


def _bytes_written(pid: int) -> int:
    """What a process (and its children) wrote, files and sockets alike (Linux's /proc/<pid>/io)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    total = 0
    for process in (pid, *map(int, children)):
        for line in Path(f"/proc/{process}/io").read_text().splitlines():
            if line.startswith("wchar:"):
                total += int(line.split()[1])
    return total


@pytest.mark.parametrize("path", ["/mcp/", "/admin/"])
def test_a_host_outside_allowed_hosts_gets_400_and_one_log_line_without_a_traceback(production_web, token, path):
    http = plain_http()
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}}
    headers = {**base_headers("tools/list", None), "Authorization": f"Bearer {token}", "Host": "evil.example"}

    response = http.post(f"{production_web.url}{path}", json=body, headers=headers)

    assert response.status_code == 400
    production_web.stop()  # the log is complete once the server has stopped
    log = production_web.log.read_text()
    assert "WARNING django.security.DisallowedHost Invalid HTTP_HOST header: 'evil.example'" in log
    assert "Traceback" not in log


def test_a_body_over_the_limit_is_refused_before_it_is_stored(production_web, token):
    headers = {**base_headers("tools/list", None), "Authorization": f"Bearer {token}"}
    megabyte = b" " * (1024 * 1024)
    before = _bytes_written(production_web.proc.pid)

    # Without Content-Length (chunked), and without a token: the limit comes before authentication.
    response = httpx.post(f"{production_web.url}/mcp/", content=(megabyte for _ in range(200)), headers=headers)
    anonymous = httpx.post(
        f"{production_web.url}/mcp/",
        content=(megabyte for _ in range(200)),
        headers={k: v for k, v in headers.items() if k != "Authorization"},
    )

    assert response.status_code == anonymous.status_code == 413
    assert clean(response)["error"]["message"] == "Request body too large"
    # Django's own handler would have spooled all 400 MB to a temporary file first.
    assert _bytes_written(production_web.proc.pid) - before < 50 * 1024 * 1024


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"])
def test_methods_other_than_post_get_405_with_a_json_rpc_body(mcp_url, token, method):
    response = httpx.request(method, mcp_url, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 405
    if method != "HEAD":
        clean(response)


def test_bodies_that_are_not_json_get_a_parse_error(mcp_url, token, victim):
    raw = Raw(mcp_url, token)

    @cases(200)
    @given(
        st.one_of(
            st.binary(max_size=64),
            st.text(max_size=64).map(str.encode),
            st.sampled_from(
                [
                    b"NaN",
                    b'{"a": NaN}',
                    b"[Infinity]",
                    b"1e999",
                    b'{"id": -Infinity}',
                    b"\xef\xbb\xbf{}",
                    b'{"a": "\\ud800"}',
                    b'{"\\udc00": 1}',
                    b"\xff\xfe{\x00}\x00",
                    b'{"a": 1',
                    b"",
                    b'"just a string"',
                    b"[]",
                    b"null",
                    b"1" * 5000,
                ]
            ),
        )
    )
    def run(content):
        response = raw.http.post(mcp_url, content=content, headers=raw.headers("tools/list"))
        clean(response)
        note(f"raw body: HTTP {response.status_code}")
        assert response.status_code in (400, 404, 202), response.text

    run()
    victim.assert_unchanged()


# --- tool arguments, context, and agent-authored questions ---------------------------------------------


def test_random_tool_arguments_and_context_never_start_a_call_that_fails_validation(mcp_url, token, victim):
    raw = Raw(mcp_url, token)

    arguments_ = st.dictionaries(
        st.sampled_from(["greeting", "message ", "to", "x"]) | st.text(max_size=6), json_values, max_size=4
    )

    @cases(400)
    @given(
        st.sampled_from(STRICT_TOOLS),
        arguments_ | json_values,
        st.none() | arguments_ | json_values,
        st.none() | st.none() | st.none() | json_values,
    )
    def run(tool, arguments, context, extra):
        params: dict[str, Any] = {"name": tool, "arguments": arguments, "_meta": meta()}
        if context is not None:
            params["context"] = context
        if isinstance(extra, dict):
            params.update({k: v for k, v in extra.items() if k not in ("name", "_meta")})
        body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
        response = raw.post(body, {**raw.headers("tools/call"), **base_headers("tools/call", tool)})
        answer = clean(response, body)
        note("tool arguments: " + ("error result" if "result" in answer else f"error {answer['error']['code']}"))
        if "result" in answer:
            assert answer["result"]["isError"] is True
            assert answer["result"]["content"][0]["text"].startswith(f"Invalid arguments for {tool}")

    run()
    victim.assert_unchanged()
    assert not ToolCall.objects.exclude(pk=victim.call.pk).exists()


def test_questions_written_by_agent_authors_are_valid_forms_or_unaskable(mcp_url, token, victim, settings):
    """typed_from_input, relay_from_input and relay_url ask what their arguments say: any
    response_schema, relayed request list or URL an agent author could write."""
    from tests.test_schema_properties import good_form, relay_request, schema_like

    settings.MCP_RUN_WAIT_SECONDS = 20  # a run that never settles (a crashed worker) fails the test
    raw = Raw(mcp_url, token)
    values = {
        "typed_from_input": st.one_of(good_form, schema_like(), json_values),
        "relay_from_input": st.one_of(
            st.lists(relay_request, max_size=2),
            st.dictionaries(st.text(max_size=4), relay_request, max_size=2),
            json_values,
        ),
        "relay_url": st.one_of(
            st.sampled_from(
                [
                    "https://example.com/a",
                    "https://[::1",
                    "http://example.com",
                    "https://u:p@example.com/",
                    "https://example.com:99999/",
                    "http://localhost:1/x",
                ]
            ),
            json_values,
        ),
    }

    @cases(150)
    @given(st.sampled_from(sorted(values)), st.data())
    def run(tool, data):
        value = data.draw(values[tool])
        # U+0000 and integers beyond 64 bits are refused before any run (tested below).
        assume(limits.resume_value_error(value) is None)
        result = result_of(raw.call(tool, {"value": value}))
        assert set(result) != {"resultType", "requestState", "_meta"}, "the run never settled"
        if result.get("resultType") == "input_required":
            note("agent question: asked")
            for request in result["inputRequests"].values():
                if request["params"]["mode"] == "form":
                    assert_valid_form(request["params"]["requestedSchema"])
        else:
            unaskable = result["content"][0]["text"].startswith(UNASKABLE)
            note("agent question: " + ("unaskable" if unaskable else "tool error"))
            assert result["isError"] is True
            assert "Traceback" not in json.dumps(result)

    run()
    victim.assert_unchanged()


# --- a paused call answered at random --------------------------------------------------------------------


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


def test_random_answers_and_request_states_reach_a_paused_call_and_never_another(mcp_url, token, victim):
    raw = Raw(mcp_url, token)
    paused = Paused(raw)
    (key,) = paused.requests
    form = paused.requests[key]["params"]["requestedSchema"]
    answer_values = st.one_of(
        answers_for(form).map(lambda c: {"action": "accept", "content": c}),
        st.fixed_dictionaries(
            {"action": st.sampled_from(["accept", "decline", "cancel", "ACCEPT", ""])},
            optional={
                "content": st.dictionaries(st.sampled_from(["region", "replicas", "x"]), json_leaves, max_size=3)
                | json_values
            },
        ),
        json_values,
    )

    @cases(300)
    @given(st.data())
    def run(data):
        if not paused.asking():
            paused.refresh()
        real = paused.state
        states = {
            "real": real,
            "victim": victim.state,
            "mutated": _mutated(real, data.draw),
            "other round": f"{uuid.uuid4()}.{real.partition('.')[2]}",
            "garbage": data.draw(printable),
        }
        which = data.draw(st.sampled_from(["real"] * 6 + sorted(states)))
        state: Any = states[which] if data.draw(st.integers(0, 19)) else data.draw(json_values)
        if state is None:
            return  # no requestState: a new call, not an answer to this one
        tool = data.draw(st.sampled_from([Paused.TOOL] * 9 + ["greeter"]))
        arguments = data.draw(st.sampled_from([Paused.ARGUMENTS] * 8 + [{"replicas": 2}, {"region": "x"}]))
        keys = data.draw(st.lists(st.sampled_from([key, key, "other", "answer-0"]), max_size=3, unique=True))
        responses = {k: data.draw(answer_values) for k in keys}
        rounds = paused.rounds()

        params: dict[str, Any] = {"inputResponses": responses, "requestState": state}
        if data.draw(st.integers(0, 9)) == 0:
            params["_meta"] = data.draw(meta_values())
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": meta(), **params},
        }
        response = raw.post(body, raw.headers("tools/call", tool))
        answer = clean(response, body)

        honest = state == real and tool == Paused.TOOL and arguments == Paused.ARGUMENTS
        if not honest:
            note(f"paused call, wrong state/tool/arguments: {which}")
            # The call did not move, and a wrong requestState is never told apart from another.
            assert paused.rounds() == rounds and paused.asking()
            if (
                isinstance(state, str)
                and "error" in answer
                and answer["error"]["code"] == -32602
                and "requestState" in answer["error"]["message"]
            ):
                assert answer["error"] == INVALID_STATE
            assert "inputRequests" not in answer.get("result", {})
        elif "result" in answer:
            note("paused call: " + ("answered" if paused.rounds() > rounds else "asked again"))
        else:
            note(f"paused call: refused {answer['error']['code']}")
            assert paused.rounds() == rounds

    run()
    victim.assert_unchanged()


# --- limits ---------------------------------------------------------------------------------------------


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def test_json_nested_deeper_than_the_limit_is_an_invalid_request(mcp_url, token, settings):
    raw = Raw(mcp_url, token)
    limit = settings.MCP_MAX_JSON_DEPTH
    # The body itself is one level, params two, arguments three, the value four.
    within = raw.call("digital_twin", {"message": "hi", "x": _nested(limit - 4)})
    assert within.status_code == 200
    for depth in (limit, 5000, 200_000):
        body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"x": ' + b"[" * depth
        body += b"]" * depth + b"}}"
        response = raw.http.post(mcp_url, content=body, headers=raw.headers("tools/list"))
        error = error_of(response)
        assert error["code"] == -32600 and "nested deeper" in error["message"], depth


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"])
def test_numbers_that_are_not_json_are_a_parse_error(mcp_url, token, literal):
    raw = Raw(mcp_url, token)
    body = (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "typed_from_input", '
        f'"arguments": {{"value": {literal}}}, "_meta": {json.dumps(meta())}}}}}'
    ).encode()
    response = raw.http.post(mcp_url, content=body, headers=raw.headers("tools/call", "typed_from_input"))
    assert error_of(response)["code"] == -32700
    assert not ToolCall.objects.exists()


def test_an_unpaired_surrogate_is_a_parse_error(mcp_url, token):
    raw = Raw(mcp_url, token)
    body = (
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "greeter", "arguments": '
        b'{"greeting": "\\ud800"}, "_meta": ' + json.dumps(meta()).encode() + b"}}"
    )
    response = raw.http.post(mcp_url, content=body, headers=raw.headers("tools/call", "greeter"))
    assert error_of(response)["code"] == -32700
    assert not ToolCall.objects.exists()


@pytest.mark.parametrize("where", ["arguments", "argument key", "context", "answer"])
def test_text_postgresql_cannot_store_is_refused_with_32602(mcp_url, token, where):
    raw = Raw(mcp_url, token)
    if where == "answer":
        first = asked(raw, "greeter")
        response = raw.call(
            "greeter",
            {},
            requestState=first["requestState"],
            inputResponses={"user_name": input_response_accepting(name="A\x00da")},
        )
    elif where == "context":
        response = raw.call("greeter", {}, context={"tag": "\x00"})
    else:
        response = raw.call("greeter", {"greeting": "hi\x00"} if where == "arguments" else {"greeting\x00": "hi"})
    error = error_of(response)
    assert error["code"] == -32602 and "U+0000" in error["message"]
    assert ToolCall.objects.count() == (1 if where == "answer" else 0)


def test_more_input_responses_than_the_limit_get_32602(mcp_url, token, settings):
    settings.MCP_MAX_INPUT_RESPONSES = 3
    raw = Raw(mcp_url, token)
    first = asked(raw, "greeter")
    responses = {
        "user_name": input_response_accepting(name="Ada"),
        **{f"k{i}": input_response_accepting() for i in range(3)},
    }

    error = error_of(raw.call("greeter", {}, requestState=first["requestState"], inputResponses=responses))

    assert error == {
        "code": -32602,
        "message": "Invalid params: at most 3 inputResponses per request",
        "data": {"limit": 3, "received": 4},
    }
    assert Round.objects.get(pk=first["requestState"].partition(".")[0]).state == Round.State.ASKING
    done = result_of(
        raw.call(
            "greeter",
            {},
            requestState=first["requestState"],
            inputResponses={"user_name": input_response_accepting(name="Ada")},
        )
    )
    assert done["structuredContent"] == {"greeting": "Hello, Ada!"}


def test_an_answer_larger_than_the_limit_gets_32602(mcp_url, token, settings):
    settings.MCP_MAX_ANSWER_BYTES = 1000
    raw = Raw(mcp_url, token)
    first = asked(raw, "greeter")

    error = error_of(
        raw.call(
            "greeter",
            {},
            requestState=first["requestState"],
            inputResponses={"user_name": input_response_accepting(name="é" * 600)},
        )
    )

    assert error["code"] == -32602 and error["data"] == {"key": "user_name", "limit": 1000}
    assert Round.objects.get(pk=first["requestState"].partition(".")[0]).state == Round.State.ASKING


def test_an_edit_whose_args_nest_too_deeply_for_python_is_a_32602_not_a_500(mcp_url, token):
    raw = Raw(mcp_url, token)
    arguments = {"messages": "Send the launch email"}
    first = asked(raw, "send_email", arguments)

    response = raw.call(
        "send_email",
        arguments,
        requestState=first["requestState"],
        inputResponses={only_key(first): input_response_accepting(decision="edit", args="[" * 5000)},
    )

    clean(response)
    assert error_of(response)["code"] == -32602


@pytest.mark.parametrize("where", ["arguments", "answer", "id"])
def test_integers_beyond_64_bits_are_an_invalid_request_and_the_round_stays_open(mcp_url, token, where):
    # LangGraph's checkpoints (msgpack) hold at most 64-bit integers: a larger one would end the
    # call with a serializer error after its round was claimed.
    raw = Raw(mcp_url, token)
    first = asked(raw, "typed_int")
    if where == "id":
        body = {"jsonrpc": "2.0", "id": 10**5000, "method": "tools/list", "params": {}}
        response = raw.http.post(mcp_url, content=limits_free_dumps(body), headers=raw.headers("tools/list"))
    elif where == "arguments":
        response = raw.call("typed_int", {"x": 2**64})
    else:
        response = raw.call(
            "typed_int",
            {},
            requestState=first["requestState"],
            inputResponses={only_key(first): input_response_accepting(response=-(2**63) - 1)},
        )

    error = error_of(response)
    assert error["code"] == -32600 and "64" in error["message"]
    assert ToolCall.objects.count() == 1
    done = raw.call(
        "typed_int",
        {},
        requestState=first["requestState"],
        inputResponses={only_key(first): input_response_accepting(response=2**64 - 1)},
    )
    assert result_of(done)["structuredContent"]["answer"] == 2**64 - 1


def limits_free_dumps(body: Any) -> bytes:
    import sys

    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        return json.dumps(body).encode()
    finally:
        sys.set_int_max_str_digits(old)


@pytest.mark.parametrize(
    "args",
    ['{"to": "a", "x": 1e999}', '{"to": "a\\u0000"}', '{"to": "\\ud800"}', '{"to": "a", "x": 100000000000000000000}'],
    ids=["infinity", "nul", "surrogate", "integer"],
)
def test_edited_arguments_that_cannot_be_stored_are_a_32602_and_the_round_stays_open(mcp_url, token, args):
    raw = Raw(mcp_url, token)
    arguments = {"messages": "Send the launch email"}
    first = asked(raw, "send_email", arguments)
    key = only_key(first)

    response = raw.call(
        "send_email",
        arguments,
        requestState=first["requestState"],
        inputResponses={key: input_response_accepting(decision="edit", args=args)},
    )

    clean(response)
    assert error_of(response)["code"] == -32602
    approved = raw.call(
        "send_email",
        arguments,
        requestState=first["requestState"],
        inputResponses={key: input_response_accepting(decision="approve")},
    )
    assert result_of(approved)["isError"] is False


@pytest.fixture
def rate_limit(settings):
    """A limit of 3 a minute on the configured cache backend (Redis), in a key space of this test's own."""
    settings.CACHES = {"default": {**django_settings.CACHES["default"], "KEY_PREFIX": f"hitl-test-{uuid.uuid4()}"}}
    settings.MCP_RATE_LIMIT_PER_MINUTE = 3
    return 3


def test_more_requests_a_minute_than_the_limit_get_429_with_retry_after(mcp_url, token, make_token, rate_limit):
    raw = Raw(mcp_url, token)
    for _ in range(rate_limit):
        assert raw.request("tools/list", {"_meta": meta()}).status_code == 200

    response = raw.request("tools/list", {"_meta": meta()})

    assert response.status_code == 429
    assert 1 <= int(response.headers["Retry-After"]) <= 60
    error = clean(response)["error"]
    assert error["code"] == -32003
    assert error["data"] == {"retryAfterSeconds": int(response.headers["Retry-After"]), "limitPerMinute": 3}
    # Per caller: someone else is not held up, and a wrong token is still a 401, not a 429.
    assert Raw(mcp_url, make_token("bob")).request("tools/list", {"_meta": meta()}).status_code == 200
    assert Raw(mcp_url, "hitl_wrong").request("tools/list", {"_meta": meta()}).status_code == 401


def test_the_rate_window_resets_each_minute():
    from django.test import override_settings

    with override_settings(
        MCP_RATE_LIMIT_PER_MINUTE=2,
        CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": str(uuid.uuid4())}},
    ):
        start = 1_000_000 * 60 + 50.2
        assert limits.retry_after("user:1", start) is None
        assert limits.retry_after("user:1", start + 1) is None
        assert limits.retry_after("user:1", start + 2) == 8  # the window ends at the next full minute
        assert limits.retry_after("user:2", start + 2) is None
        assert limits.retry_after("user:1", start + 10) is None  # a new window
    with override_settings(MCP_RATE_LIMIT_PER_MINUTE=0):
        assert all(limits.retry_after("user:1") is None for _ in range(100))
