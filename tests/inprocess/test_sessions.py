"""Sessions of the handshake revisions (MCP_OLDER_CLIENTS=answer): the rules of the transport and
of this service for them. Their HTTP answers (404, 429) are checked end to end in
tests/e2e/test_older_clients_answering.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.inprocess import driver


@pytest.fixture(autouse=True)
def answering(settings):
    settings.MCP_OLDER_CLIENTS = "answer"


def test_a_session_id_is_stored_only_as_a_keyed_hash(settings):
    raw = driver.open_session()

    (stored,) = driver.sessions_stored()
    assert raw not in (stored.key_hash, str(stored.pk), stored.caller)
    assert stored.key_hash == driver.stored_session(raw).key_hash
    settings.SECRET_KEY = "another key"
    assert driver.session_of(raw) is None  # keyed: another key gives another hash


def test_a_session_id_is_high_entropy_and_new_every_time():
    ids = {driver.open_session() for _ in range(5)}

    assert len(ids) == 5
    assert all(len(raw) >= 43 and all(0x21 <= ord(c) <= 0x7E for c in raw) for raw in ids)


def test_a_session_belongs_to_the_caller_that_opened_it():
    raw = driver.open_session(driver.caller("user:1"))

    assert driver.session_of(raw, driver.caller("user:1")) is not None
    assert driver.session_of(raw, driver.caller("user:2")) is None


def test_an_unknown_session_id_has_no_session():
    driver.open_session()

    assert driver.session_of("unknown") is None
    assert driver.session_of("") is None
    assert driver.session_of("x" * 10_000) is None


def test_a_session_holds_the_negotiated_revision_and_the_capabilities_its_revision_can_carry():
    newest = driver.stored_session(driver.open_session(version="2025-11-25"))
    before_url = driver.stored_session(driver.open_session(version="2025-06-18"))
    before_elicitation = driver.stored_session(driver.open_session(version="2025-03-26"))
    no_modes = driver.stored_session(driver.open_session(capabilities={"elicitation": {}}))

    assert (newest.protocol_version, newest.capabilities) == ("2025-11-25", {"elicitation": {"form": {}, "url": {}}})
    assert (before_url.protocol_version, before_url.capabilities) == ("2025-06-18", {"elicitation": {"form": {}}})
    assert (before_elicitation.protocol_version, before_elicitation.capabilities) == ("2025-03-26", {})
    assert no_modes.capabilities == {"elicitation": {"form": {}}}


def test_a_session_expires_after_its_idle_lifetime_and_the_sweep_removes_it(settings):
    settings.MCP_SESSION_IDLE_MINUTES = 30
    raw = driver.open_session()
    stored = driver.stored_session(raw)
    assert timedelta(minutes=29) < stored.expires_at - timezone.now() <= timedelta(minutes=30)

    type(stored).objects.filter(pk=stored.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    assert driver.session_of(raw) is None
    assert driver.sweep_calls() == {"calls_removed": 0, "sessions_removed": 1}
    assert driver.sessions_stored() == []


def test_a_request_in_a_session_keeps_it_alive(settings):
    settings.MCP_SESSION_IDLE_MINUTES = 30
    raw = driver.open_session()
    stored = driver.stored_session(raw)
    soon = timezone.now() + timedelta(minutes=5)
    type(stored).objects.filter(pk=stored.pk).update(expires_at=soon)

    assert driver.session_of(raw) is not None

    assert driver.stored_session(raw).expires_at > soon + timedelta(minutes=20)


def test_the_sweep_leaves_live_sessions_alone():
    driver.open_session()

    assert driver.sweep_calls() == {"calls_removed": 0}
    assert len(driver.sessions_stored()) == 1


def test_a_caller_holds_at_most_mcp_sessions_per_caller_sessions(settings):
    settings.MCP_SESSIONS_PER_CALLER = 2
    driver.open_session(driver.caller("user:1"))
    driver.open_session(driver.caller("user:1"))

    with pytest.raises(driver.RpcError) as refused:
        driver.open_session(driver.caller("user:1"))

    assert refused.value.http_status == 429
    assert driver.open_session(driver.caller("user:2"))


def test_expired_sessions_do_not_count_against_the_cap(settings):
    settings.MCP_SESSIONS_PER_CALLER = 1
    stored = driver.stored_session(driver.open_session())
    type(stored).objects.filter(pk=stored.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    assert driver.open_session()


def test_a_process_serves_at_most_mcp_max_streams_streams(settings):
    driver.open_stream_allowed()
    settings.MCP_MAX_STREAMS = 0

    with pytest.raises(driver.RpcError) as refused:
        driver.open_stream_allowed()

    assert refused.value.http_status == 503


def test_a_tools_call_let_in_before_its_call_started_gets_its_stream_though_a_burst_took_the_last_place(settings):
    # The door's check passes with one place left; a burst takes it while the call starts. The
    # call's stream is still served: refusing it then would lose the call.
    identity = driver.caller().identity
    settings.MCP_STREAMS_PER_CALLER = driver.streams_open(identity) + 1
    driver.open_stream_allowed()
    burst = driver.stream_place(identity)

    stream = driver.call_stream("survey", capabilities={"elicitation": {"form": {}}})

    assert driver.streams_open(identity) == settings.MCP_STREAMS_PER_CALLER + 1
    with pytest.raises(driver.RpcError):
        driver.open_stream_allowed()  # the next request is refused at the door
    stream.streaming.place.give_back()
    burst.give_back()


def test_a_question_answered_while_its_stream_reads_the_round_is_not_asked_again():
    asked = driver.stream_questions_answered_between_reads(
        "survey", {"action": "accept", "content": {"response": "Ada"}}, first=1
    )

    # survey asks two questions in one round: each once.
    assert len(asked) == len(set(asked)) == 2, asked


def test_a_tasks_result_stream_sends_the_runs_progress_with_the_task_calls_progress_token():
    # 2025-11-25: a task-augmented request's progressToken stays valid for the task's life.
    sent = driver.task_result_stream_messages("choose_region", meta={"progressToken": 7}, progress="Half way")

    progress = [m["params"] for m in sent if m.get("method") == "notifications/progress"]
    assert progress == [{"progressToken": 7, "message": "Half way", "progress": 1}]


def test_a_tasks_result_stream_sends_no_progress_when_the_task_call_asked_none():
    sent = driver.task_result_stream_messages("choose_region", meta={}, progress="Half way")

    assert [m for m in sent if m.get("method") == "notifications/progress"] == []


# --- a session's own stream (GET without Last-Event-ID) --------------------------------------------


def test_a_sessions_own_stream_tells_the_status_of_each_of_the_callers_tasks():
    session = driver.open_session()
    waiting = driver.older_task(session, "choose_region")
    stream = driver.open_session_stream(session)
    before = driver.session_stream_statuses(stream)
    driver.finish_runs()

    after = driver.session_stream_statuses(stream)

    assert before is not None and before[waiting]["status"] == "working"
    assert after is not None and after[waiting]["status"] == "input_required"
    assert after[waiting]["taskId"] == waiting


def test_a_sessions_own_stream_tells_nothing_of_another_callers_tasks():
    stranger = driver.caller("user:2")
    driver.older_task(driver.open_session(stranger), "choose_region", by=stranger)

    assert driver.session_stream_statuses(driver.open_session_stream(driver.open_session())) == {}


def test_a_sessions_own_stream_ends_with_its_session():
    from mcp_gateway.wires.sessions import sessions

    session = driver.open_session()
    stream = driver.open_session_stream(session)
    assert driver.session_stream_statuses(stream) == {}

    sessions.end(driver.stored_session(session))

    assert driver.session_stream_statuses(stream) is None


def test_a_sessions_own_stream_ends_when_its_session_expires():
    session = driver.open_session()
    stream = driver.open_session_stream(session)
    stored = driver.stored_session(session)
    type(stored).objects.filter(pk=stored.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    assert driver.session_stream_statuses(stream) is None


def test_a_2025_06_18_sessions_own_stream_carries_no_tasks():
    session = driver.open_session()
    driver.older_task(session, "choose_region")

    older = driver.open_session_stream(driver.open_session(version="2025-06-18"))

    assert driver.session_stream_statuses(older) == {}


def test_a_sessions_own_stream_resumes_numbering_on_from_its_last_event_id():
    assert driver.session_stream_resumed_after("tasks.7") == 7
    # Not one of its numbers: resumed all the same, from the start (it tells every status again).
    assert driver.session_stream_resumed_after("tasks.x") == 0
