"""When the process is full it says so at once: a first call while the embedded default's run
queue is full is refused with 503 and Retry-After before anything is written; an answer is still
taken; a database another process holds locked is a 503 with Retry-After, not a 500
(mcp_gateway/calls/overload.py)."""

from __future__ import annotations

import logging
import sqlite3

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.contrib.sessions.models import Session
from django.db import connections
from django.db.utils import ConnectionHandler
from django.urls import reverse

from tests.inprocess.driver import (
    ENQUEUED,
    RpcError,
    ToolCall,
    asked,
    call,
    call_of,
    run_threads_full,
)
from tests.rounds import input_response_accepting


@pytest.fixture
def small_queue(settings):
    settings.EMBEDDED_RUN_QUEUE_MAX = 2


def test_a_first_call_while_the_run_queue_is_full_is_refused_with_503_and_retry_after_and_writes_nothing(
    small_queue,
):
    with run_threads_full(), pytest.raises(RpcError) as refused:
        call("choose_region")

    assert (refused.value.http_status, refused.value.code) == (503, -32603)
    assert refused.value.retry_after == 2 and refused.value.data == {"retryAfterSeconds": 2}
    assert not ToolCall.objects.exists() and not ENQUEUED
    # Once the queue has room, the same call is taken.
    assert asked("choose_region")["resultType"] == "input_required"


def test_an_answer_while_the_run_queue_is_full_is_taken_and_its_resume_queued(small_queue):
    paused = asked("choose_region")
    responses = {key: input_response_accepting(response="eu-west-1") for key in paused["inputRequests"]}

    with run_threads_full():
        still_running = call(
            "choose_region", responses=responses, request_state=paused["requestState"], outlasting=True
        )

    assert still_running["resultType"] == "input_required" and "inputRequests" not in still_running
    assert call_of(paused["requestState"]).rounds.get(number=0).answers == responses
    assert len(ENQUEUED) == 2  # round 0, then the answer's resume


# --- a database another process holds locked --------------------------------------------------------


@pytest.fixture
def sqlite_held_by_another_process(tmp_path):
    """The default database, for this thread, is a SQLite file of the embedded default's kind, with
    a staff member logged in; another connection (as another process would) holds its write lock."""
    handler = ConnectionHandler(
        {
            "default": {
                "ENGINE": "hitl_project.sqlite",
                "NAME": str(tmp_path / "db.sqlite3"),
                "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 0.2, "init_command": "PRAGMA journal_mode=WAL"},
            }
        }
    )
    database, default = handler["default"], connections["default"]
    with database.schema_editor() as editor:
        for model in (ContentType, Permission, Group, User, Session):
            editor.create_model(model)
    connections["default"] = database
    other = sqlite3.connect(tmp_path / "db.sqlite3", isolation_level=None)
    try:
        yield lambda: other.execute("BEGIN IMMEDIATE")
    finally:
        other.close()
        connections["default"] = default
        database.close()


def test_a_staff_page_whose_database_another_process_holds_locked_answers_503_with_retry_after(
    sqlite_held_by_another_process, client, caplog
):
    client.force_login(User.objects.create_superuser("root"))
    sqlite_held_by_another_process()

    with caplog.at_level(logging.WARNING):
        page = client.post(reverse("admin:approvals_approvalpolicy_add"), {"name": "x"})

    assert page.status_code == 503 and page["Retry-After"] == "2"
    assert [(r.levelname, r.exc_info) for r in caplog.records] == [("WARNING", None)]
    assert "database is locked" in caplog.records[0].getMessage()
