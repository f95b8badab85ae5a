"""The MCP Tasks extension on paused calls: when a call becomes a task, tasks/get, tasks/update and
tasks/cancel, staff decisions reaching the task, and its lifetime, driven in-process."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from tests.inprocess.driver import (
    EVERY_MODE,
    TASKS,
    WITH_TASKS,
    ApprovalConflict,
    Round,
    ToolCall,
    asked,
    call,
    call_of,
    call_of_task,
    caller,
    cancel_task,
    checkpoint_rows,
    decide,
    expire_approvals,
    finish_runs,
    get_task,
    refused,
    run_ended,
    run_resumes,
    sweep,
    task,
    task_refused,
    update_task,
    waiting_for_staff,
)
from tests.rounds import input_response_accepting

HIRE_ME = "Please pass a message to the owner: I would like to hire you for a Django project."
NOT_FOUND = {"code": -32602, "message": "Failed to retrieve task: Task not found"}
MISSING_EXTENSION = {"requiredCapabilities": {"extensions": {TASKS: {}}}}


def _only_request(task_: dict) -> tuple[str, dict]:
    [(key, request)] = task_["inputRequests"].items()
    return key, request


# --- when a call becomes a task ------------------------------------------------------------------


def test_a_run_still_going_after_the_short_wait_becomes_a_task_for_a_client_that_declares_the_extension():
    created = call("slow", {"value": 0}, capabilities=WITH_TASKS, outlasting=True)

    assert created["resultType"] == "task"
    assert created["status"] == "working"
    assert set(created) >= {"taskId", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs", "statusMessage"}
    assert isinstance(created["ttlMs"], int) and created["ttlMs"] > 0
    # Durably created: tasks/get resolves it before anything else happens.
    assert get_task(created["taskId"])["status"] == "working"


def test_a_client_that_does_not_declare_the_extension_never_gets_a_task():
    result = call("slow", {"value": 0}, capabilities=EVERY_MODE, outlasting=True)

    assert result == {"resultType": "input_required", "requestState": result["requestState"]}


def test_a_call_that_ends_within_the_wait_returns_its_result_not_a_task():
    result = call("slow", {"value": 0}, capabilities=WITH_TASKS)

    assert result["structuredContent"] == {"value": 0, "answer": "slept"}


def test_questions_asked_before_the_task_exists_are_rounds():
    result = call("choose_region", capabilities=WITH_TASKS)

    assert result["resultType"] == "input_required" and "requestState" in result


def test_a_long_run_task_completes_with_the_call_tool_result_the_call_would_have_returned():
    created = call("slow", {"value": 0}, capabilities=WITH_TASKS, outlasting=True)

    finish_runs()

    done = get_task(created["taskId"])
    assert done["status"] == "completed"
    # What a call that ended within the wait returns.
    assert done["result"] == call("slow", {"value": 0}, capabilities=WITH_TASKS)
    assert done["taskId"] == created["taskId"] and done["createdAt"] == created["createdAt"]


def test_a_tool_error_result_completes_the_task_and_does_not_fail_it():
    created = task("slow_task", {"value": "not a number"})

    finish_runs()

    done = get_task(created["taskId"])
    assert done["status"] == "completed" and done["result"]["isError"] is True
    assert "error" not in done


def test_a_graph_whose_entry_says_always_is_a_task_at_once():
    created = task("slow_task", {"value": 0})

    assert created["status"] == "working"
    assert Round.objects.get(call=call_of_task(created["taskId"])).state == Round.State.RUNNING


def test_a_graph_that_is_always_a_task_refuses_a_client_that_did_not_declare_the_extension():
    error = refused("slow_task", {"value": 0}, capabilities=EVERY_MODE)

    assert error["code"] == -32021 and error["data"] == MISSING_EXTENSION
    assert not ToolCall.objects.exists()


def test_a_graph_whose_entry_says_never_keeps_todays_behaviour_for_a_declaring_client():
    result = call("slow_never", {"value": 0}, capabilities=WITH_TASKS, outlasting=True)

    assert result == {"resultType": "input_required", "requestState": result["requestState"]}


# --- the graph's progress, the task's statusMessage -----------------------------------------------


def test_a_tasks_run_writes_the_step_it_is_on_at_once_for_the_tasks_status_message():
    created = task("choose_region_task")
    finish_runs()

    assert call_of_task(created["taskId"]).progress == "Running choose_region"


def test_a_call_that_is_no_task_writes_no_progress_for_a_run_that_ends_within_the_interval():
    # Nobody reads a call's progress but its task's statusMessage: a write (a commit) per step spared.
    paused = asked("choose_region")

    assert call_of(paused["requestState"]).progress == ""


# --- tasks/get and the task's questions --------------------------------------------------------------


def test_a_task_that_asks_is_input_required_with_the_questions_of_a_round():
    created = task("choose_region_task")
    finish_runs()

    asking = get_task(created["taskId"])

    assert asking["status"] == "input_required"
    key, request = _only_request(asking)
    assert request["params"]["message"] == "Which region should the service deploy to?"
    assert request["params"]["requestedSchema"]["properties"] == {"response": {"type": "string"}}
    assert get_task(created["taskId"])["inputRequests"] == asking["inputRequests"]  # polled again: the same


def test_a_question_key_is_unique_over_the_life_of_a_task_even_when_a_later_round_asks_the_same_question():
    created = task("same_text_in_sequence_task")
    finish_runs()
    first_key, _ = _only_request(get_task(created["taskId"]))
    assert update_task(created["taskId"], {first_key: input_response_accepting(response="once")}) == {}
    finish_runs()

    second_key, request = _only_request(get_task(created["taskId"]))

    assert request["params"]["message"] == "Once more?"
    assert second_key != first_key
    update_task(created["taskId"], {second_key: input_response_accepting(response="twice")})
    finish_runs()
    assert get_task(created["taskId"])["result"]["structuredContent"] == {"answers": ["once", "twice"]}


def test_a_first_calls_input_responses_do_not_answer_the_questions_its_task_asks_later():
    # A task's questions are answered with the keys its inputRequests issued; answers sent before any
    # was issued are for keys never issued, which the extension says to ignore.
    (key,) = asked("choose_region")["inputRequests"]
    early = {key: input_response_accepting(response="eu-west")}

    created = call("choose_region", {}, responses=early, capabilities=WITH_TASKS, outlasting=True)
    finish_runs()

    assert created["resultType"] == "task"
    asking = get_task(created["taskId"])
    assert asking["status"] == "input_required"
    task_key, request = _only_request(asking)
    assert request["params"]["message"] == "Which region should the service deploy to?"
    update_task(created["taskId"], {task_key: input_response_accepting(response="us-east")})
    finish_runs()
    assert "us-east" in get_task(created["taskId"])["result"]["content"][0]["text"]


def test_missing_answers_keep_the_task_input_required_and_the_answers_sent_are_kept():
    created = task("survey_task")
    finish_runs()
    asking = get_task(created["taskId"])
    by_text = {r["params"]["message"]: k for k, r in asking["inputRequests"].items()}

    update_task(created["taskId"], {by_text["What is your name?"]: input_response_accepting(response="Ada")})

    still = get_task(created["taskId"])
    assert still["status"] == "input_required"
    assert list(still["inputRequests"]) == [by_text["What is your favourite colour?"]]
    update_task(
        created["taskId"], {by_text["What is your favourite colour?"]: input_response_accepting(response="green")}
    )
    finish_runs()
    assert get_task(created["taskId"])["result"]["structuredContent"] == {"name": "Ada", "colour": "green"}


def test_answers_to_keys_not_outstanding_are_ignored():
    created = task("choose_region_task")
    finish_runs()
    key, _ = _only_request(get_task(created["taskId"]))

    assert update_task(created["taskId"], {"never-asked": input_response_accepting(response="x")}) == {}
    assert update_task(created["taskId"], {key.partition(":")[2]: input_response_accepting(response="x")}) == {}

    assert get_task(created["taskId"])["status"] == "input_required"


def test_an_invalid_answer_is_invalid_params_and_its_question_stays_open():
    created = task("typed_int_task")
    finish_runs()
    key, _ = _only_request(get_task(created["taskId"]))

    error = task_refused(
        "tasks/update", created["taskId"], inputResponses={key: input_response_accepting(response="x")}
    )

    assert error["code"] == -32602
    assert get_task(created["taskId"])["inputRequests"].keys() == {key}
    update_task(created["taskId"], {key: input_response_accepting(response=3)})
    finish_runs()
    assert get_task(created["taskId"])["result"]["structuredContent"]["answer"] == 3


def test_the_same_answers_sent_twice_resume_the_agent_once():
    created = task("count_resumes_task", {"value": "tasks-twice"})
    finish_runs()
    key, _ = _only_request(get_task(created["taskId"]))
    answer = {key: input_response_accepting(response="yes")}

    update_task(created["taskId"], answer)
    update_task(created["taskId"], answer)

    assert Round.objects.filter(call=call_of_task(created["taskId"])).count() == 2
    finish_runs()
    assert get_task(created["taskId"])["status"] == "completed"


def test_a_declined_text_question_completes_the_task_with_the_error_result():
    created = task("choose_region_task")
    finish_runs()
    key, _ = _only_request(get_task(created["taskId"]))

    update_task(created["taskId"], {key: {"action": "decline"}})

    done = get_task(created["taskId"])
    assert done["status"] == "completed"
    assert done["result"]["isError"] is True
    assert done["result"]["content"][0]["text"] == "The request for input was declined."


def test_a_question_in_a_mode_the_polling_client_did_not_declare_is_missing_capability():
    created = task("connect_calendar_task")
    finish_runs()

    error = task_refused("tasks/get", created["taskId"], capabilities={"elicitation": {"form": {}}, **_ext()})

    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"elicitation": {"url": {}}}}
    assert get_task(created["taskId"])["status"] == "input_required"


def _ext() -> dict:
    return {"extensions": {TASKS: {}}}


# --- tasks/cancel ---------------------------------------------------------------------------------


def test_a_cancelled_run_that_had_not_started_never_starts():
    created = task("slow_task", {"value": 0})

    assert cancel_task(created["taskId"]) == {}
    finish_runs()

    assert get_task(created["taskId"])["status"] == "cancelled"
    assert checkpoint_rows(call_of_task(created["taskId"]).thread_id) == 0


def test_a_cancelled_task_that_waits_for_answers_ends_cancelled_without_resuming():
    created = task("count_resumes_task", {"value": "tasks-cancelled"})
    finish_runs()
    key, _ = _only_request(get_task(created["taskId"]))

    cancel_task(created["taskId"])
    update_task(created["taskId"], {key: input_response_accepting(response="yes")})

    cancelled = get_task(created["taskId"])
    assert cancelled["status"] == "cancelled" and "inputRequests" not in cancelled
    assert not Round.objects.filter(call=call_of_task(created["taskId"]), state=Round.State.RUNNING).exists()


def test_cancelling_a_task_that_has_finished_is_acknowledged_and_it_stays_completed():
    created = task("slow_task", {"value": 0})
    finish_runs()

    acknowledged = cancel_task(created["taskId"])

    assert acknowledged == {}
    assert get_task(created["taskId"])["status"] == "completed"


# --- who may read a task -------------------------------------------------------------------------


def test_another_callers_task_id_gets_the_same_error_as_an_unknown_one():
    created = task("slow_task", {"value": 0})
    stranger = caller("user:2")

    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        extra = {"inputResponses": {}} if method == "tasks/update" else {}
        assert task_refused(method, created["taskId"], by=stranger, **extra) == NOT_FOUND
        forged = created["taskId"][:-2] + ("yy" if created["taskId"].endswith("xx") else "xx")
        assert task_refused(method, forged, **extra) == NOT_FOUND
        assert task_refused(method, "not-a-task", **extra) == NOT_FOUND
    assert get_task(created["taskId"])["status"] == "working"


def test_the_task_methods_need_the_extension_declared_on_their_request():
    created = task("slow_task", {"value": 0})

    error = task_refused("tasks/get", created["taskId"], capabilities=EVERY_MODE)

    assert error["code"] == -32021 and error["data"] == MISSING_EXTENSION


def test_the_database_holds_only_a_keyed_hash_of_a_task_id():
    created = task("slow_task", {"value": 0})

    row = call_of_task(created["taskId"])

    assert row.task_hash and row.task_hash not in created["taskId"] and created["taskId"] != row.task_hash


# --- lifetime -------------------------------------------------------------------------------------


def test_a_finished_task_is_kept_for_its_ttl_then_removed_by_the_sweep(settings):
    created = task("slow_task", {"value": 0})
    finish_runs()
    done = get_task(created["taskId"])
    kept_until = timezone.now() + settings.MCP_TASK_FINISHED_TTL

    with time_machine.travel(kept_until - timedelta(minutes=1)):
        sweep()
        assert get_task(created["taskId"])["status"] == "completed"
    with time_machine.travel(kept_until + timedelta(minutes=1)):
        sweep()
        assert task_refused("tasks/get", created["taskId"]) == NOT_FOUND
    assert done["ttlMs"] >= settings.MCP_TASK_FINISHED_TTL.total_seconds() * 1000


# --- staff approvals -------------------------------------------------------------------------------


@pytest.fixture
def staff_task(model_in_this_process):
    """A digital_twin call from a task-capable client, waiting for staff."""
    from approvals.models import ApprovalRequest

    created = call("digital_twin", {"message": HIRE_ME}, capabilities=WITH_TASKS)
    assert created["resultType"] == "task", created
    return created, ApprovalRequest.objects.get(call=call_of_task(created["taskId"]))


def _decide(approval, approved: bool) -> None:
    decide(approval, approved=approved)
    run_resumes()


def test_a_call_handed_over_to_staff_is_a_working_task_waiting_for_staff_approval(staff_task, settings):
    created, _ = staff_task

    assert created["status"] == "working" and created["statusMessage"] == "Waiting for staff approval"
    assert created["pollIntervalMs"] == settings.MCP_TASK_STAFF_POLL_INTERVAL_MS
    assert get_task(created["taskId"])["statusMessage"] == "Waiting for staff approval"


def test_a_staff_decision_completes_the_task_with_the_agents_final_answer(staff_task):
    created, approval = staff_task

    _decide(approval, approved=True)

    done = get_task(created["taskId"])
    assert done["status"] == "completed" and done["result"]["isError"] is False
    approval.refresh_from_db()
    assert done["result"]["structuredContent"]["answer"] == approval.answer
    assert approval.answer.startswith("Your message was recorded")


def test_a_task_whose_approval_staff_decided_says_the_agent_is_resuming_until_its_run_ends(staff_task, settings):
    created, approval = staff_task

    decide(approval, approved=True)

    resuming = get_task(created["taskId"])
    assert resuming["status"] == "working"
    assert resuming["statusMessage"] == "Staff approved; the agent is resuming"
    assert resuming["pollIntervalMs"] == settings.MCP_TASK_POLL_INTERVAL_MS
    run_resumes()
    assert get_task(created["taskId"])["status"] == "completed"


def test_a_task_whose_approval_expired_says_the_agent_is_resuming_with_a_decline(staff_task):
    created, approval = staff_task
    with time_machine.travel(approval.expires_at + timedelta(seconds=1)):
        expire_approvals()

    assert (
        get_task(created["taskId"])["statusMessage"] == "Nobody decided in time; the agent is resuming with a decline"
    )


def test_an_approval_that_expires_completes_the_task_with_the_agents_decline(staff_task):
    created, approval = staff_task
    with time_machine.travel(approval.expires_at + timedelta(seconds=1)):
        expire_approvals()
    run_resumes()

    done = get_task(created["taskId"])
    assert done["status"] == "completed"
    assert "declined" in done["result"]["structuredContent"]["answer"]


def test_cancelling_a_task_waiting_for_staff_withdraws_its_approval_so_staff_cannot_decide_it(staff_task):
    from approvals.models import ApprovalRequest

    created, approval = staff_task

    cancel_task(created["taskId"])

    assert get_task(created["taskId"])["status"] == "cancelled"
    approval.refresh_from_db()
    assert approval.status == ApprovalRequest.Status.WITHDRAWN
    with pytest.raises(ApprovalConflict, match="withdrawn"):
        decide(approval, approved=True)


def test_a_task_whose_approval_staff_already_decided_is_not_cancelled(staff_task):
    created, approval = staff_task
    decide(approval, approved=True)

    assert cancel_task(created["taskId"]) == {}
    run_resumes()

    assert get_task(created["taskId"])["status"] == "completed"


def test_a_withdrawn_approval_leaves_the_staff_queue(staff_task):
    created, approval = staff_task
    assert waiting_for_staff() == [approval]

    cancel_task(created["taskId"])

    assert waiting_for_staff() == []


def test_a_task_whose_approval_expired_is_not_cancelled_and_ends_with_the_agents_decline(staff_task):
    from approvals.models import ApprovalRequest

    created, approval = staff_task
    with time_machine.travel(approval.expires_at + timedelta(seconds=1)):
        assert expire_approvals() == 1

    assert cancel_task(created["taskId"]) == {}
    run_resumes()

    approval.refresh_from_db()
    assert approval.status == ApprovalRequest.Status.EXPIRED
    done = get_task(created["taskId"])
    assert done["status"] == "completed" and "declined" in done["result"]["structuredContent"]["answer"]


def test_staff_see_which_calls_are_tasks_with_their_status_and_a_withdrawn_approval_in_the_admin(
    staff_task, admin_client
):
    from django.urls import reverse

    created, approval = staff_task
    cancel_task(created["taskId"])

    calls = admin_client.get(reverse("admin:mcp_gateway_toolcall_changelist")).content.decode()
    withdrawn = admin_client.get(reverse("admin:approvals_approvalrequest_changelist") + "?queue=withdrawn")

    assert '<td class="field-task">cancelled</td>' in calls
    assert "Withdrawn by the client" in withdrawn.content.decode()


def test_a_call_whose_run_ended_just_before_it_became_a_task_is_kept_for_the_task_lifetime(settings):
    now = timezone.now()
    call_ = ToolCall.objects.create(
        thread_id=str(uuid.uuid4()),
        graph="slow",
        tool_name="slow",
        arguments_digest="-",
        caller="user:1",
        expires_at=now + timedelta(hours=24),
    )
    run_ended(call_)  # as a finished call: 10 minutes
    assert call_.expires_at < now + timedelta(minutes=11)

    call_.become_task("hash-of-its-task-id")

    assert call_.expires_at >= now + settings.MCP_TASK_FINISHED_TTL
