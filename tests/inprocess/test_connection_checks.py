"""Django's connection check in the worker: a poll of the socket, and a SELECT 1 only when the
socket has something to read (hitl_project/postgresql). A web request keeps the round trip."""

from __future__ import annotations

import time

import psycopg
import pytest
from django.db import connection
from django.db.backends.postgresql import base as django_postgresql

from graph_runtime.checkpointer import postgres_dsn
from graph_runtime.connections import spoke_while_idle
from hitl_project.postgresql.base import DatabaseWrapper

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def in_the_worker(monkeypatch):
    monkeypatch.setattr(DatabaseWrapper, "polled_check", True)


def _no_round_trip(monkeypatch) -> None:
    def round_trip(self):
        raise AssertionError("the check sent a query")

    monkeypatch.setattr(django_postgresql.DatabaseWrapper, "is_usable", round_trip)


def _ended_by_the_server(timeout: float = 10.0) -> None:
    """What a restart does to the connection: its backend ended, its goodbye on the socket."""
    pid = connection.connection.info.backend_pid
    with psycopg.connect(postgres_dsn(), autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
    deadline = time.monotonic() + timeout
    while not spoke_while_idle(connection.connection):
        assert time.monotonic() < deadline, "the ended session's socket never became readable"
        time.sleep(0.01)


def test_in_the_worker_a_live_connection_is_checked_without_a_round_trip(in_the_worker, monkeypatch):
    connection.ensure_connection()
    _no_round_trip(monkeypatch)

    assert connection.is_usable()


def test_in_the_worker_a_connection_the_server_ended_is_replaced_before_a_task_uses_it(in_the_worker):
    connection.ensure_connection()
    _ended_by_the_server()

    # What the worker does before each task (close_old_connections), then the task's first statement.
    connection.close_if_unusable_or_obsolete()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)


def test_outside_the_worker_every_check_is_a_round_trip(monkeypatch):
    connection.ensure_connection()
    _no_round_trip(monkeypatch)

    with pytest.raises(AssertionError, match="sent a query"):
        connection.is_usable()
