"""The fast layer: the paused-call state machine driven in the test's own thread (driver.py),
against the real PostgreSQL test database, LangGraph's PostgresSaver and the graphs of
tests/langgraph.json, with no web server, broker or worker process.

Each test runs in pytest-django's rolled-back transaction; LangGraph's checkpoints are written
through the checkpointer's own pool, outside it, on threads of fresh ids."""

from __future__ import annotations

import pytest

from tests.inprocess import driver


@pytest.fixture(scope="session", autouse=True)
def checkpoint_pools(django_db_setup):
    """The checkpointer's pool holds connections to the test database: closed before it is dropped."""
    yield
    driver.close_checkpoint_pools()


@pytest.fixture(autouse=True)
def in_process(db, monkeypatch):
    driver.no_broker(monkeypatch)


@pytest.fixture
def model_in_this_process(monkeypatch, fake_model):
    """Runs of a graph that calls a model talk to the fake model server."""
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("OPENAI_BASE_URL", f"{fake_model}/v1")
