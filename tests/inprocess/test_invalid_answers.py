"""Invalid answers: an answer that does not fit its question fails with -32602 and the round stays
open; sent in a first call, it deletes that call's thread. Driven in-process."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tests.inprocess.driver import (
    INVALID_STATE,
    RpcError,
    ToolCall,
    answer,
    asked,
    call,
    call_of,
    checkpoint_rows,
    checkpoint_threads,
    finish_runs,
    refused,
    rounds_of,
)
from tests.rounds import input_response_accepting, only_key

NAME = {"user_name": input_response_accepting(name="Ada")}


@pytest.mark.parametrize(
    "bad",
    [
        input_response_accepting(name=5),
        input_response_accepting(),
        {"action": "accept"},
        {"action": "yes", "content": {"name": "Ada"}},
        "accept",
    ],
    ids=["wrong type", "required field missing", "no content", "unknown action", "not an object"],
)
def test_an_answer_that_does_not_fit_its_question_fails_with_32602_and_400_and_the_round_stays_open(bad):
    first = asked("greeter")

    with pytest.raises(RpcError) as raised:
        answer("greeter", {}, first, {"user_name": bad})

    assert raised.value.code == -32602
    assert raised.value.http_status == 400
    assert rounds_of(first["requestState"]) == 1
    assert answer("greeter", {}, first, NAME)["structuredContent"] == {"greeting": "Hello, Ada!"}


def test_an_invalid_answer_fails_with_32602_even_when_another_answer_is_missing():
    # Asking again would drop the invalid answer without a word; the round stays open all the same.
    first = asked("survey")
    keys = sorted(first["inputRequests"])

    error = refused(
        "survey", {}, responses={keys[0]: input_response_accepting(response=5)}, request_state=first["requestState"]
    )

    assert error["code"] == -32602
    assert error["data"]["key"] == keys[0]
    assert rounds_of(first["requestState"]) == 1
    answer("survey", {}, first, {k: input_response_accepting(response="x") for k in keys})


def test_an_invalid_answer_in_a_first_call_deletes_that_calls_thread():
    key = only_key(asked("plan_deployment"))  # the key is derived from the question
    calls_before, threads_before = set(ToolCall.objects.values_list("pk", flat=True)), checkpoint_threads()
    bad = {key: input_response_accepting(region="eu-west-1", replicas=20)}

    error = refused("plan_deployment", {}, responses=bad)

    assert error["code"] == -32602
    assert error["message"] == "Form content does not match requestedSchema"
    assert set(ToolCall.objects.values_list("pk", flat=True)) == calls_before
    assert checkpoint_threads() == threads_before  # the attempt's thread is gone with it
    # Calling again from the start works.
    result = call("plan_deployment", {}, responses={key: input_response_accepting(region="eu-west-1", replicas=3)})
    assert result["structuredContent"] == {"region": "eu-west-1", "replicas": 3}


def test_invalid_answers_sent_in_a_first_call_whose_run_outlasts_the_wait_delete_its_thread(tmp_path):
    released = tmp_path / "released"
    released.mkdir()
    (released / "release").touch()
    key = only_key(asked("effect_then_ask", {"signal_dir": str(released)}))
    arguments = {"signal_dir": str(tmp_path)}

    still_running = call(
        "effect_then_ask", arguments, responses={key: input_response_accepting(response=5)}, outlasting=True
    )
    call_ = call_of(still_running["requestState"])
    (tmp_path / "release").touch()
    finish_runs()

    # The request that brings them back to the round learns they do not fit: -32602, as the
    # first call would have, and the thread is deleted as that call's would have been.
    retry = refused("effect_then_ask", arguments, request_state=still_running["requestState"])
    assert retry["code"] == -32602 and retry["data"]["key"] == key
    assert not ToolCall.objects.filter(pk=call_.pk).exists()
    assert checkpoint_rows(call_.thread_id) == 0
    again = refused("effect_then_ask", arguments, request_state=still_running["requestState"])
    assert again == INVALID_STATE


def test_an_answer_that_langgraph_rejects_for_its_pydantic_model_fails_with_32602_and_the_round_stays_open():
    first = asked("typed_validator")
    key = only_key(first)

    error = refused(
        "typed_validator",
        {},
        responses={key: input_response_accepting(nickname="nobody")},
        request_state=first["requestState"],
    )

    assert (error["code"], error["message"]) == (-32602, "Form content does not match requestedSchema")
    assert "nobody is not a nickname" in error["data"]["detail"]
    # The same answers again get the same error; other answers answer the round.
    again = refused(
        "typed_validator",
        {},
        responses={key: input_response_accepting(nickname="nobody")},
        request_state=first["requestState"],
    )
    assert again == error
    result = answer("typed_validator", {}, first, {key: input_response_accepting(nickname="Ada")})
    assert result["structuredContent"] == {"answer": "Ada"}


def test_an_answer_that_langgraph_rejects_in_a_first_call_deletes_that_calls_thread():
    key = only_key(asked("typed_validator"))

    error = refused("typed_validator", {}, responses={key: input_response_accepting(nickname="nobody")})

    assert error["code"] == -32602
    call_ = ToolCall.objects.filter(tool_name="typed_validator").latest("created_at")
    assert call_.expires_at <= timezone.now()
    assert checkpoint_rows(call_.thread_id) == 0
