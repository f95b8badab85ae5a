"""The benchmark's own Celery tasks, loaded only by its worker (`--include bench.tasks`, bench/stack.py):
hand-offs that do nothing of the gateway's, so `make bench` can set a round against what the stack
costs without it."""

from __future__ import annotations

from functools import cache
from typing import Any

import redis
from celery import shared_task
from django.conf import settings


@cache
def _publisher() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


def _publish(channel: str) -> None:
    # As a round's end is published (mcp_gateway/calls/waiter.py): one client for the process, one
    # message. A client made for each message connected anew each time (HELLO, SELECT, and
    # redis-py reading its package metadata), a cost no round pays.
    _publisher().publish(channel, b"1")


@shared_task(name="bench.tasks.echo", acks_late=True, ignore_result=True)
def echo(channel: str) -> None:
    """A hand-off and nothing else: through the broker to a worker, acknowledged late like a round,
    and back as a Redis publish on `channel`, as a round's end is (the part of a round that Celery
    and Redis take whatever the gateway does)."""
    _publish(channel)


@shared_task(name="bench.tasks.floor_run", acks_late=True, ignore_result=True)
def floor_run(channel: str, graph: str, thread_id: str, resume: Any = None) -> None:
    """A hand-off that runs a registered graph and nothing else: the graph bound to the
    checkpointer, invoked with no input (to its interrupt) or resumed with `resume`, on `thread_id`,
    with no row of the gateway read or written; back as a Redis publish on `channel`, as echo's.
    Whole rounds of it under load are the stack's floor (two bare requests, two hand-offs, the
    graph) at the concurrency a round is measured at."""
    from langgraph.types import Command

    from graph_runtime import runner
    from graph_runtime.registry import get_graph

    registered = get_graph(graph)
    if registered is None:
        raise LookupError(f"the graph {graph!r} is not registered")
    runner.bound(registered.graph).invoke(
        {} if resume is None else Command(resume=resume), {"configurable": {"thread_id": thread_id}}
    )
    _publish(channel)
