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


@pytest.fixture(scope="session", autouse=True)
def no_account_is_the_default_caller(django_db_setup, django_db_blocker):
    """The driver's calls are made by `user:1` unless a test says otherwise. Were an account a test
    creates the user with id 1, every such call would be its own, and the decision service would
    refuse its approvals as self-approval: the first id is used up here, on each test database."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    table = get_user_model()._meta.db_table
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        highest = f"SELECT MAX(id) FROM {connection.ops.quote_name(table)}"
        cursor.execute(f"SELECT setval(pg_get_serial_sequence(%s, 'id'), GREATEST(1, ({highest})))", [table])


@pytest.fixture(autouse=True)
def in_process(db, monkeypatch):
    driver.no_broker(monkeypatch)


@pytest.fixture
def model_in_this_process(monkeypatch, fake_model):
    """Runs of a graph that calls a model talk to the fake model server."""
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("OPENAI_BASE_URL", f"{fake_model}/v1")


@pytest.fixture
def model_requests(model_in_this_process, fake_model):
    """The requests the fake model gets from now on (the function returned lists them)."""
    import httpx

    httpx.delete(f"{fake_model}/_requests")
    return lambda: httpx.get(f"{fake_model}/_requests").json()


@pytest.fixture
def model_asks_for_notes_and_a_message(model_in_this_process, monkeypatch):
    """The fake model's first turn asks for a read-only tool and the high-risk one together."""
    from tests.fakes import openai_server
    from tests.staff_approvals import DRAFT

    script = openai_server.next_turn

    def both(messages, tools):
        if not any(m["role"] == "tool" for m in messages):
            calls = [
                {"id": "call_1", "name": "search_knowledge", "args": {"query": "django"}},
                {"id": "call_2", "name": "draft_contact_message", "args": DRAFT},
            ]
            return {"content": "I'll look that up and pass it on.", "tool_calls": calls}
        return script(messages, tools)

    monkeypatch.setattr(openai_server, "next_turn", both)


@pytest.fixture
def paused_approval(model_in_this_process):
    """A digital_twin call that asked to message the owner: the approval it waits for."""
    from tests.staff_approvals import HIRE_ME

    return driver.paused_for_staff("digital_twin", {"message": HIRE_ME})
