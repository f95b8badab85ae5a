"""The tool calls in the admin: newest first, the caller by username, the questions a paused
call waits on, and the status of the calls that are tasks."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.inprocess.driver import asked, call, call_of, caller, finish_runs, task
from tests.rounds import checkpoint_threads


@pytest.fixture
def staff_client(client):
    client.force_login(get_user_model().objects.create_superuser("root"))
    return client


def test_the_tool_call_list_is_newest_first_and_names_the_caller_by_username(staff_client):
    ada = get_user_model().objects.create_user("ada")
    call("greeter", by=caller(f"user:{ada.pk}"))
    call("choose_region", by=caller("team:ops"))

    page = staff_client.get("/admin/mcp_gateway/toolcall/").content.decode()

    assert page.index("choose_region") < page.index("greeter")
    assert ">ada<" in page and f"user:{ada.pk}" not in page
    # An identity that is not a user's (another MCP_AUTH_HANDLER's) is shown as it is.
    assert "team:ops" in page


def test_a_paused_calls_page_shows_the_question_it_waits_on(staff_client):
    paused = asked("choose_region")

    page = staff_client.get(f"/admin/mcp_gateway/toolcall/{call_of(paused['requestState']).pk}/change/")

    (question,) = paused["inputRequests"].values()
    assert question["params"]["message"] in page.content.decode()


def test_the_tool_call_list_costs_the_same_queries_however_many_tasks_it_shows(staff_client):
    task("slow_task", {"value": 0})
    with CaptureQueriesContext(connection) as with_one:
        staff_client.get("/admin/mcp_gateway/toolcall/")
    task("choose_region_task")
    finish_runs()
    task("slow_task", {"value": 0})
    task("slow_task", {"value": 0})

    with CaptureQueriesContext(connection) as with_four:
        page = staff_client.get("/admin/mcp_gateway/toolcall/").content.decode()

    assert len(with_four) == len(with_one)
    statuses = [s for s in ("working", "input_required", "completed") if f'<td class="field-task">{s}</td>' in page]
    assert statuses == ["working", "input_required", "completed"]


def test_a_call_staff_delete_in_the_admin_goes_with_its_thread(staff_client):
    paused = call_of(asked("choose_region")["requestState"])
    assert paused.thread_id in checkpoint_threads()

    response = staff_client.post(f"/admin/mcp_gateway/toolcall/{paused.pk}/delete/", {"post": "yes"})

    assert response.status_code == 302
    assert paused.thread_id not in checkpoint_threads()
    assert not type(paused).objects.filter(pk=paused.pk).exists()


def test_calls_staff_delete_together_in_the_admin_go_with_their_threads(staff_client):
    calls = [call_of(asked("choose_region")["requestState"]) for _ in range(2)]

    staff_client.post(
        "/admin/mcp_gateway/toolcall/",
        {"action": "delete_selected", "_selected_action": [c.pk for c in calls], "post": "yes"},
    )

    assert not {c.thread_id for c in calls} & checkpoint_threads()
