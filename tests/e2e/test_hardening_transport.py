"""Hardening of the transport: random and mutated envelopes, headers and bodies get a JSON-RPC
answer and never a 5xx, on the live server and under the production ASGI app (uvicorn), whose
request heads, hosts and bodies are checked before anything is parsed or stored. Each property
test first pauses a call owned by someone else and checks at the end that its rows and its
checkpoint are exactly as they were."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest
from django.conf import settings as django_settings
from hypothesis import given
from hypothesis import strategies as st

from mcp_gateway.models import ToolCall
from tests.clients import Raw, meta, plain_http
from tests.e2e.fuzzing import _envelope_case, base_headers, cases, clean, note
from tests.processes import Web, service_env

pytestmark = pytest.mark.usefixtures("generated_cases_summary")


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
    (hitl_project/asgi.py), on the test database and this test run's queue."""
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
