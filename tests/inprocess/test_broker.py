"""The broker's transport (hitl_project/broker.py): kombu's Redis transport, sending each channel's
commands through one Redis client of the channel's current connection pool, against the test
run's Redis."""

from __future__ import annotations

import uuid

from hitl_project import broker
from hitl_project.celery import app


def test_the_celery_app_talks_to_redis_through_the_projects_transport():
    with app.connection_for_write() as connection:
        assert isinstance(connection.transport, broker.Transport)


def test_a_channel_sends_its_commands_through_one_client_of_its_current_pool():
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        with channel.conn_or_acquire() as first, channel.conn_or_acquire() as second:
            assert first is second
            assert first.connection_pool is channel.pool
        # What kombu does in a forked child: the pool is dropped, and the client with it.
        channel._after_fork()
        with channel.conn_or_acquire() as after_fork:
            assert after_fork is not first
            assert after_fork.connection_pool is channel.pool


def test_a_message_is_published_delivered_and_acknowledged_through_the_shared_client():
    queue = f"hitl-test-broker-{uuid.uuid4().hex[:8]}"
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        simple = connection.SimpleQueue(queue)
        try:
            simple.put({"round": "r-1"})
            message = simple.get(timeout=5)
            with channel.conn_or_acquire() as client:
                # Delivered and not yet acknowledged: in the unacked table, as acks_late needs it.
                assert client.hexists(channel.unacked_key, message.delivery_tag)
                message.ack()
                assert not client.hexists(channel.unacked_key, message.delivery_tag)
                assert client.llen(queue) == 0
            assert message.payload == {"round": "r-1"}
        finally:
            simple.close()
            with channel.conn_or_acquire() as client:
                client.delete(queue)
