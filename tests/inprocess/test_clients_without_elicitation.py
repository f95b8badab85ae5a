"""Support clients without elicitation (-32021 naming every mode a round needs), calls that cannot
keep a pause (threads disabled, or thread permissions withheld: Secure paused calls), and static
breakpoints. Driven in-process."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.inprocess.driver import (
    CREATE,
    INVALID_STATE,
    READ,
    UPDATE,
    RpcError,
    ToolCall,
    answer,
    asked,
    call,
    call_of,
    caller,
    checkpoint_rows,
    checkpoint_threads,
    refused,
)
from tests.rounds import input_response_accepting, only_key, text_of

NAME = {"user_name": input_response_accepting(name="Ada")}
CANT_RESUME = "This tool paused to ask for human input, and this call can't be resumed."
FORM_ONLY = {"elicitation": {"form": {}}}
NEEDS_URL = {
    "code": -32021,
    "message": "This tool asks for human input and needs url elicitation.",
    "data": {"requiredCapabilities": {"elicitation": {"url": {}}}},
}
CALENDAR = {
    "method": "elicitation/create",
    "params": {
        "message": "Connect your calendar to continue.",
        "mode": "url",
        "url": "https://example.com/oauth/calendar/start",
    },
}


@pytest.mark.parametrize(
    "capabilities", [{}, {"sampling": {}}, {"elicitation": None}], ids=["none", "sampling", "null"]
)
def test_a_2026_client_without_elicitation_gets_32021_naming_form_with_http_400(capabilities):
    with pytest.raises(RpcError) as raised:
        call("greeter", capabilities=capabilities)

    assert raised.value.http_status == 400
    assert (raised.value.code, raised.value.message, raised.value.data) == (
        -32021,
        "This tool asks for human input and needs form elicitation.",
        {"requiredCapabilities": {"elicitation": {"form": {}}}},
    )


@pytest.mark.parametrize(
    "tool, capabilities",
    [("greeter", {}), ("connect_calendar", {"elicitation": {"form": {}}})],
    ids=["no elicitation", "form only, needs url"],
)
def test_a_first_call_that_fails_with_32021_leaves_no_thread_behind_since_no_request_state_can_reach_it(
    tool, capabilities
):
    before = checkpoint_threads()  # the checkpoint tables are not rolled back between tests

    assert refused(tool, capabilities=capabilities)["code"] == -32021

    assert not ToolCall.objects.exists()
    assert checkpoint_threads() == before


def test_an_answer_with_a_request_state_that_fails_with_32021_leaves_the_round_open_for_a_capable_retry():
    first = asked("greeter")

    assert (
        refused("greeter", {}, responses=NAME, request_state=first["requestState"], capabilities={})["code"] == -32021
    )

    assert answer("greeter", {}, first, NAME)["structuredContent"] == {"greeting": "Hello, Ada!"}


def test_required_capabilities_list_every_mode_the_round_needs():
    requests = [
        {
            "key": "name",
            "message": "Name?",
            "mode": "form",
            "requested_schema": {"type": "object", "properties": {"name": {"type": "string"}}},
        },
        {"key": "login", "message": "Log in.", "mode": "url", "url": "https://example.com/login"},
    ]

    error = refused("relay_from_input", {"value": requests}, capabilities={})

    assert error["data"] == {"requiredCapabilities": {"elicitation": {"form": {}, "url": {}}}}


def test_a_client_that_declares_elicitation_with_no_modes_supports_form():
    first = asked("greeter", capabilities={"elicitation": {}})

    result = answer("greeter", {}, first, NAME, capabilities={"elicitation": {}})

    assert result["structuredContent"] == {"greeting": "Hello, Ada!"}


def test_a_client_that_declares_only_form_gets_32021_naming_url():
    with pytest.raises(RpcError) as raised:
        call("connect_calendar", capabilities=FORM_ONLY)

    assert raised.value.http_status == 400
    assert (raised.value.code, raised.value.message, raised.value.data) == tuple(NEEDS_URL.values())


def test_a_client_that_declares_the_url_mode_is_sent_to_the_url_even_without_form():
    url_only = {"elicitation": {"url": {}}}

    first = asked("connect_calendar", capabilities=url_only)

    assert first["inputRequests"] == {"calendar_auth": CALENDAR}
    result = answer("connect_calendar", {}, first, {"calendar_auth": {"action": "accept"}}, capabilities=url_only)
    assert result["structuredContent"] == {"status": "connected"}


@pytest.mark.parametrize(
    "capabilities", [{"elicitation": {"form": {}, "url": None}}, {"elicitation": {"url": None}}], ids=["form", "none"]
)
def test_a_url_mode_declared_as_null_is_not_declared_and_the_call_fails_with_32021(capabilities):
    # The revision's schema lets a mode be null, and the SDK reads null as absent: form only.
    with pytest.raises(RpcError) as raised:
        call("connect_calendar", capabilities=capabilities)

    assert raised.value.http_status == 400
    assert (raised.value.code, raised.value.message, raised.value.data) == tuple(NEEDS_URL.values())


def test_a_client_that_declares_only_url_gets_32021_naming_form():
    error = refused("greeter", capabilities={"elicitation": {"url": {}}})

    assert error["code"] == -32021
    assert error["message"] == "This tool asks for human input and needs form elicitation."


def test_when_a_later_round_needs_url_the_call_fails_the_same_way_and_is_kept_ten_minutes_for_a_resend():
    first = asked("form_then_url", capabilities=FORM_ONLY)
    responses = {only_key(first): input_response_accepting(response="Ada")}

    error = refused(
        "form_then_url", {}, responses=responses, request_state=first["requestState"], capabilities=FORM_ONLY
    )

    assert error == NEEDS_URL
    call_ = call_of(first["requestState"])
    assert abs((call_.expires_at - (timezone.now() + timedelta(minutes=10))).total_seconds()) < 5
    # Declaring url and resending the same answers and requestState gets the URL question.
    second = answer("form_then_url", {}, first, responses)
    assert second["inputRequests"] == {
        "login": {
            "method": "elicitation/create",
            "params": {"message": "Open this page.", "mode": "url", "url": "https://example.com/oauth"},
        }
    }
    done = answer("form_then_url", {}, second, {"login": {"action": "accept"}})
    assert done["structuredContent"] == {"first": "Ada", "answers": [{"login": {"action": "accept"}}]}


def test_a_url_question_got_by_declaring_url_in_those_ten_minutes_stays_open_24_hours_after_its_round():
    # The ten minutes are for coming back with url declared; once the URL question is asked, the
    # call is paused on it like any other (the Lifetime rule), and the user has time for the page.
    first = asked("form_then_url", capabilities=FORM_ONLY)
    responses = {only_key(first): input_response_accepting(response="Ada")}
    error = refused(
        "form_then_url", {}, responses=responses, request_state=first["requestState"], capabilities=FORM_ONLY
    )
    assert error == NEEDS_URL

    second = answer("form_then_url", {}, first, responses)

    assert list(second["inputRequests"]) == ["login"]
    call_ = call_of(second["requestState"])
    assert abs((call_.expires_at - (timezone.now() + timedelta(hours=24))).total_seconds()) < 60


# Calls that cannot keep a pause


def test_a_call_that_cannot_keep_a_thread_because_threads_are_disabled_returns_the_cannot_be_resumed_error(settings):
    settings.MCP_THREADS_ENABLED = False

    result = call("greeter")

    assert result["isError"] is True
    assert text_of(result) == CANT_RESUME
    call_ = ToolCall.objects.get(tool_name="greeter")
    assert checkpoint_rows(call_.thread_id) == 0


def test_a_call_whose_caller_may_only_create_threads_cannot_keep_a_pause_but_one_that_does_not_pause_runs(
    model_in_this_process,
):
    creator = caller(permissions={CREATE})

    greeter = call("greeter", by=creator)
    twin = call("digital_twin", {"message": "hi"}, by=creator)

    assert greeter["isError"] is True and text_of(greeter) == CANT_RESUME
    assert twin["isError"] is False  # a call that does not pause is unaffected


def test_answering_a_round_when_the_caller_may_not_update_the_thread_returns_the_cannot_be_resumed_error():
    first = asked("greeter")  # every permission: the call can be kept

    refused_ = answer("greeter", {}, first, NAME, by=caller(permissions={CREATE, READ}))

    assert refused_["isError"] is True and text_of(refused_) == CANT_RESUME
    # Nothing was resumed: the same answers from a caller who may update the thread resume it.
    assert answer("greeter", {}, first, NAME)["structuredContent"] == {"greeting": "Hello, Ada!"}


@pytest.mark.parametrize("granted", [{READ, UPDATE}, {CREATE, READ}], ids=["no create", "no update"])
def test_a_call_whose_caller_may_not_create_or_update_its_thread_cannot_keep_a_pause(granted):
    paused = call("greeter", by=caller(permissions=granted))

    assert paused["isError"] is True and text_of(paused) == CANT_RESUME


def test_a_call_whose_caller_may_not_read_its_thread_cannot_keep_a_pause():
    paused = call("greeter", by=caller(permissions={CREATE, UPDATE}))

    # A requestState it could never use: the call ends at its pause instead.
    assert paused["isError"] is True and text_of(paused) == CANT_RESUME


def test_a_request_state_fails_with_32602_when_the_caller_may_not_read_the_thread():
    first = asked("greeter")

    error = refused(
        "greeter", {}, responses=NAME, request_state=first["requestState"], by=caller(permissions={CREATE, UPDATE})
    )

    assert error == INVALID_STATE
    assert answer("greeter", {}, first, NAME)["structuredContent"] == {"greeting": "Hello, Ada!"}


# Static breakpoints


@pytest.mark.parametrize("graph", ["breakpoint_graph", "breakpoint_after_graph"])
def test_a_static_breakpoint_ends_the_call_with_an_error_result_for_a_client_that_can_elicit(graph):
    result = call(graph)

    assert result["isError"] is True
    assert text_of(result) == (
        "This tool stopped at a breakpoint (interrupt_before/interrupt_after), which can't be resumed over MCP."
    )
