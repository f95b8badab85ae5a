"""Invalid state and Secure paused calls: a requestState works only as minted, for its caller,
tool and arguments, and only while its call lives; every other one fails alike. Driven in-process."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
import time_machine

from tests.inprocess.driver import INVALID_STATE, RpcError, answer, asked, call_of, caller, refused
from tests.rounds import input_response_accepting, only_key

NAME = {"user_name": input_response_accepting(name="Ada")}


def _mutations(state: str) -> list[str]:
    round_id, _, mac = state.partition(".")
    flips = []
    for i, char in enumerate(state):
        flipped = chr(ord(char) ^ (1 << (i % 7)))
        flips.append(state[:i] + flipped + state[i + 1 :])
    return flips + [
        state[:-1],
        state[:-10],
        state[:36],
        state[:37],
        round_id,
        mac,
        "",
        ".",
        state + "A",
        state + "=",
        state + "." + mac,
        round_id.upper() + "." + mac,
        round_id.replace("-", "") + "." + mac,
        f"{uuid.uuid4()}.{mac}",
        state[::-1],
        state.replace(".", ":"),
        " " + state,
        state + "\n",
    ]


def test_a_modified_request_state_fails_with_32602_invalid_or_expired_request_state_and_400():
    first = asked("greeter")
    mutations = _mutations(first["requestState"])
    assert len(mutations) > 90 and first["requestState"] not in mutations

    for state in mutations:
        with pytest.raises(RpcError) as raised:
            answer("greeter", {}, {"requestState": state}, NAME)
        assert raised.value.http_status == 400, state
        assert (raised.value.code, raised.value.message, raised.value.data) == tuple(INVALID_STATE.values()), state

    # The real token still answers the round: nothing above touched it.
    assert answer("greeter", {}, first, NAME)["structuredContent"] == {"greeting": "Hello, Ada!"}


def test_a_request_state_with_the_round_id_of_another_round_fails_the_same_way():
    mine, other = asked("greeter"), asked("greeter")
    spliced = other["requestState"].partition(".")[0] + "." + mine["requestState"].partition(".")[2]

    assert refused("greeter", {}, responses=NAME, request_state=spliced) == INVALID_STATE


def test_a_request_state_sent_with_another_tool_name_or_other_arguments_fails_the_same_way():
    first = asked("greeter")
    state = first["requestState"]

    # Arguments that the tool's input schema refuses, or another tool's required arguments missing,
    # fail as an invalid requestState too, not as the tool's "Invalid arguments" result.
    others = [("survey", {}), ("connect_calendar", {}), ("greeter", {"greeting": "hi"})]
    others += [("greeter", {"greeting": 5}), ("digital_twin", {})]
    # A name no tool has is another tool name too: the requestState is what fails, not the name.
    others += [("no_such_tool", {})]
    for name, arguments in others:
        assert refused(name, arguments, responses=NAME, request_state=state) == INVALID_STATE, (name, arguments)
    assert answer("greeter", {}, first, NAME)["structuredContent"] == {"greeting": "Hello, Ada!"}


def test_a_request_state_of_an_expired_call_fails_the_same_way():
    first = asked("greeter")
    expires_at = call_of(first["requestState"]).expires_at

    with time_machine.travel(expires_at + timedelta(seconds=1)):
        assert refused("greeter", {}, responses=NAME, request_state=first["requestState"]) == INVALID_STATE


# Secure paused calls


def test_a_request_state_works_only_for_the_agent_tool_name_and_arguments_of_its_call():
    first = asked("context_echo", {"value": "a"})
    key = only_key(first)

    for name, arguments in [("context_echo", {"value": "b"}), ("context_echo", {}), ("choose_region", {"value": "a"})]:
        error = refused(
            name,
            arguments,
            responses={key: input_response_accepting(response="y")},
            request_state=first["requestState"],
        )
        assert error == INVALID_STATE, (name, arguments)
    assert answer("context_echo", {"value": "a"}, first, {key: input_response_accepting(response="y")})


def test_a_request_state_from_another_user_fails_with_32602():
    first = asked("greeter", by=caller("user:1"))

    assert (
        refused("greeter", {}, responses=NAME, request_state=first["requestState"], by=caller("user:2"))
        == INVALID_STATE
    )
    assert answer("greeter", {}, first, NAME, by=caller("user:1"))["structuredContent"] == {"greeting": "Hello, Ada!"}
