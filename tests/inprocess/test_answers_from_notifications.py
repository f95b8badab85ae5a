"""A request waiting for a run is answered from the run's notification, which carries the round's
record: where that answer needs nothing more (a round's questions for a client that can answer
them, a result), it is made without the database; otherwise from the rows, as before."""

from __future__ import annotations

import pytest

from tests.inprocess.driver import (
    RpcError,
    first_call_waiting,
    notification,
    reply_after_wait,
    reply_from_notification,
)
from tests.rounds import input_response_accepting

FORM_ONLY = {"elicitation": {"form": {}}}


def test_a_round_that_ended_with_questions_is_answered_from_its_notification_without_the_database(
    django_assert_num_queries,
):
    waiting = first_call_waiting("choose_region")
    recorded = notification(waiting)

    with django_assert_num_queries(0):
        reply = reply_from_notification(waiting, recorded)

    assert reply is not None and reply["resultType"] == "input_required"
    assert reply == reply_after_wait(waiting)


def test_a_round_that_ended_with_a_result_is_answered_from_its_notification_without_the_database(
    django_assert_num_queries,
):
    waiting = first_call_waiting("boom")  # its run fails: the tool's error is its result
    recorded = notification(waiting)

    with django_assert_num_queries(0):
        reply = reply_from_notification(waiting, recorded)

    assert reply is not None and reply["isError"] is True
    assert reply == reply_after_wait(waiting)


def test_answers_sent_in_the_first_call_are_not_answered_from_the_notification():
    waiting = first_call_waiting("greeter", responses={"user_name": input_response_accepting(name="Ada")})

    assert reply_from_notification(waiting, notification(waiting)) is None
    resumed = reply_after_wait(waiting)  # the answers resume the agent: the next round runs
    assert resumed.round.number == 1


def test_a_client_missing_a_mode_the_round_needs_is_not_answered_from_the_notification():
    waiting = first_call_waiting("connect_calendar", capabilities=FORM_ONLY)

    assert reply_from_notification(waiting, notification(waiting)) is None
    with pytest.raises(RpcError) as refused:
        reply_after_wait(waiting)
    assert refused.value.code == -32021
