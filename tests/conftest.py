"""For both layers: the database and Redis in the report header, and a fake OpenAI-compatible model
server (the only thing faked: it is outside the machine in production). The end-to-end layer's
processes are in tests/e2e/conftest.py."""

from __future__ import annotations

import os

import pytest

from tests.fakes import openai_server


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
