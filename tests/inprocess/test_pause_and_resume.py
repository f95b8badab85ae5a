"""Pause and resume a tool call: a resumed run, several questions, missing answers, answers in the
first call, repeated answers and the runtime context, driven in-process."""

from __future__ import annotations

import uuid

from tests.inprocess.driver import answer, asked, call, finish_runs, rounds_of
from tests.rounds import input_response_accepting, only_key

NAME = {"user_name": input_response_accepting(name="Ada")}


def test_a_resumed_run_that_asks_again_returns_a_new_round_with_a_new_request_state():
    first = asked("form_then_url")

    second = answer("form_then_url", {}, first, {only_key(first): input_response_accepting(response="Ada")})

    assert second["resultType"] == "input_required"
    assert list(second["inputRequests"]) == ["login"]
    assert second["requestState"] != first["requestState"]
    done = answer("form_then_url", {}, second, {"login": {"action": "accept"}})
    assert done["structuredContent"] == {"first": "Ada", "answers": [{"login": {"action": "accept"}}]}


def test_a_later_round_that_asks_the_same_question_again_is_asked_not_answered_with_the_earlier_answer():
    first = asked("same_text_in_sequence")
    key = only_key(first)

    second = answer("same_text_in_sequence", {}, first, {key: input_response_accepting(response="once")})

    assert second["resultType"] == "input_required"
    assert list(second["inputRequests"]) == [key]
    done = answer("same_text_in_sequence", {}, second, {key: input_response_accepting(response="twice")})
    assert done["structuredContent"] == {"answers": ["once", "twice"]}


# Several questions


def test_several_pending_interrupts_are_asked_in_one_round():
    first = asked("survey")

    messages = {key: request["params"]["message"] for key, request in first["inputRequests"].items()}
    assert sorted(messages.values()) == ["What is your favourite colour?", "What is your name?"]
    by_text = {text: key for key, text in messages.items()}
    result = answer(
        "survey",
        {},
        first,
        {
            by_text["What is your name?"]: input_response_accepting(response="Ada"),
            by_text["What is your favourite colour?"]: input_response_accepting(response="green"),
        },
    )
    assert result["structuredContent"] == {"name": "Ada", "colour": "green"}


def test_several_questions_are_listed_in_the_order_the_graph_asks_them():
    # survey's nodes ask the name, then the colour: LangGraph lists its interrupts so, and a client
    # shows the questions in the order it gets them, however their keys are numbered. Asked again
    # (no answers), the round keeps that order.
    first = asked("survey")
    again = answer("survey", {}, first, {})

    for round_ in (first, again):
        messages = [request["params"]["message"] for request in round_["inputRequests"].values()]
        assert messages == ["What is your name?", "What is your favourite colour?"]


# Missing answers


def test_missing_answers_ask_the_same_questions_again_with_the_same_request_state():
    first = asked("survey")
    name_key, colour_key = sorted(first["inputRequests"], key=lambda k: first["inputRequests"][k]["params"]["message"])

    for partial in (
        {},
        {colour_key: input_response_accepting(response="Ada")},
        {name_key: input_response_accepting(response="green")},
    ):
        again = answer("survey", {}, first, partial)
        assert again == first
    assert rounds_of(first["requestState"]) == 1  # nothing was resumed


def test_answers_to_questions_that_were_not_asked_are_ignored():
    first = asked("greeter")

    responses = {**NAME, "not_asked": {"action": "decline"}, "user_name_2": input_response_accepting(name=5)}
    result = answer("greeter", {}, first, responses)

    assert result["structuredContent"] == {"greeting": "Hello, Ada!"}


def test_form_fields_that_were_not_asked_do_not_reach_the_agent():
    # A form cannot carry the agent's additionalProperties: false; the agent gets the asked fields only.
    schema = {"type": "object", "properties": {"colour": {"type": "string"}}, "additionalProperties": False}
    first = asked("typed_from_input", {"value": schema})

    content = {"colour": "red", "admin": True, "colour_2": "blue"}
    done = answer("typed_from_input", {"value": schema}, first, {only_key(first): input_response_accepting(**content)})

    assert done["structuredContent"]["answer"] == {"colour": "red"}


# Answers in the first call


def test_answers_sent_in_the_first_call_answer_the_first_round():
    result = call("greeter", {}, responses=NAME)

    assert result["structuredContent"] == {"greeting": "Hello, Ada!"}


def test_a_first_call_that_answers_no_question_of_the_first_round_gets_that_round_asked():
    first = asked("survey", responses={"unrelated": input_response_accepting(response="x")})

    assert len(first["inputRequests"]) == 2
    answer("survey", {}, first, {k: input_response_accepting(response="x") for k in first["inputRequests"]})


