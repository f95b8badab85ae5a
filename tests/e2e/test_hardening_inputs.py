"""Hardening against what a client puts in a call: random tool arguments and context, questions
any agent author could write, and random answers and requestStates sent to a paused call. Each
test first pauses a call owned by someone else and checks at the end that its rows and its
checkpoint are exactly as they were."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from mcp_gateway import limits
from mcp_gateway.models import ToolCall
from tests.clients import Raw, meta
from tests.e2e.fuzzing import (
    STRICT_TOOLS,
    Paused,
    _mutated,
    base_headers,
    cases,
    clean,
    json_leaves,
    json_values,
    meta_values,
    note,
    printable,
)
from tests.rounds import (
    INVALID_STATE,
    UNASKABLE,
    result_of,
)
from tests.schema_strategies import answers_for, assert_valid_form

pytestmark = pytest.mark.usefixtures("generated_cases_summary")


def test_random_tool_arguments_and_context_never_start_a_call_that_fails_validation(mcp_url, token, victim):
    raw = Raw(mcp_url, token)

    arguments_ = st.dictionaries(
        st.sampled_from(["greeting", "message ", "to", "x"]) | st.text(max_size=6), json_values, max_size=4
    )

    @cases(400)
    @given(
        st.sampled_from(STRICT_TOOLS),
        arguments_ | json_values,
        st.none() | arguments_ | json_values,
        st.none() | st.none() | st.none() | json_values,
    )
    def run(tool, arguments, context, extra):
        params: dict[str, Any] = {"name": tool, "arguments": arguments, "_meta": meta()}
        if context is not None:
            params["context"] = context
        if isinstance(extra, dict):
            params.update({k: v for k, v in extra.items() if k not in ("name", "_meta")})
        body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
        response = raw.post(body, {**raw.headers("tools/call"), **base_headers("tools/call", tool)})
        answer = clean(response, body)
        note("tool arguments: " + ("error result" if "result" in answer else f"error {answer['error']['code']}"))
        if "result" in answer:
            assert answer["result"]["isError"] is True
            assert answer["result"]["content"][0]["text"].startswith(f"Invalid arguments for {tool}")

    run()
    victim.assert_unchanged()
    assert not ToolCall.objects.exclude(pk=victim.call.pk).exists()


def test_questions_written_by_agent_authors_are_valid_forms_or_unaskable(mcp_url, token, victim, settings):
    """typed_from_input, relay_from_input and relay_url ask what their arguments say: any
    response_schema, relayed request list or URL an agent author could write."""
    from tests.schema_strategies import good_form, relay_request, schema_like

    settings.MCP_RUN_WAIT_SECONDS = 20  # a run that never settles (a crashed worker) fails the test
    raw = Raw(mcp_url, token)
    values = {
        "typed_from_input": st.one_of(good_form, schema_like(), json_values),
        "relay_from_input": st.one_of(
            st.lists(relay_request, max_size=2),
            st.dictionaries(st.text(max_size=4), relay_request, max_size=2),
            json_values,
        ),
        "relay_url": st.one_of(
            st.sampled_from(
                [
                    "https://example.com/a",
                    "https://[::1",
                    "http://example.com",
                    "https://u:p@example.com/",
                    "https://example.com:99999/",
                    "http://localhost:1/x",
                ]
            ),
            json_values,
        ),
    }

    @cases(150)
    @given(st.sampled_from(sorted(values)), st.data())
    def run(tool, data):
        value = data.draw(values[tool])
        # U+0000 and integers beyond 64 bits are refused before any run (tested below).
        assume(limits.resume_value_error(value) is None)
        result = result_of(raw.call(tool, {"value": value}))
        assert set(result) != {"resultType", "requestState", "_meta"}, "the run never settled"
        if result.get("resultType") == "input_required":
            note("agent question: asked")
            for request in result["inputRequests"].values():
                if request["params"]["mode"] == "form":
                    assert_valid_form(request["params"]["requestedSchema"])
        else:
            unaskable = result["content"][0]["text"].startswith(UNASKABLE)
            note("agent question: " + ("unaskable" if unaskable else "tool error"))
            assert result["isError"] is True
            assert "Traceback" not in json.dumps(result)

    run()
    victim.assert_unchanged()


def test_random_answers_and_request_states_reach_a_paused_call_and_never_another(mcp_url, token, victim):
    raw = Raw(mcp_url, token)
    paused = Paused(raw)
    (key,) = paused.requests
    form = paused.requests[key]["params"]["requestedSchema"]
    answer_values = st.one_of(
        answers_for(form).map(lambda c: {"action": "accept", "content": c}),
        st.fixed_dictionaries(
            {"action": st.sampled_from(["accept", "decline", "cancel", "ACCEPT", ""])},
            optional={
                "content": st.dictionaries(st.sampled_from(["region", "replicas", "x"]), json_leaves, max_size=3)
                | json_values
            },
        ),
        json_values,
    )

    @cases(300)
    @given(st.data())
    def run(data):
        if not paused.asking():
            paused.refresh()
        real = paused.state
        states = {
            "real": real,
            "victim": victim.state,
            "mutated": _mutated(real, data.draw),
            "other round": f"{uuid.uuid4()}.{real.partition('.')[2]}",
            "garbage": data.draw(printable),
        }
        which = data.draw(st.sampled_from(["real"] * 6 + sorted(states)))
        state: Any = states[which] if data.draw(st.integers(0, 19)) else data.draw(json_values)
        if state is None:
            return  # no requestState: a new call, not an answer to this one
        tool = data.draw(st.sampled_from([Paused.TOOL] * 9 + ["greeter"]))
        arguments = data.draw(st.sampled_from([Paused.ARGUMENTS] * 8 + [{"replicas": 2}, {"region": "x"}]))
        keys = data.draw(st.lists(st.sampled_from([key, key, "other", "answer-0"]), max_size=3, unique=True))
        responses = {k: data.draw(answer_values) for k in keys}
        rounds = paused.rounds()

        params: dict[str, Any] = {"inputResponses": responses, "requestState": state}
        if data.draw(st.integers(0, 9)) == 0:
            params["_meta"] = data.draw(meta_values())
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": meta(), **params},
        }
        response = raw.post(body, raw.headers("tools/call", tool))
        answer = clean(response, body)

        honest = state == real and tool == Paused.TOOL and arguments == Paused.ARGUMENTS
        if not honest:
            note(f"paused call, wrong state/tool/arguments: {which}")
            # The call did not move, and a wrong requestState is never told apart from another.
            assert paused.rounds() == rounds and paused.asking()
            if (
                isinstance(state, str)
                and "error" in answer
                and answer["error"]["code"] == -32602
                and "requestState" in answer["error"]["message"]
            ):
                assert answer["error"] == INVALID_STATE
            assert "inputRequests" not in answer.get("result", {})
        elif "result" in answer:
            note("paused call: " + ("answered" if paused.rounds() > rounds else "asked again"))
        else:
            note(f"paused call: refused {answer['error']['code']}")
            assert paused.rounds() == rounds

    run()
    victim.assert_unchanged()
