"""Clients without elicitation, with answer pages on (MCP_ANSWER_PAGES=on): a client that opens
links but fills no forms is asked a round as URL questions to its answer page; one that cannot
elicit gets a result with the page's link and a handle for the status tool, hitl_call_status,
which walks the call to its end; a call handed to staff says how to learn the decision."""

from __future__ import annotations

import uuid

import pytest
import redis
from django.conf import settings
from django.test import Client

from tests.inprocess.driver import (
    TASKS,
    Round,
    ToolCall,
    answer,
    answer_page,
    answer_page_url,
    asked,
    call,
    call_of_task,
    call_stream,
    caller,
    committing,
    finish_runs,
    get_task,
    refused,
    respond_on_stream,
    resume_approval,
    staff_decided,
    stream_messages,
    task,
    task_refused,
    update_task,
    waiting_for_staff,
)
from tests.rounds import input_response_accepting, only_key

URL_ONLY = {"elicitation": {"url": {}}}
NO_ELICITATION: dict = {}
STATUS = "hitl_call_status"


@pytest.fixture(autouse=True)
def pages_on(settings):
    settings.MCP_ANSWER_PAGES = "on"


def _submit(path: str, **fields: str) -> None:
    with committing():
        assert Client().post(path, fields).status_code == 303


def _resumes(tag: str) -> int:
    return int(redis.Redis.from_url(settings.REDIS_URL).get(f"hitl-test:resumes:{tag}") or 0)


def _status(handle: str, **kw) -> dict:
    return call(STATUS, {"handle": handle}, capabilities=NO_ELICITATION, **kw)


def test_a_url_only_client_is_asked_each_form_question_as_a_url_question_to_the_rounds_page():
    first = asked("survey", capabilities=URL_ONLY)

    link = answer_page_url(first["requestState"])
    assert set(first["inputRequests"]) == set(asked("survey")["inputRequests"])
    for request in first["inputRequests"].values():
        assert request["method"] == "elicitation/create"
        assert request["params"]["mode"] == "url" and request["params"]["url"] == link
        assert request["params"]["message"]


def test_a_url_only_clients_accept_before_the_page_is_answered_asks_the_same_round_again():
    tag = uuid.uuid4().hex
    first = asked("count_resumes", {"value": tag}, capabilities=URL_ONLY)
    accepted = {only_key(first): {"action": "accept"}}

    again = answer("count_resumes", {"value": tag}, first, accepted, capabilities=URL_ONLY)

    assert again["resultType"] == "input_required"
    assert again["requestState"] == first["requestState"] and again["inputRequests"] == first["inputRequests"]
    assert _resumes(tag) == 0


def test_a_url_only_clients_retry_after_the_page_is_answered_gets_the_result_of_the_one_resume():
    tag = uuid.uuid4().hex
    first = asked("count_resumes", {"value": tag}, capabilities=URL_ONLY)
    _submit(answer_page(first["requestState"]), **{"q0-f0": "yes", "action": "accept"})

    done = answer(
        "count_resumes", {"value": tag}, first, {only_key(first): {"action": "accept"}}, capabilities=URL_ONLY
    )
    again = answer(
        "count_resumes", {"value": tag}, first, {only_key(first): {"action": "accept"}}, capabilities=URL_ONLY
    )

    assert done["isError"] is False and tag in done["content"][0]["text"]
    assert again == done
    assert _resumes(tag) == 1


@pytest.mark.parametrize(
    ("action", "told"), [("decline", "The request for input was declined."), ("cancel", "was cancelled")]
)
def test_a_url_only_clients_decline_or_cancel_of_the_link_ends_the_call_as_its_own_would(action, told):
    tag = uuid.uuid4().hex
    first = asked("count_resumes", {"value": tag}, capabilities=URL_ONLY)

    ended = answer("count_resumes", {"value": tag}, first, {only_key(first): {"action": action}}, capabilities=URL_ONLY)

    assert ended["isError"] is True and told in ended["content"][0]["text"]


def test_a_client_without_elicitation_gets_a_result_with_the_question_the_link_and_a_handle():
    first = call("greeter", capabilities=NO_ELICITATION)

    assert first["isError"] is False
    data = first["structuredContent"]
    assert data["status"] == "asking" and data["handle"]
    (question,) = data["questions"].values()
    assert question["mode"] == "form" and question["message"] in first["content"][0]["text"]
    assert data["link"] in first["content"][0]["text"] and STATUS in first["content"][0]["text"]
    assert data["handle"] in first["content"][0]["text"]
    assert call_of_handle(data["handle"]).status == ToolCall.Status.PAUSED


def call_of_handle(handle: str) -> ToolCall:
    return ToolCall.objects.get(pk=handle.partition(".")[0])


def test_the_status_tool_is_listed_only_while_answer_pages_are_on(settings):
    assert STATUS in [t["name"] for t in tools_listed()]
    settings.MCP_ANSWER_PAGES = "off"
    assert STATUS not in [t["name"] for t in tools_listed()]


