"""The Celery broker's transport on Redis: kombu's own, with one Redis client per channel for its
commands instead of a new one for each.

kombu's Redis channel builds a `redis.Redis` for every command it sends outside its polling loop
(`Channel.conn_or_acquire`): each publish, each delivery's unacked bookkeeping, each
acknowledgement, three per hand-off to a worker, and building one fills a table of a few hundred
reply parsers (docs/performance.md, "Measured choices"). A client is only a view of the channel's
connection pool, which hands each command a connection of its own and is safe to share between
threads, so one client per pool serves them all. The pool is the channel's current one: kombu drops
it after a fork and when the channel closes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kombu.transport import redis
from redis.exceptions import ConnectionError as RedisConnectionError


class Channel(redis.Channel):
    _commands_client: Any = None

    @contextmanager
    def conn_or_acquire(self, client: Any = None) -> Iterator[Any]:
        if client:
            yield client
            return
        if self.connection.client is None:
            # The worker is releasing a connection Redis dropped (a restart): closing its channel
            # still restores the unacknowledged tasks through a new client, whose pool cannot be
            # built from a released connection, and kombu's AttributeError ended the worker
            # ("Unrecoverable error"). A connection error is what the release expects and ignores;
            # the worker then reconnects. A Redis without persistence lost those tasks anyway.
            raise RedisConnectionError("the broker connection was released")
        shared = self._commands_client
        if shared is None or shared.connection_pool is not self.pool:
            shared = self._commands_client = self._create_client()
        yield shared


class Transport(redis.Transport):
    Channel = Channel
