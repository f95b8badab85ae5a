"""The bench's stack-floor hand-off (`bench.tasks.floor_run`): the graph's run and nothing
else, so that `make bench` can set the gateway's rounds against it."""

from __future__ import annotations

import time
import uuid

import redis
from django.conf import settings

from bench.tasks import floor_run
from graph_runtime import runner
from graph_runtime.registry import get_graph
from mcp_gateway.models import Round, ToolCall


def test_the_floor_run_takes_the_graph_to_its_question_and_on_to_its_end_touching_no_row_of_the_gateway():
    subscriber = redis.Redis.from_url(settings.REDIS_URL).pubsub(ignore_subscribe_messages=True)
    channel = f"hitl-test:floor:{uuid.uuid4().hex}"
    subscriber.subscribe(channel)
    thread_id = f"floor-{uuid.uuid4()}"
    registered = get_graph("choose_region")
    assert registered is not None

    floor_run(channel, "choose_region", thread_id)
    paused = runner.state(registered, thread_id)
    floor_run(channel, "choose_region", thread_id, "eu-west-1")
    ended = runner.state(registered, thread_id)

    assert len(paused.interrupts) == 1
    assert ended.next == () and ended.values["region"] == "eu-west-1"
    assert _published(subscriber, 2) == [channel.encode()] * 2
    assert not ToolCall.objects.exists() and not Round.objects.exists()
    subscriber.close()
    runner.delete_thread(thread_id)


def _published(subscriber, count: int) -> list[bytes]:
    """The channels of the first `count` messages (the subscription's own reply is skipped)."""
    channels: list[bytes] = []
    deadline = time.monotonic() + 5
    while len(channels) < count and time.monotonic() < deadline:
        if (message := subscriber.get_message(timeout=0.5)) is not None:
            channels.append(message["channel"])
    return channels