def tools_listed() -> list[dict]:
    from tests.inprocess.driver import post_mcp

    status, body = post_mcp("tools/list", {})
    assert status == 200
    return body["result"]["tools"]


def test_the_status_tool_walks_a_call_answered_on_its_pages_to_the_final_result():
    first = call("same_text_in_sequence", capabilities=NO_ELICITATION)
    handle, link = first["structuredContent"]["handle"], first["structuredContent"]["link"]
    assert _status(handle)["structuredContent"]["link"] == link  # not answered yet: the same link

    _submit(link.removeprefix(settings.SITE_URL), **{"q0-f0": "one", "action": "accept"})
    running = _status(handle, outlasting=True)
    assert running["structuredContent"] == {"status": "running", "handle": handle}
    finish_runs()

    second = _status(handle)
    assert second["structuredContent"]["status"] == "asking" and second["structuredContent"]["link"] != link
    _submit(second["structuredContent"]["link"].removeprefix(settings.SITE_URL), **{"q0-f0": "two", "action": "accept"})

    done = _status(handle)
    assert done["isError"] is False and "status" not in done["structuredContent"]
    assert done == _status(handle)


def test_the_status_tool_says_waiting_for_staff_then_gives_the_agents_answer_after_their_decision():
    first = call("text_then_staff", capabilities=NO_ELICITATION)
    handle = first["structuredContent"]["handle"]
    _submit(first["structuredContent"]["link"].removeprefix(settings.SITE_URL), **{"q0-f0": "yes", "action": "accept"})

    waiting = _status(handle)
    assert waiting["structuredContent"]["status"] == "pending" and waiting["structuredContent"]["handle"] == handle
    assert "Waiting for staff" in waiting["content"][-1]["text"]
    (approval,) = waiting_for_staff()
    staff_decided(str(approval.pk))
    resume_approval(str(approval.pk))

    done = _status(handle)
    assert done["isError"] is False and "shipped" in str(done)


def test_a_call_handed_to_staff_tells_a_client_without_tasks_the_status_tools_handle():
    first = asked("text_then_staff")
    handed = answer("text_then_staff", None, first, {only_key(first): input_response_accepting(response="yes")})

    handle = handed["structuredContent"]["handle"]
    assert handed["structuredContent"]["status"] == "pending" and STATUS in handed["content"][-1]["text"]
    assert _status(handle)["structuredContent"]["status"] == "pending"


@pytest.mark.parametrize(
    "handle",
    ["", "nope", f"{uuid.uuid4()}.AAAA", 42],
    ids=["empty", "garbage", "unknown", "not-a-string"],
)
def test_the_status_tool_answers_a_bad_handle_with_one_error_result(handle):
    answered = call(STATUS, {"handle": handle}, capabilities=NO_ELICITATION)

    assert answered["isError"] is True and "No call of yours has this handle" in answered["content"][0]["text"]


def test_the_status_tool_refuses_another_callers_handle_as_an_unknown_one():
    first = call("greeter", capabilities=NO_ELICITATION, by=caller("user:1"))
    handle = first["structuredContent"]["handle"]

    stranger = call(STATUS, {"handle": handle}, capabilities=NO_ELICITATION, by=caller("user:2"))
    tampered = _status(handle[:-2] + ("A" if handle[-2] != "A" else "B") + handle[-1])

    assert stranger == tampered
    assert stranger["isError"] is True and "No call of yours has this handle" in stranger["content"][0]["text"]


def test_with_answer_pages_off_a_client_without_elicitation_still_gets_32021(settings):
    settings.MCP_ANSWER_PAGES = "off"

    assert refused("greeter", capabilities=NO_ELICITATION)["code"] == -32021
    assert refused("greeter", capabilities=URL_ONLY)["code"] == -32021


def test_an_older_client_that_cannot_be_asked_gets_the_link_result_instead_of_the_error():
    first = call("survey", capabilities={"elicitation": {"form": {}}}, modern=False)

    assert first["isError"] is False and first["structuredContent"]["status"] == "asking"
    assert len(first["structuredContent"]["questions"]) == 2


def test_a_client_that_fills_forms_but_opens_no_url_still_gets_32021_for_a_url_question():
    error = refused(
        "relay_url", {"value": "https://login.example.com/start"}, capabilities={"elicitation": {"form": {}}}
    )

    assert error["code"] == -32021 and error["data"] == {"requiredCapabilities": {"elicitation": {"url": {}}}}


def test_an_older_url_only_client_is_asked_on_its_stream_by_link_and_gets_the_result_once_the_page_is_answered(
    settings,
):
    settings.MCP_OLDER_CLIENTS = "answer"
    tag = uuid.uuid4().hex
    stream = call_stream("count_resumes", {"value": tag}, capabilities=URL_ONLY)

    (question,) = stream_messages(stream)
    params = question["params"]
    assert question["method"] == "elicitation/create" and params["mode"] == "url"
    assert params["elicitationId"] == question["id"] and "/answer/" in params["url"]
    respond_on_stream(stream, question["id"], {"action": "accept"})
    assert stream_messages(stream) == []  # kept: not asked again while the page is open

    _submit(params["url"].removeprefix(settings.SITE_URL), **{"q0-f0": "yes", "action": "accept"})
    finish_runs()

    (completed, response) = stream_messages(stream)
    assert completed["method"] == "notifications/elicitation/complete"
    assert response["id"] == 1 and tag in response["result"]["content"][0]["text"]
    assert _resumes(tag) == 1


