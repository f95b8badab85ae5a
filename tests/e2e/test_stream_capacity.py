"""How many event streams a web process serves, and how many of them one caller holds
(docs/configuration.md, MCP_MAX_STREAMS and MCP_STREAMS_PER_CALLER): every kind of stream counts
together, one caller at its quota gets 429 and leaves every other caller served, and a process at
its cap gets 503. Over HTTP, against the production ASGI app under uvicorn (which tells the app
when a client goes away), with a real worker and Redis."""

from __future__ import annotations

from contextlib import ExitStack

import httpx
import pytest

from tests.clients import Raw, event_stream_messages, meta
from tests.e2e.approvals import wait_until
from tests.e2e.older_sessions import Session, events
from tests.processes import Web, service_env

QUOTA = 3
# Room for two callers at their quota and two more streams: a third caller finds it full.
CAP = 2 * QUOTA + 2
RETRY_AFTER = "5"


@pytest.fixture(scope="module")
def web(celery_queue, fake_model, tmp_path_factory):
    env = service_env(
        celery_queue,
        fake_model,
        MCP_OLDER_CLIENTS="answer",
        MCP_STREAMS_PER_CALLER=str(QUOTA),
        MCP_MAX_STREAMS=str(CAP),
        MCP_SESSIONS_PER_CALLER="1000",
        MCP_DB_THREADS="2",
        CHECKPOINT_POOL_MAX_SIZE="2",
    )
    web = Web(env, tmp_path_factory.mktemp("capacity") / "web.log").start()
    yield web
    web.stop()


@pytest.fixture
def url(web, celery_worker):
    yield f"{web.url}/mcp/"
    celery_worker.wait_until_idle()


def _hold(held: ExitStack, session: Session) -> None:
    assert _held(held, session)


def _held(held: ExitStack, session: Session) -> bool:
    """Open the session's own stream and keep it open until `held` closes (the session's HTTP
    client too: a client garbage-collected closes its connections); False when it is refused."""
    held.callback(session.http.close)
    response = held.enter_context(session.own_stream())
    if response.status_code != 200:
        return False
    # Kept: a reader of the response dropped half-way closes its connection.
    seen = events(response)
    held.callback(seen.close)
    assert next(seen)[0] == "tasks.0"  # served, not only accepted
    return True


def _refusal(stream) -> httpx.Response:
    """A request whose answer would be a stream, refused: its JSON error response."""
    with stream as response:
        response.read()
    assert response.headers["content-type"] == "application/json", response.text
    return response


def _listen(url: str, token: str):
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "subscriptions/listen",
        "params": {"notifications": {}, "_meta": meta()},
    }
    raw = Raw(url, token)
    return raw.http.stream("POST", url, json=body, headers=raw.headers("subscriptions/listen"))


def _older_call(session: Session, tool: str):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": {}}}
    return session.http.stream("POST", session.url, json=body, headers=session.headers())


def test_a_caller_opens_streams_up_to_its_quota_and_any_stream_more_is_429_with_retry_after(url, token):
    with ExitStack() as held:
        for _ in range(QUOTA):
            _hold(held, Session(url, token))

        refused = [
            _refusal(Session(url, token).own_stream()),
            _refusal(_older_call(Session(url, token), "choose_region")),
            _refusal(_listen(url, token)),
        ]

    for response in refused:
        assert response.status_code == 429 and response.headers["Retry-After"] == RETRY_AFTER, response.text
        error = response.json()["error"]
        assert error["code"] == -32003 and error["message"].startswith("Too many streams")
        assert error["data"] == {"scope": "caller", "limit": QUOTA, "retryAfterSeconds": int(RETRY_AFTER)}


def test_a_caller_at_its_quota_leaves_another_callers_streams_and_tool_calls_served(url, token, make_token):
    other = make_token("grace")
    with ExitStack() as held:
        for _ in range(QUOTA):
            _hold(held, Session(url, token))

        theirs = Session(url, other)
        _hold(held, theirs)
        with _older_call(theirs, "choose_region") as response:
            assert response.status_code == 200
            seen = events(response)
            next(seen)
            _, question, _ = next(seen)
        with _listen(url, other) as listening:
            assert listening.status_code == 200
            messages = list(event_stream_messages(listening))

    assert question["method"] == "elicitation/create"
    assert messages[0]["method"] == "notifications/subscriptions/acknowledged" and "result" in messages[-1]


def test_a_process_serving_its_cap_of_streams_answers_503_with_retry_after_to_every_caller(url, make_token):
    callers = [make_token(f"caller-{n}") for n in range(CAP // QUOTA + 1)]
    with ExitStack() as held:
        opened = 0
        for caller in callers:
            for _ in range(min(QUOTA, CAP - opened)):
                _hold(held, Session(url, caller))
                opened += 1

        newcomer = make_token("newcomer")
        refused = [_refusal(Session(url, newcomer).own_stream()), _refusal(_listen(url, newcomer))]

    assert opened == CAP
    for response in refused:
        assert response.status_code == 503 and response.headers["Retry-After"] == RETRY_AFTER, response.text
        error = response.json()["error"]
        assert error["code"] == -32603 and error["message"].startswith("Stream limit reached")
        assert error["data"] == {"scope": "server", "limit": CAP, "retryAfterSeconds": int(RETRY_AFTER)}


def test_streams_whose_clients_went_away_give_their_places_back(url, token):
    def quota_opens() -> bool:
        with ExitStack() as held:
            # False until the server has seen every earlier client go.
            return all(_held(held, Session(url, token)) for _ in range(QUOTA))

    # The caller's quota, opened and dropped again and again: a place never given back would
    # refuse a later round for good.
    for _ in range(4):
        wait_until(quota_opens, timeout=30)
