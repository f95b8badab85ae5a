"""The one stream pump every event stream of /mcp/ runs (mcp_gateway/streams/pump.py), and the
places streams hold (mcp_gateway/streams/capacity.py): the rules, one test each. Over HTTP, with
every kind of stream: tests/e2e/test_stream_capacity.py."""

from __future__ import annotations

import time

import pytest

from tests.inprocess import driver

PING = ": ping\r\n\r\n"


@pytest.fixture
def few_streams(settings):
    """A quota of 2 streams per caller, and room for 3 more streams in the process."""
    settings.MCP_STREAMS_PER_CALLER = 2
    settings.MCP_MAX_STREAMS = driver.streams_open() + 3
    return settings.MCP_MAX_STREAMS


def test_a_caller_at_its_quota_is_refused_429_with_retry_after_and_another_caller_is_not(few_streams):
    held = [driver.stream_place("quota:1") for _ in range(2)]

    with pytest.raises(driver.RpcError) as refused:
        driver.stream_place("quota:1")

    assert (refused.value.http_status, refused.value.retry_after) == (429, 5)
    assert refused.value.data == {"scope": "caller", "limit": 2, "retryAfterSeconds": 5}
    held.append(driver.stream_place("quota:2"))
    assert (driver.streams_open("quota:1"), driver.streams_open("quota:2")) == (2, 1)
    for place in held:
        place.give_back()


def test_a_process_at_its_cap_refuses_every_caller_503_with_retry_after(few_streams):
    held = [driver.stream_place(f"cap:{n}") for n in range(3)]

    with pytest.raises(driver.RpcError) as refused:
        driver.stream_place("cap:9")

    assert (refused.value.http_status, refused.value.retry_after) == (503, 5)
    assert refused.value.data == {"scope": "server", "limit": few_streams, "retryAfterSeconds": 5}
    for place in held:
        place.give_back()


def test_a_place_given_back_twice_counts_once(few_streams):
    place, other = driver.stream_place("twice"), driver.stream_place("twice")

    place.give_back()
    place.give_back()

    assert driver.streams_open("twice") == 1
    other.give_back()
    assert driver.streams_open("twice") == 0


def test_a_place_whose_stream_never_started_is_given_back_when_dropped(few_streams):
    place = driver.stream_place("dropped")
    assert driver.streams_open("dropped") == 1

    del place

    assert driver.streams_open("dropped") == 0


def test_the_pump_sends_the_first_frames_then_each_reads_until_one_says_done_and_gives_its_place_back():
    sent = driver.pumped(
        [{"frames": [b"a"], "poll": 0}, {"frames": [b"b", b"c"], "poll": 0}, {"frames": [b"d"], "done": True}],
        first=(b"first",),
    )

    assert sent == ["first", "a", "b", "c", "d"]
    assert driver.streams_open("pumped") == 0


def test_a_stream_whose_client_goes_away_gives_its_place_back():
    endless = [{"frames": [b"x"], "poll": 0}] * 100

    sent = driver.pumped(endless, client_leaves_after=3)

    assert sent == ["x"] * 3
    assert driver.streams_open("pumped") == 0


def test_a_stream_whose_read_fails_gives_its_place_back():
    with pytest.raises(RuntimeError):
        driver.pumped([{"frames": [b"x"], "poll": 0}, RuntimeError("the database went away")])

    assert driver.streams_open("pumped") == 0


def test_an_idle_stream_sends_a_ping_every_mcp_stream_keepalive_seconds(settings):
    settings.MCP_STREAM_KEEPALIVE_SECONDS = 0.05

    sent = driver.pumped([{}, {"frames": [b"news"]}, {}, {"done": True}])

    # A ping after each wait that nothing ended before the keep-alive was due, and only then.
    assert sent == [PING, "news", PING, PING]


def test_a_read_that_asks_to_be_read_again_soon_is_not_kept_waiting(settings):
    settings.MCP_STREAM_KEEPALIVE_SECONDS = 30
    started = time.monotonic()

    sent = driver.pumped([{"poll": 0.05}, {"frames": [b"moved"], "done": True}])

    assert sent == ["moved"] and time.monotonic() - started < 2