def test_a_first_call_that_answers_some_of_the_first_rounds_questions_gets_that_round_asked():
    # The keys are derived from the questions, so an earlier call tells the client what they are.
    keys = asked("survey")["inputRequests"]
    name_key = next(k for k, request in keys.items() if request["params"]["message"] == "What is your name?")

    first = asked("survey", responses={name_key: input_response_accepting(response="Ada")})

    assert first["inputRequests"] == keys
    assert rounds_of(first["requestState"]) == 1  # nothing was resumed
    answers = {k: input_response_accepting(response="Grace" if k == name_key else "green") for k in keys}
    result = answer("survey", {}, first, answers)
    assert result["structuredContent"] == {"name": "Grace", "colour": "green"}


def _key_of_the_held_question(graph: str, tmp_path) -> str:
    """The key of a graphs_durability graph's question, from a run released at once (keys are derived
    from the question, so an earlier call tells the client what it is)."""
    released = tmp_path / "released"
    released.mkdir()
    (released / "release").touch()
    return only_key(asked(graph, {"signal_dir": str(released)}))


def _until_run_ends(name: str, arguments: dict, result: dict) -> dict:
    """Come back with the requestState of a result that says only "still running", as the SDK does
    after a result without questions: requestState only."""
    while result.get("resultType") == "input_required" and "inputRequests" not in result:
        result = call(name, arguments, request_state=result["requestState"])
    return result


def test_answers_sent_in_a_first_call_whose_run_outlasts_the_wait_answer_the_first_round(tmp_path):
    key = _key_of_the_held_question("effect_then_ask", tmp_path)
    arguments = {"signal_dir": str(tmp_path)}

    still_running = call(
        "effect_then_ask", arguments, responses={key: input_response_accepting(response="yes")}, outlasting=True
    )
    assert set(still_running) == {"resultType", "requestState"}
    (tmp_path / "release").touch()  # the run goes on to its question
    finish_runs()
    result = _until_run_ends("effect_then_ask", arguments, still_running)

    assert result.get("inputRequests") is None, result  # not asked again
    assert result["structuredContent"] == {"signal_dir": str(tmp_path), "done": True, "go": "yes"}
    assert rounds_of(still_running["requestState"]) == 2  # resumed once


def test_answers_sent_in_a_first_call_whose_run_outlasts_the_wait_resume_with_that_calls_context(tmp_path):
    key = _key_of_the_held_question("effect_then_ask_context", tmp_path)
    arguments = {"signal_dir": str(tmp_path)}

    still_running = call(
        "effect_then_ask_context",
        arguments,
        context={"tag": "first call"},
        responses={key: input_response_accepting(response="yes")},
        outlasting=True,
    )
    (tmp_path / "release").touch()
    finish_runs()
    result = _until_run_ends("effect_then_ask_context", arguments, still_running)

    assert result["structuredContent"]["after"] == "first call"


# Repeated answers


def test_repeated_answers_resume_the_agent_once():
    import redis
    from django.conf import settings

    tag = uuid.uuid4().hex
    first = asked("count_resumes", {"value": tag})
    responses = {only_key(first): input_response_accepting(response="yes")}

    results = [answer("count_resumes", {"value": tag}, first, responses) for _ in range(3)]

    assert results[0]["structuredContent"] == {"value": tag, "answer": "yes"}
    assert results[1] == results[0] and results[2] == results[0]
    assert int(redis.Redis.from_url(settings.REDIS_URL).get(f"hitl-test:resumes:{tag}")) == 1
    assert rounds_of(first["requestState"]) == 2


# Runtime context


def test_a_context_next_to_the_arguments_becomes_the_agents_runtime_context():
    first = asked("context_before_question", context={"tag": "first call"})
    responses = {only_key(first): input_response_accepting(response="yes")}
    result = answer("context_before_question", {}, first, responses, context={"tag": "answering call"})

    # The first run saw the first call's context; the resumed run, the answering call's.
    assert result["structuredContent"] == {"first": "first call", "after": "answering call"}


def test_the_resumed_run_gets_the_context_of_the_request_that_answers_the_round():
    first = asked("context_echo", context={"tag": "first call"})
    responses = {only_key(first): input_response_accepting(response="yes")}

    result = answer("context_echo", {}, first, responses, context={"tag": "answering call"})

    # The node runs again from its start when resumed, so both reads see the resumed run's context.
    assert result["structuredContent"] == {"first": "answering call", "after": "answering call"}


def test_answers_in_the_first_call_resume_with_that_calls_context():
    key = only_key(asked("context_echo"))

    responses = {key: input_response_accepting(response="y")}
    result = call("context_echo", {}, context={"tag": "only"}, responses=responses)

    assert result["structuredContent"] == {"first": "only", "after": "only"}
