"""A cut first call can be sent again: a first call with the idempotency key (the `_meta` key
"hitl-mcp/idempotencyKey") of one the same caller sent within MCP_IDEMPOTENCY_WINDOW, for the same
tool and arguments, gets the call that one started, running, paused or finished, and never starts a
second run. Without a key, every first call starts a run of its own."""

from __future__ import annotations

from datetime import timedelta

import time_machine
from django.conf import settings
from django.utils import timezone

from tests.inprocess.driver import (
    KEY_REUSED,
    WITH_TASKS,
    Round,
    ToolCall,
    asked,
    call,
    caller,
    checkpoint_rows,
    finish_runs,
    refused,
    task,
)
from tests.rounds import input_response_accepting, only_key

REGION = "eu-west-1"


def test_a_first_call_sent_again_with_its_idempotency_key_gets_the_paused_call_not_a_second_run():
    first = asked("choose_region", idempotency_key="k-1")
    again = asked("choose_region", idempotency_key="k-1")

    assert again == first  # the same questions, the same requestState
    assert ToolCall.objects.count() == 1 and Round.objects.count() == 1


def test_a_first_call_sent_again_while_its_run_goes_on_waits_for_that_run():
    still_running = call("choose_region", outlasting=True, idempotency_key="k-1")
    assert set(still_running) == {"resultType", "requestState"}

    again = asked("choose_region", idempotency_key="k-1")  # the driver's worker runs round 0 once

    assert again["requestState"] == still_running["requestState"]
    assert ToolCall.objects.count() == 1 and Round.objects.count() == 1


def test_a_first_call_sent_again_after_its_call_finished_gets_the_result_without_running_again(tmp_path):
    arguments = {"signal_dir": str(tmp_path), "tag": "once", "seconds": 0}
    done = call("slow_effect", arguments, idempotency_key="k-1")
    thread_id = ToolCall.objects.get().thread_id
    assert checkpoint_rows(thread_id) == 0  # docs/rules.md, "Lifetime": finished without a requestState

    again = call("slow_effect", arguments, idempotency_key="k-1")

    assert again == done and done["structuredContent"]["done"] is True
    assert (tmp_path / "effects").read_text().splitlines() == ["once"]


def test_answers_sent_again_in_a_first_call_with_its_idempotency_key_resume_the_call_once():
    first = asked("choose_region", idempotency_key="k-1")
    answers = {only_key(first): input_response_accepting(response=REGION)}

    results = [call("choose_region", responses=answers, idempotency_key="k-1") for _ in range(2)]

    assert results[0] == results[1] and results[0]["structuredContent"] == {"region": REGION}
    assert Round.objects.count() == 2  # round 0 asked; one resume ran


def test_an_idempotency_key_sent_again_with_other_arguments_or_another_tool_fails_with_32602():
    asked("choose_region", idempotency_key="k-1")

    assert refused("choose_region", {"other": 1}, idempotency_key="k-1") == {"code": -32602, "message": KEY_REUSED}
    assert refused("greeter", idempotency_key="k-1") == {"code": -32602, "message": KEY_REUSED}
    assert ToolCall.objects.count() == 1


def test_an_idempotency_key_is_the_callers_own():
    asked("choose_region", idempotency_key="k-1", by=caller("user:1"))
    asked("choose_region", idempotency_key="k-1", by=caller("user:2"))
    assert ToolCall.objects.count() == 2


def test_a_first_call_sent_again_after_the_idempotency_window_starts_a_new_call():
    first = asked("choose_region", idempotency_key="k-1")
    later = timezone.now() + settings.MCP_IDEMPOTENCY_WINDOW + timedelta(seconds=1)
    with time_machine.travel(later, tick=False):
        again = asked("choose_region", idempotency_key="k-1")
    assert again["requestState"] != first["requestState"]
    assert ToolCall.objects.count() == 2


def test_without_an_idempotency_key_a_first_call_sent_again_starts_a_second_run():
    first = call("choose_region", outlasting=True)
    again = call("choose_region", outlasting=True)
    finish_runs()
    assert again["requestState"] != first["requestState"]
    assert ToolCall.objects.count() == 2


def test_a_first_call_of_a_tool_that_runs_only_as_a_task_sent_again_with_its_key_gets_the_same_task():
    created = task("slow_task", {"value": 0}, idempotency_key="k-1")
    again = task("slow_task", {"value": 0}, idempotency_key="k-1")

    assert again["taskId"] == created["taskId"]
    assert ToolCall.objects.count() == 1 and Round.objects.count() == 1
    assert refused("slow_task", {"value": 1}, idempotency_key="k-1", capabilities=WITH_TASKS) == {
        "code": -32602,
        "message": KEY_REUSED,
    }
