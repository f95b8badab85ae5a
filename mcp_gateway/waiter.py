"""Waiting for a round's run without holding a thread.

The worker publishes on Redis when a round settles; the async view subscribes before it looks,
so no notification is missed. Without Redis (the embedded default runs tasks in-process) the
view polls the row with a short backoff.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from functools import cache

from asgiref.sync import sync_to_async
from django.conf import settings

from .models import Round

logger = logging.getLogger(__name__)


def _channel(round_id: uuid.UUID | str) -> str:
    return f"hitl:round:{round_id}"


@cache
def _publisher():
    import redis

    return redis.Redis.from_url(settings.REDIS_URL)


def notify(round_id: uuid.UUID | str) -> None:
    if not settings.REDIS_URL:
        return
    try:
        _publisher().publish(_channel(round_id), b"1")
    except Exception:  # waiters re-check the row every second anyway
        logger.warning("could not publish the end of round %s", round_id, exc_info=True)


@sync_to_async(thread_sensitive=False)
def _running(round_id: uuid.UUID) -> bool:
    return Round.objects.filter(pk=round_id, state=Round.State.RUNNING).exists()


async def wait_for(round_id: uuid.UUID, timeout: float) -> bool:
    """Wait until the round is no longer RUNNING; False when the timeout came first."""
    deadline = time.monotonic() + timeout
    if not settings.REDIS_URL:
        delay = 0.002
        while await _running(round_id):
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.1)
        return True

    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(settings.REDIS_URL)
    try:
        async with client.pubsub() as pubsub:
            await pubsub.subscribe(_channel(round_id))
            while await _running(round_id):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                await pubsub.get_message(ignore_subscribe_messages=True, timeout=min(1.0, remaining))
            return True
    finally:
        await client.aclose()
