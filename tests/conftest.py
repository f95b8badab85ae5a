"""For both layers: the database and Redis in the report header, a fake OpenAI-compatible model
server (the only thing faked: it is outside the machine in production), and the test process's
own password hashing and flush between tests, made cheap. The end-to-end layer's processes are in
tests/e2e/conftest.py."""

from __future__ import annotations

import os

import pytest

from tests.fakes import openai_server


@pytest.fixture(scope="session", autouse=True)
def fast_password_hashing():
    """Passwords made and checked in this process are hashed once, not with the production
    hasher's million PBKDF2 iterations (a third of a second each, most of a staff test's time), as
    Django's testing documentation advises. What the tests check of a password, that the right one
    lets staff in and a wrong one does not, is the same with either hasher. The served processes
    the end-to-end layer starts keep the production settings."""
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


def pytest_report_header(config):
    db = os.environ.get("DATABASE_URL", "sqlite (embedded default)")
    return f"database: {db}; redis: {os.environ.get('REDIS_URL', 'none: tasks run in-process')}"


@pytest.fixture(scope="session")
def fake_model():
    server, url = openai_server.start()
    yield url
    server.shutdown()


@pytest.fixture
def receiver():
    """A local HTTP server that receives webhooks (tests/fakes/webhook_receiver.py)."""
    from tests.fakes import webhook_receiver

    server = webhook_receiver.start()
    yield server
    server.shutdown()


@pytest.fixture(scope="session", autouse=True)
def flush_by_delete():
    """A test on a transactional database (one whose rows other threads or processes must see) is
    followed by Django's flush, which on PostgreSQL is one TRUNCATE of every table: a new file for
    each table and index, and a WAL flush, about 0.2 s, for the handful of rows a test leaves.
    DELETE empties the same tables, with the foreign keys checked at the commit, when all are
    empty, in a tenth of the time. A flush that resets sequences keeps Django's TRUNCATE."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or not tables:
            return truncate(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        return ["SET CONSTRAINTS ALL DEFERRED;", *(f"DELETE FROM {self.quote_name(table)};" for table in tables)]

    DatabaseOperations.sql_flush = sql_flush
    yield
    DatabaseOperations.sql_flush = truncate
