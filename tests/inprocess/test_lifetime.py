"""Lifetime: a paused call is kept 24 hours after its latest round of questions, a call finished by
a request with a requestState 10 minutes, one finished without a requestState not at all; a
shorter default_ttl shortens each. Driven in-process, with time-machine for the clock."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from tests.inprocess.driver import (
    INVALID_STATE,
    TOO_MANY_ROUNDS,
    Round,
    ToolCall,
    answer,
    asked,
    call,
    call_of,
    checkpoint_rows,
    finish_runs,
    is_finished,
    refused,
    sweep,
)
from tests.rounds import input_response_accepting, only_key, text_of

NAME = {"user_name": input_response_accepting(name="Ada")}
CANT_RESUME = "This tool paused to ask for human input, and this call can't be resumed."


def near(moment, expected, slack: float = 5.0) -> bool:
    return abs((moment - expected).total_seconds()) <= slack


def test_a_call_finished_by_a_request_with_a_request_state_is_kept_ten_minutes_and_resending_gets_the_same_result():
    first = asked("greeter")
    done = answer("greeter", {}, first, NAME)
    call_ = call_of(first["requestState"])

    assert is_finished(call_)
    assert near(call_.expires_at, timezone.now() + timedelta(minutes=10))
    assert checkpoint_rows(call_.thread_id) > 0
    with time_machine.travel(call_.expires_at - timedelta(seconds=30)):
        assert answer("greeter", {}, first, NAME) == done
    with time_machine.travel(call_.expires_at + timedelta(seconds=1)):
        assert refused("greeter", {}, responses=NAME, request_state=first["requestState"]) == INVALID_STATE


@pytest.mark.parametrize("graph", ["text_then_unaskable", "text_then_breakpoint"])
def test_a_call_that_ends_without_a_result_after_a_request_state_is_kept_ten_minutes_too(graph):
    first = asked(graph)
    responses = {only_key(first): input_response_accepting(response="yes")}
    done = answer(graph, {}, first, responses)
    call_ = call_of(first["requestState"])

    assert done["isError"] is True
    assert near(call_.expires_at, timezone.now() + timedelta(minutes=10))
    assert answer(graph, {}, first, responses) == done


def test_a_call_finished_by_a_request_without_a_request_state_deletes_its_thread(model_in_this_process):
    region_key = only_key(asked("choose_region"))
    first_calls = [
        ("greeter", {}, {"responses": NAME}),  # answered in the first call
        ("choose_region", {}, {"responses": {region_key: {"action": "decline"}}}),  # ended by a decline
        ("digital_twin", {"message": "hello"}, {}),  # never paused
    ]
    for name, arguments, params in first_calls:
        call(name, arguments, **params)
        call_ = ToolCall.objects.latest("created_at")
        assert call_.tool_name == name
        assert is_finished(call_) and call_.expires_at <= timezone.now()
        assert checkpoint_rows(call_.thread_id) == 0, name


def test_a_paused_call_expires_24_hours_after_its_latest_round_of_questions():
    first = asked("form_then_url")
    call_ = call_of(first["requestState"])
    round0 = Round.objects.get(call=call_, number=0)
    assert near(call_.expires_at, round0.finished_at + timedelta(hours=24), slack=1)

    # An hour later, so the two rounds' expiries are told apart.
    with time_machine.travel(timezone.now() + timedelta(hours=1)):
        second = answer("form_then_url", {}, first, {only_key(first): input_response_accepting(response="Ada")})
    call_.refresh_from_db()
    round1 = Round.objects.get(call=call_, number=1)
    assert near(call_.expires_at, round1.finished_at + timedelta(hours=24), slack=1)
    assert call_.expires_at - round0.finished_at >= timedelta(hours=25)

    with time_machine.travel(call_.expires_at - timedelta(minutes=1)):
        assert answer("form_then_url", {}, second, {}) == second
    with time_machine.travel(call_.expires_at + timedelta(seconds=1)):
        assert refused("form_then_url", {}, responses={}, request_state=second["requestState"]) == INVALID_STATE


def test_a_paused_call_and_its_thread_are_removed_by_the_sweep_once_it_has_expired():
    first = asked("greeter")
    call_ = call_of(first["requestState"])

    with time_machine.travel(call_.expires_at - timedelta(minutes=1)):
        sweep()
    assert ToolCall.objects.filter(pk=call_.pk).exists() and checkpoint_rows(call_.thread_id) > 0
    with time_machine.travel(call_.expires_at + timedelta(seconds=1)):
        sweep()
    assert not ToolCall.objects.filter(pk=call_.pk).exists()
    assert checkpoint_rows(call_.thread_id) == 0


def test_a_shorter_default_ttl_shortens_both_lifetimes(settings):
    settings.MCP_DEFAULT_TTL_MINUTES = 5

    first = asked("greeter")
    call_ = call_of(first["requestState"])
    assert near(call_.expires_at, timezone.now() + timedelta(minutes=5))  # not 24 hours

    done = answer("greeter", {}, first, NAME)
    call_.refresh_from_db()
    assert near(call_.expires_at, timezone.now() + timedelta(minutes=5))  # not 10 minutes
    with time_machine.travel(call_.expires_at + timedelta(seconds=1)):
        assert refused("greeter", {}, responses=NAME, request_state=first["requestState"]) == INVALID_STATE
    assert done["structuredContent"] == {"greeting": "Hello, Ada!"}


def test_a_default_ttl_shortens_each_lifetime_only_where_it_is_shorter(settings):
    settings.MCP_DEFAULT_TTL_MINUTES = 60

    first = asked("greeter")
    call_ = call_of(first["requestState"])
    assert near(call_.expires_at, timezone.now() + timedelta(minutes=60))  # shorter than 24 hours

    answer("greeter", {}, first, NAME)
    call_.refresh_from_db()
    assert near(call_.expires_at, timezone.now() + timedelta(minutes=10))  # not lengthened to 60 minutes


def test_an_answered_call_does_not_expire_while_its_resumed_run_goes_on(tmp_path):
    """Only a call that stays paused expires 24 hours after its latest round of questions."""
    arguments = {"signal_dir": str(tmp_path)}
    first = asked("held_effect", arguments)
    paused_until = call_of(first["requestState"]).expires_at

    with time_machine.travel(paused_until - timedelta(seconds=1)):
        still_running = answer(
            "held_effect", arguments, first, {only_key(first): input_response_accepting(response="y")}, outlasting=True
        )
    assert set(still_running) == {"resultType", "requestState"}
    with time_machine.travel(paused_until + timedelta(minutes=1)):
        retry = call("held_effect", arguments, request_state=still_running["requestState"], outlasting=True)
    assert set(retry) == {"resultType", "requestState"}  # still running, not expired

    (tmp_path / "release").touch()
    with time_machine.travel(paused_until + timedelta(minutes=2)):
        finish_runs()
        done = call("held_effect", arguments, request_state=retry["requestState"])
    assert done["structuredContent"]["done"] is True


def test_a_first_call_whose_run_outlasts_the_wait_gets_a_request_state_that_collects_its_result():
    still_running = call("slow", {"value": 0.01}, outlasting=True)
    assert set(still_running) == {"resultType", "requestState"}
    assert still_running["resultType"] == "input_required"
    finish_runs()
    assert is_finished(call_of(still_running["requestState"]))

    # Finished after its requestState was handed out: kept for it (10 minutes), not deleted.
    done = call("slow", {"value": 0.01}, request_state=still_running["requestState"])
    assert done["isError"] is False and done["structuredContent"]["answer"] == "slept"


def test_a_call_that_cannot_keep_a_thread_is_kept_for_a_request_state_handed_out_while_it_ran(settings, tmp_path):
    settings.MCP_THREADS_ENABLED = False
    arguments = {"signal_dir": str(tmp_path)}

    still_running = call("effect_then_ask", arguments, outlasting=True)
    (tmp_path / "release").touch()  # the run goes on to its question, which this call cannot keep
    finish_runs()
    assert is_finished(ToolCall.objects.get())

    ended = call("effect_then_ask", arguments, request_state=still_running["requestState"])
    assert ended["isError"] is True and text_of(ended) == CANT_RESUME


def test_a_client_before_2026_whose_run_outlasts_the_wait_gets_an_error_result(settings):
    settings.MCP_RUN_WAIT_SECONDS = 0.5

    result = call("slow", {"value": 0.01}, modern=False, outlasting=True)

    assert result["isError"] is True
    assert text_of(result) == "The tool did not finish within 0.5 seconds."


def test_a_call_that_keeps_asking_ends_with_an_error_result_after_max_rounds(settings):
    settings.MCP_MAX_ROUNDS = 1
    first = asked("same_text_in_sequence")

    result = answer("same_text_in_sequence", {}, first, {only_key(first): input_response_accepting(response="yes")})

    assert result["isError"] is True
    assert result["content"][0]["text"] == TOO_MANY_ROUNDS.format(limit=1)
