"""Ask a text question: a string interrupt becomes a form with one text field, under a key derived
from the question. Driven in-process."""

from __future__ import annotations

import pytest

from tests.asking import CANCELLED, DECLINED, TEXT_FORM, TEXT_KEY, form_request, unaskable
from tests.inprocess.driver import answer, asked, call, caller
from tests.rounds import input_response_accepting, only_key, text_of


def test_a_string_interrupt_is_asked_as_a_form_with_one_text_field():
    first = asked("choose_region")

    key = only_key(first)
    assert TEXT_KEY.fullmatch(key)
    assert first["inputRequests"][key] == form_request("Which region should the service deploy to?", TEXT_FORM)


def test_the_choose_region_agent_resumes_with_the_string_answered_in_the_response_field():
    first = asked("choose_region")

    result = answer("choose_region", {}, first, {only_key(first): input_response_accepting(response="eu-west-1")})

    assert result["isError"] is False
    assert text_of(result) == '{"region":"eu-west-1"}'


@pytest.mark.parametrize("action, text", [("decline", DECLINED), ("cancel", CANCELLED)])
def test_a_decline_or_cancel_answer_to_a_text_question_ends_the_call_with_an_error_result(action, text):
    first = asked("choose_region")

    result = answer("choose_region", {}, first, {only_key(first): {"action": action}})

    assert result["isError"] is True
    assert [c["text"] for c in result["content"]] == [text]
    assert answer("choose_region", {}, first, {only_key(first): {"action": action}}) == result


def test_the_key_of_a_text_question_is_derived_from_the_question_and_stays_the_same_when_called_again():
    keys = [only_key(asked("choose_region")) for _ in range(2)]
    survey_keys = set(asked("survey")["inputRequests"])
    keys.append(only_key(asked("choose_region", by=caller("user:2"))))

    assert keys[0] == keys[1] == keys[2]
    assert len(survey_keys) == 2 and keys[0] not in survey_keys
    assert all(TEXT_KEY.fullmatch(k) for k in survey_keys)


def test_one_answer_resumes_two_pending_interrupts_that_ask_the_same_text():
    first = asked("same_text_twice")

    key = only_key(first)
    assert first["inputRequests"][key] == form_request("Same question?", TEXT_FORM)
    result = answer("same_text_twice", {}, first, {key: input_response_accepting(response="yes")})
    assert result["structuredContent"] == {"answers": ["yes", "yes"]}


def test_several_pending_interrupts_are_asked_in_one_round_of_at_most_100_questions():
    # A round is answered in one request, and a request carries at most 100 answers: a round of
    # 101 questions could never be answered, so it is not asked.
    first = asked("fan_out_questions", {"value": 100})

    assert len(first["inputRequests"]) == 100
    responses = {key: input_response_accepting(response="yes") for key in first["inputRequests"]}
    result = answer("fan_out_questions", {"value": 100}, first, responses)
    assert result["structuredContent"]["answers"] == ["yes"] * 100

    too_many = call("fan_out_questions", {"value": 101})
    assert unaskable(too_many)
    assert "more than 100 questions" in text_of(too_many)
