"""Property tests of rounds, without a server: whatever interrupts an agent author writes,
`questions.build_round` makes a round of valid requests or refuses it as Unaskable, and whatever a
client answers, `questions.resume_values` gives resume values, End or InvalidAnswer, never another
exception (docs/rules.md, "Questions")."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from langgraph.types import Interrupt
from mcp_types._v2026_07_28 import ElicitRequestURLParams
from pydantic import TypeAdapter

from mcp_gateway.calls import form_schemas, questions, review  # noqa: F401  (review registers its question kind)
from mcp_gateway.calls.form_schemas import Unaskable
from tests.schema_strategies import (
    agent_types,
    answers_for,
    assert_valid_form,
    examples,
    good_form,
    json_leaves,
    json_values,
    relay_request,
    schema_like,
)

# --- interrupts written by agent authors: a round or Unaskable; answers: values, End or InvalidAnswer --

interrupt_values = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["Which region?", "Your name?", "Reset your password?"]),
    json_values,
    st.fixed_dictionaries(
        {
            "type": st.just("mcp_elicitation"),
            "requests": st.lists(relay_request, max_size=3)
            | st.dictionaries(st.text(max_size=3), relay_request, max_size=3)
            | json_values,
        }
    ),
    st.fixed_dictionaries(
        {
            "action_requests": st.lists(
                st.fixed_dictionaries(
                    {
                        "name": st.sampled_from(["send_email", "x"]) | json_leaves,
                        "args": st.dictionaries(st.text(max_size=3), json_values, max_size=3) | json_values,
                    },
                    optional={"description": st.text(max_size=10) | json_leaves},
                ),
                max_size=3,
            )
            | json_values,
            "review_configs": st.lists(
                st.fixed_dictionaries(
                    {
                        "action_name": st.sampled_from(["send_email", "x"]) | json_leaves,
                        "allowed_decisions": st.lists(
                            st.sampled_from(["approve", "edit", "reject", "respond", "x"]), max_size=4
                        )
                        | json_values,
                    }
                ),
                max_size=3,
            )
            | json_values,
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("tool_approval"),
            "name": st.sampled_from(["send_email"]) | json_leaves,
            "args": st.dictionaries(st.text(max_size=3), json_values, max_size=3) | json_values,
        }
    ),
)
# The per-call middleware's own response_schema: a discriminated oneOf of the decisions it allows.
PER_CALL_SCHEMA = {
    "oneOf": [
        {"properties": {"type": {"const": "approve"}}},
        {"properties": {"type": {"const": "reject"}, "message": {"type": "string"}}},
    ]
}


@st.composite
def an_interrupt(draw) -> Interrupt:
    value = draw(interrupt_values)
    if isinstance(value, dict) and value.get("type") == "tool_approval":
        # LangGraph's middleware writes this schema; malformed ones are the xfail test below.
        schema = draw(st.none() | st.just(PER_CALL_SCHEMA))
    else:
        schema = draw(st.none() | good_form | schema_like() | json_values | st.just(PER_CALL_SCHEMA))
    if draw(st.integers(0, 3)) == 0:
        event("a typed question")
        schema = TypeAdapter(draw(agent_types())).json_schema()
    return Interrupt(value=value, id=f"i-{draw(st.integers(0, 10**6))}", response_schema=schema)


interrupts = st.lists(an_interrupt(), min_size=1, max_size=3, unique_by=lambda i: i.id)
answer_values = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"action": st.sampled_from(["accept", "decline", "cancel", "other"])},
        optional={
            "content": st.dictionaries(
                st.sampled_from(["response", "decision", "message", "args", "ok", "name"]),
                json_leaves
                | st.sampled_from(["approve", "edit", "reject", "respond", "{}", '{"to": "x"}', "[1]", "{", "NaN"]),
                max_size=4,
            )
            | json_values
        },
    ),
)


@settings(max_examples=examples(800), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(interrupts, st.data())
def test_any_interrupts_become_a_round_of_valid_requests_or_unaskable_and_any_answers_resolve_or_are_invalid(
    pending, data
):
    try:
        round_ = questions.build_round(tuple(pending))
    except Unaskable:
        event("unaskable")
        return
    event("asked")
    json.dumps(round_, allow_nan=False)  # stored in a JSON column as is
    for request in round_["requests"].values():
        assert request["method"] == "elicitation/create"
        params = request["params"]
        if params["mode"] == "url":
            ElicitRequestURLParams.model_validate({**params, "elicitationId": "e"})
        else:
            assert_valid_form(params["requestedSchema"])
    keys = list(round_["requests"])
    responses = data.draw(st.dictionaries(st.sampled_from(keys + ["other"]), answer_values, max_size=len(keys) + 1))
    if data.draw(st.booleans()):
        # Answers the form admits, for every key.
        for key, request in round_["requests"].items():
            params = request["params"]
            if params["mode"] == "form":
                responses[key] = {"action": "accept", "content": data.draw(answers_for(params["requestedSchema"]))}
            else:
                responses[key] = {"action": data.draw(st.sampled_from(["accept", "decline", "cancel"]))}
    try:
        values = questions.resume_values(round_, responses)
    except questions.InvalidAnswer as exc:
        event("invalid answer")
        assert isinstance(exc.message, str)
        json.dumps(exc.data)
        return
    if values is None:
        event("an answer missing")
        assert set(round_["requests"]) - set(responses)
        return
    event("resumed")
    if not isinstance(values, questions.End):
        assert set(values) <= {i.id for i in pending}
        json.dumps(values, allow_nan=False)  # a resume value travels as JSON


@pytest.mark.parametrize(
    "schema",
    [{"anyOf": 1.0}, {"properties": True}, {"oneOf": [True]}],
    ids=["anyOf number", "properties true", "branch true"],
)
def test_a_tool_approval_interrupt_with_a_malformed_response_schema_is_unaskable(schema):
    pending = Interrupt(
        value={"type": "tool_approval", "name": "send_email", "args": {}}, id="i-1", response_schema=schema
    )
    with pytest.raises(Unaskable):
        questions.build_round((pending,))


@pytest.mark.parametrize("args", ["[" * 100_000, '{"a":' * 100_000])
def test_an_edit_whose_args_nest_too_deeply_for_python_is_an_invalid_answer(args):
    pending = Interrupt(
        value={
            "action_requests": [{"name": "send_email", "args": {"to": "a"}}],
            "review_configs": [{"action_name": "send_email", "allowed_decisions": ["approve", "edit"]}],
        },
        id="i-1",
    )
    round_ = questions.build_round((pending,))
    (key,) = round_["requests"]
    with pytest.raises(questions.InvalidAnswer):
        questions.resume_values(round_, {key: {"action": "accept", "content": {"decision": "edit", "args": args}}})
