"""Send the user to a URL: a url question, its answers, and the rules a URL must meet. Driven
in-process."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from tests.asking import CALENDAR, unaskable, url_request
from tests.inprocess.driver import answer, asked, call
from tests.rounds import input_response_accepting


def test_the_connect_calendar_agent_sends_the_user_to_its_url():
    first = asked("connect_calendar")

    assert first["inputRequests"] == {"calendar_auth": CALENDAR}


@pytest.mark.parametrize(
    "response, status",
    [
        ({"action": "accept"}, "connected"),
        ({"action": "decline"}, "not connected"),
        ({"action": "cancel"}, "not connected"),
    ],
    ids=["accept", "decline", "cancel"],
)
def test_an_accept_answer_without_content_confirms_the_url_flow_and_others_do_not(response, status):
    first = asked("connect_calendar")

    result = answer("connect_calendar", {}, first, {"calendar_auth": response})

    assert result["structuredContent"] == {"status": status}


def test_an_accept_answer_to_a_url_question_reaches_the_agent_without_content():
    # relay_url returns what the agent received.
    arguments = {"value": "https://example.com/oauth"}
    first = asked("relay_url", arguments)

    result = answer("relay_url", arguments, first, {"page": input_response_accepting(code="from the client")})

    assert result["structuredContent"]["answers"] == [{"page": {"action": "accept"}}]


class _Visits(BaseHTTPRequestHandler):
    """A page that counts who opens it."""

    paths: list[str] = []

    def do_GET(self):
        self.paths.append(self.path)
        self.send_response(200)
        self.end_headers()

    do_HEAD = do_POST = do_GET

    def log_message(self, *args):
        pass


def test_the_client_receives_the_url_in_the_question_and_the_server_does_not_open_it():
    page = HTTPServer(("127.0.0.1", 0), _Visits)
    threading.Thread(target=page.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    try:
        arguments = {"value": f"http://127.0.0.1:{page.server_port}/oauth/start"}
        first = asked("relay_url", arguments)
        assert first["inputRequests"] == {"page": url_request("Open this page.", arguments["value"])}

        result = answer("relay_url", arguments, first, {"page": {"action": "accept"}})
        assert result["structuredContent"]["answers"] == [{"page": {"action": "accept"}}]
    finally:
        page.shutdown()
        page.server_close()
    assert _Visits.paths == []


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/oauth",
        "http://localhost:8080/callback",
        "http://127.0.0.1/callback",
        "http://[::1]:9000/callback",
        "https://example.com/" + "a" * (4096 - len("https://example.com/")),
        "https://bücher.example/",
        "https://intranet/login",
    ],
    ids=["https", "http localhost", "http 127.0.0.1", "http [::1]", "4096 characters", "IDN host", "one-label host"],
)
def test_a_url_that_meets_the_rules_is_asked(url):
    first = asked("relay_url", {"value": url})

    assert first["inputRequests"] == {"page": url_request("Open this page.", url)}


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/login",
        "http://localhost.example.com/login",
        "ftp://example.com/file",
        "javascript:alert(1)",
        "https:///no-host",
        "https://user:pw@example.com/login",
        "https://user@example.com/login",
        "https://:pw@example.com/login",
        "https://example.com/" + "a" * (4097 - len("https://example.com/")),
        "",
        " https://example.com/",
        "https://exa mple.com/",
        "https://example.com/\n",
        "https://example.com/a\tb",
        "https://exa%20mple.com/",
        "https://exa_mple.com/",
        "https://-example.com/",
        "https://999.1.1.1/",
    ],
    ids=[
        "http elsewhere",
        "http localhost lookalike",
        "ftp",
        "javascript",
        "no host",
        "user and password",
        "user name",
        "password",
        "4097 characters",
        "empty",
        "leading space",
        "space in the host",
        "trailing newline",
        "tab",
        "escape in the host",
        "underscore in the host",
        "label starting with a hyphen",
        "not an IPv4 address",
    ],
)
def test_a_url_that_breaks_the_rules_is_unaskable(url):
    assert unaskable(call("relay_url", {"value": url}))