def test_an_older_url_only_client_is_told_its_url_question_completed_once_the_page_answers_it(settings):
    settings.MCP_OLDER_CLIENTS = "answer"
    stream = call_stream("count_resumes", {"value": uuid.uuid4().hex}, capabilities=URL_ONLY)
    (question,) = stream_messages(stream)

    _submit(question["params"]["url"].removeprefix(settings.SITE_URL), **{"q0-f0": "yes", "action": "accept"})

    completed = {"elicitationId": question["id"]}
    assert stream_messages(stream) == [
        {"jsonrpc": "2.0", "method": "notifications/elicitation/complete", "params": completed}
    ]
    finish_runs()
    (response,) = stream_messages(stream)  # told once
    assert response["id"] == 1 and response["result"]["structuredContent"]["answer"] == "yes"


def test_an_older_url_only_clients_decline_on_its_stream_declines_the_pages_questions(settings):
    settings.MCP_OLDER_CLIENTS = "answer"
    stream = call_stream("count_resumes", {"value": uuid.uuid4().hex}, capabilities=URL_ONLY)
    (question,) = stream_messages(stream)

    respond_on_stream(stream, question["id"], {"action": "decline"})

    (response,) = stream_messages(stream)
    assert response["result"]["isError"] is True
    assert "The request for input was declined." in response["result"]["content"][0]["text"]


# --- MCP tasks (the Tasks extension) ---------------------------------------------------------------

URL_ONLY_TASKS = {**URL_ONLY, "extensions": {TASKS: {}}}


def _asking_task(name: str, arguments: dict | None = None) -> tuple[str, str, dict]:
    """A task of `name` asking its first round, as a URL-only client polls it: its id, the key of
    its one question and that question."""
    task_id = task(name, arguments, capabilities=URL_ONLY_TASKS)["taskId"]
    finish_runs()
    asking = get_task(task_id, capabilities=URL_ONLY_TASKS)
    assert asking["status"] == "input_required", asking
    [(key, request)] = asking["inputRequests"].items()
    return task_id, key, request


def test_a_url_only_task_client_is_asked_the_tasks_form_questions_as_url_questions_to_the_rounds_page():
    task_id, key, request = _asking_task("choose_region_task")

    round_ = Round.objects.select_related("call").get(call=call_of_task(task_id), state=Round.State.ASKING)
    assert key == "0:" + next(iter(round_.outcome["requests"]))
    assert request["method"] == "elicitation/create"
    assert request["params"] == {
        "mode": "url",
        "message": "Which region should the service deploy to?",
        "url": answer_page_url(f"{round_.pk}."),
    }


def test_a_url_only_task_clients_accept_leaves_the_task_working_until_the_page_answers_it_once():
    tag = uuid.uuid4().hex
    task_id, key, request = _asking_task("count_resumes_task", {"value": tag})

    assert update_task(task_id, {key: {"action": "accept"}}, capabilities=URL_ONLY_TASKS) == {}
    waiting = get_task(task_id, capabilities=URL_ONLY_TASKS)
    assert waiting["status"] == "working" and "inputRequests" not in waiting  # the key is not asked again
    assert "answer page" in waiting["statusMessage"]
    assert _resumes(tag) == 0

    _submit(request["params"]["url"].removeprefix(settings.SITE_URL), **{"q0-f0": "yes", "action": "accept"})
    finish_runs()

    done = get_task(task_id, capabilities=URL_ONLY_TASKS)
    assert done["status"] == "completed" and done["result"]["structuredContent"] == {"answer": "yes", "value": tag}
    assert _resumes(tag) == 1


def test_a_url_only_task_clients_decline_of_the_link_declines_the_pages_questions():
    task_id, key, _ = _asking_task("choose_region_task")

    update_task(task_id, {key: {"action": "decline"}}, capabilities=URL_ONLY_TASKS)

    done = get_task(task_id, capabilities=URL_ONLY_TASKS)
    assert done["status"] == "completed" and done["result"]["isError"] is True
    assert "declined" in done["result"]["content"][0]["text"]


def test_with_answer_pages_off_a_url_only_task_client_still_gets_32021_for_a_form_question(settings):
    settings.MCP_ANSWER_PAGES = "off"
    task_id = task("choose_region_task", capabilities=URL_ONLY_TASKS)["taskId"]
    finish_runs()

    error = task_refused("tasks/get", task_id, capabilities=URL_ONLY_TASKS)

    assert error["code"] == -32021 and error["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}
