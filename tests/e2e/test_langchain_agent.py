"""Answer from a LangChain agent: an agent calls the tools through langchain's MCPAdapter over HTTP
and answers their questions as mcp_elicitation interrupts."""

from __future__ import annotations

import json
import re
import uuid
from datetime import timedelta

import pytest
import time_machine

from mcp_gateway.models import Round, ToolCall
from tests.rounds import (
    agent_answering,
    checkpoint_rows,
    input_response_accepting,
)


def near(moment, expected, slack: float = 5.0) -> bool:
    return abs((moment - expected).total_seconds()) <= slack


def test_an_agent_using_mcp_adapter_answers_the_greeter_through_mcp_elicitation_interrupts(mcp_url, token):
    message, seen = agent_answering(mcp_url, token, "greeter", {"name": input_response_accepting(name="Ada")})

    assert message.status == "success"
    assert "Hello, Ada!" in str(message.content)
    assert [r["key"] for r in seen[0]["requests"]] == ["user_name"]
    # The adapter called again from the start: the earlier attempt stays paused until it expires.
    calls = ToolCall.objects.filter(tool_name="greeter")
    assert sorted(c.status for c in calls) == [ToolCall.Status.FINISHED, ToolCall.Status.PAUSED]


def test_an_agent_using_mcp_adapter_answers_both_survey_questions_in_one_round(mcp_url, token):
    answers = {"name": input_response_accepting(response="Ada"), "colour": input_response_accepting(response="green")}
    message, seen = agent_answering(mcp_url, token, "survey", answers)

    assert message.status == "success"
    assert json.loads(message.content[0]["text"] if isinstance(message.content, list) else message.content) == {
        "name": "Ada",
        "colour": "green",
    }
    assert len(seen) == 1 and len(seen[0]["requests"]) == 2


def test_an_agent_using_mcp_adapter_replays_earlier_answers_when_the_tool_asks_them_again(mcp_url, token):
    answers = {"name": input_response_accepting(response="Ada"), "page": {"action": "accept"}}
    message, seen = agent_answering(mcp_url, token, "form_then_url", answers)

    assert message.status == "success"
    assert '"first":"Ada"' in str(message.content)
    # One interrupt per round; each rerun from the start asked the earlier round under the same key.
    assert [[r["key"] for r in value["requests"]] for value in seen] == [[seen[0]["requests"][0]["key"]], ["login"]]
    statuses = sorted(ToolCall.objects.filter(tool_name="form_then_url").values_list("status", flat=True))
    assert statuses == [ToolCall.Status.FINISHED, ToolCall.Status.PAUSED, ToolCall.Status.PAUSED]


def _counted(counter: str) -> int:
    import redis
    from django.conf import settings

    return int(redis.Redis.from_url(settings.REDIS_URL).get(f"hitl-test:{counter}") or 0)


def test_through_mcp_adapter_the_agent_behind_the_tool_reruns_up_to_each_question(mcp_url, token):
    tag = uuid.uuid4().hex

    message, seen = agent_answering(
        mcp_url, token, "effects_around_a_question", {"Go on": input_response_accepting(response="yes")}, {"value": tag}
    )

    assert message.status == "success" and len(seen) == 1
    # The work before the question ran once per attempt: the first, and the adapter's call from the
    # start that answered it. The work after it ran once.
    assert (_counted(f"before:{tag}"), _counted(f"after:{tag}")) == (2, 1)


def test_through_mcp_adapter_the_thread_of_the_earlier_attempt_stays_paused_until_it_expires(mcp_url, token):
    from mcp_gateway.calls.sweep import remove_expired_calls

    agent_answering(mcp_url, token, "greeter", {"name": input_response_accepting(name="Ada")})

    earlier = ToolCall.objects.get(tool_name="greeter", status=ToolCall.Status.PAUSED)
    asked_at = Round.objects.get(call=earlier, number=0).finished_at
    assert near(earlier.expires_at, asked_at + timedelta(hours=24), slack=1)
    with time_machine.travel(earlier.expires_at - timedelta(minutes=1)):
        remove_expired_calls()
    earlier.refresh_from_db()
    assert earlier.status == ToolCall.Status.PAUSED
    assert checkpoint_rows(earlier.thread_id) > 0
    with time_machine.travel(earlier.expires_at + timedelta(seconds=1)):
        remove_expired_calls()
    assert not ToolCall.objects.filter(pk=earlier.pk).exists()
    assert checkpoint_rows(earlier.thread_id) == 0


def test_through_mcp_adapter_a_rerun_that_asks_a_different_question_changes_the_key_and_the_adapter_raises(
    mcp_url, token
):
    # The model behind the tool proposes other arguments when the adapter calls it again.
    arguments = {"messages": f"Send the launch email ({uuid.uuid4().hex})"}
    seen: list[dict] = []

    with pytest.raises(ValueError, match="needs an answer for every elicitation request") as raised:
        agent_answering(
            mcp_url,
            token,
            "review_other_args_on_rerun",
            {"send_email": input_response_accepting(decision="approve")},
            arguments,
            seen,
        )

    ((first,),) = [value["requests"] for value in seen]
    assert "'subject': 'Launch'" in first["message"]
    (new_key,) = re.findall(r"review-[0-9a-f]{16}\.[0-9]+", str(raised.value))
    assert new_key != first["key"]
    rerun = ToolCall.objects.filter(tool_name="review_other_args_on_rerun").latest("created_at")
    (question,) = Round.objects.get(call=rerun, number=0).outcome["requests"].values()
    assert "'subject': 'Relaunch'" in question["params"]["message"]
    assert Round.objects.exclude(resume=None).count() == 0  # nothing was approved


def test_through_mcp_adapter_a_rerun_that_asks_no_question_finishes_without_the_stored_answer_and_no_error(
    mcp_url, token
):
    # The model behind the tool skips, on the adapter's rerun, the call the user approved.
    arguments = {"messages": f"Send the launch email ({uuid.uuid4().hex})"}

    message, seen = agent_answering(
        mcp_url,
        token,
        "review_nothing_on_rerun",
        {"send_email": input_response_accepting(decision="approve")},
        arguments,
    )

    assert len(seen) == 1
    assert message.status == "success"
    assert "Nothing to send after all." in message.text and "sent to" not in message.text
    assert Round.objects.exclude(resume=None).count() == 0  # the stored answer was never sent
    statuses = sorted(ToolCall.objects.values_list("status", flat=True))
    assert statuses == [ToolCall.Status.FINISHED, ToolCall.Status.PAUSED]
