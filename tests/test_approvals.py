"""Staff approvals (issue 5), the article's rules through the public interfaces: a high-risk tool
call pauses the run and the MCP call ends with the approval notice; staff list and decide through
the REST API; the decision resumes the thread in the Celery worker. The model is the only fake.

The helpers here are shared with test_approvals_admin.py and test_approvals_browser.py.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from datetime import timedelta
from typing import Any

import httpx
import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult

from approvals.handover import APPROVAL_NOTICE
from tests.clients import Raw, run, sdk_client
from tests.fakes import openai_server
from tests.processes import free_port

ADMIN_TOKEN = "staff-only-admin-token"
HIRE_ME = "Please pass a message to the owner: I would like to hire you for a Django project."
DRAFT = {"name": "Visitor", "email": "visitor@example.com", "message": HIRE_ME}
SECOND_DRAFT = {"name": "Visitor", "email": "visitor@example.com", "message": "And a second one, never shown to staff."}


# --- helpers ----------------------------------------------------------------------------------


def record_model_requests(fake_model_url: str):
    """Clear the fake model's record; the function returned lists the requests it gets from now on."""
    httpx.delete(f"{fake_model_url}/_requests")
    return lambda: httpx.get(f"{fake_model_url}/_requests").json()


@pytest.fixture
def model_requests(fake_model):
    return record_model_requests(fake_model)


class AdminAPI:
    def __init__(self, base_url: str, token: str | None):
        self.base_url = f"{base_url}/api/admin/approvals"
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(headers=headers, timeout=120)

    def pending(self) -> httpx.Response:
        return self.http.get(self.base_url)

    def decide(self, thread_id: str, **body: Any) -> httpx.Response:
        return self.http.post(f"{self.base_url}/{thread_id}", json=body)


@pytest.fixture
def admin_api(live_server, settings):
    settings.ADMIN_TOKEN = ADMIN_TOKEN
    return AdminAPI(live_server.url, ADMIN_TOKEN)


def pause(mcp_url: str, token: str, message: str = HIRE_ME) -> dict[str, Any]:
    """A digital_twin call that asks to message the owner: it ends paused for staff approval."""
    response = Raw(mcp_url, token).call("digital_twin", {"message": message})
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result["structuredContent"]["status"] == "pending", result
    return result


def paused_thread(mcp_url: str, token: str, message: str = HIRE_ME):
    """(approval, thread_id) of a call paused for staff."""
    from approvals.models import ApprovalRequest

    approval = ApprovalRequest.objects.get(pk=pause(mcp_url, token, message)["structuredContent"]["approval_id"])
    return approval, approval.thread_id


def wait_until(predicate, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)
    return value


def thread_state(thread_id: str) -> dict[str, Any]:
    from hitl_project.graphs import runner
    from hitl_project.graphs.registry import get_graph

    return dict(runner.state(get_graph("digital_twin"), thread_id).values)


def tool_messages(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


@pytest.fixture
def model_asks_for_notes_and_a_message(monkeypatch):
    """The fake model's first turn asks for a read-only tool and the high-risk one together."""
    script = openai_server.next_turn

    def both(messages: list[dict[str, Any]], tools: list[str]) -> dict[str, Any]:
        if not any(m["role"] == "tool" for m in messages):
            calls = [
                {"id": "call_1", "name": "search_knowledge", "args": {"query": "django"}},
                {"id": "call_2", "name": "draft_contact_message", "args": DRAFT},
            ]
            return {"content": "I'll look that up and pass it on.", "tool_calls": calls}
        return script(messages, tools)

    monkeypatch.setattr(openai_server, "next_turn", both)


@pytest.fixture
def model_in_this_process(monkeypatch, fake_model):
    """Runs of the graph in the test process talk to the fake model, as the worker's runs do."""
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("OPENAI_BASE_URL", f"{fake_model}/v1")


def resume_with(approval, value: Any):
    """Resume the paused thread with `value` as what interrupt() returns, as the worker does.

    Staff's decisions always reach the graph as {"approved": bool, "note": ...} (approval.decision),
    so any other value can only be sent to the graph here, where it enters it."""
    from hitl_project.graphs import runner
    from hitl_project.graphs.registry import get_graph

    return runner.run(get_graph(approval.graph), approval.thread_id, resume={approval.interrupt_id: value})


def last_tool_result(thread_id: str) -> str:
    return [m.content for m in thread_state(thread_id)["messages"] if m.type == "tool"][-1]


@contextlib.contextmanager
def broker_refusing_tasks():
    """Tasks sent from this process (the live server's decisions) go to a queue the broker refuses
    to push to, a Redis key holding a string: every publish fails, as when the broker is down."""
    import redis
    from django.conf import settings

    from hitl_project.celery import app

    queue = app.conf.task_default_queue
    refused = f"{queue}-refused"
    broker = redis.Redis.from_url(settings.REDIS_URL)
    broker.set(refused, "not a queue")
    app.conf.task_default_queue = refused
    try:
        yield
    finally:
        app.conf.task_default_queue = queue
        broker.delete(refused)


# --- pausing ----------------------------------------------------------------------------------


def test_a_high_risk_tool_pauses_the_run_and_the_call_ends_with_the_approval_notice(mcp_url, token, model_requests):
    async def go():
        async with sdk_client(mcp_url, token) as client:
            return await client.call_tool("digital_twin", {"message": HIRE_ME})

    result = run(go())

    assert not result.is_error
    # The article's notice (its owner's name made "the owner"), appended to what the model said.
    assert APPROVAL_NOTICE == "\n\nThis request needs the owner's personal approval — it has been queued for review."
    assert result.content[0].text == "I'll pass that on." + APPROVAL_NOTICE
    assert result.structured_content == {"approval_id": result.structured_content["approval_id"], "status": "pending"}
    # Paused before any execution or a second model call.
    assert len(model_requests()) == 1


def test_the_paused_call_waits_for_staff_for_seven_days(mcp_url, token):
    from django.utils import timezone

    from mcp_gateway.models import ToolCall

    approval, thread_id = paused_thread(mcp_url, token)

    call = ToolCall.objects.get(thread_id=thread_id)
    assert call.status == ToolCall.Status.AWAITING_STAFF
    assert approval.call_id == call.pk and approval.status == "pending"
    week = timezone.now() + timedelta(days=7)
    assert abs(call.expires_at - week) < timedelta(minutes=1)
    assert abs(approval.expires_at - week) < timedelta(minutes=1)


def test_staff_get_an_email_when_a_call_waits_for_them(mcp_url, token, celery_worker):
    from django.conf import settings

    # The worker sends it after the pause commits, with the logging backend (the settings
    # default): the message lands in the worker's log.
    approval, _ = paused_thread(mcp_url, token)

    def sent_mail() -> str:
        text = celery_worker.log.read_text(errors="replace")
        # The mail's own words: the worker's log line "... pending staff approval <id>" comes first.
        marker = text.find(f"(approval {approval.pk})")
        return text[text.rfind("Content-Type:", 0, marker) : marker + 2000] if marker >= 0 else ""

    mail = wait_until(sent_mail, timeout=20)
    assert "Subject: Approval needed: draft_contact_message" in mail
    assert f"To: {settings.APPROVAL_NOTIFY_EMAIL}" in mail
    assert HIRE_ME in mail
    assert f"/admin/approvals/approvalrequest/{approval.pk}/change/" in mail
    # Celery logs what a task prints; the e-mail is information, not a WARNING to be paged for.
    log = celery_worker.log.read_text(errors="replace")
    start = log.rfind("\n", 0, log.find(mail[:200])) + 1
    assert " INFO/" in log[start : start + 80] and "WARNING" not in log[start : start + 80], log[start : start + 80]


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")
def test_staff_get_the_email_through_the_smtp_server_email_url_names(mcp_url, token, worker_with_env):
    from django.conf import settings

    # An SMTP server that wants a login, as a provider's relay does (without TLS, which needs a
    # certificate): the user and password travel percent-encoded in EMAIL_URL.
    received = []

    class Mailbox:
        async def handle_DATA(self, server, session, envelope):
            received.append(envelope)
            return "250 OK"

    def authenticate(server, session, envelope, mechanism, login):
        return AuthResult(success=(login.login, login.password) == (b"hitl@example.com", b"p@ss/word"))

    port = free_port()
    smtp = Controller(
        Mailbox(),
        hostname="127.0.0.1",
        port=port,
        authenticator=authenticate,
        auth_required=True,
        auth_require_tls=False,
    )
    smtp.start()
    try:
        worker_with_env(
            EMAIL_URL=f"smtp://hitl%40example.com:p%40ss%2Fword@127.0.0.1:{port}",
            DEFAULT_FROM_EMAIL="HITL approvals <hitl@example.com>",
            SITE_URL="https://hitl.example.com/",
        )
        approval, _ = paused_thread(mcp_url, token)
        mail = wait_until(lambda: received, timeout=20)[0]
    finally:
        smtp.stop()
    assert mail.mail_from == "hitl@example.com"
    assert mail.rcpt_tos == [settings.APPROVAL_NOTIFY_EMAIL]
    content = mail.content.decode()
    assert "From: HITL approvals <hitl@example.com>" in content
    assert "Subject: Approval needed: draft_contact_message" in content
    # A link staff can follow from their mail client: SITE_URL, without a doubled slash.
    assert f"in the admin: https://hitl.example.com/admin/approvals/approvalrequest/{approval.pk}/change/" in content


# --- listing ----------------------------------------------------------------------------------


def test_pending_approvals_are_listed_with_the_tool_call_input_and_the_visitor_message(mcp_url, token, admin_api):
    approval_id = pause(mcp_url, token)["structuredContent"]["approval_id"]

    response = admin_api.pending()

    assert response.status_code == 200
    [listed] = response.json()
    assert listed["id"] == approval_id
    assert listed["tool_calls"] == [{"name": "draft_contact_message", "input": DRAFT}]
    assert listed["visitor_message"] == HIRE_ME
    assert listed["thread_id"]


def test_the_approval_lists_only_the_high_risk_calls_of_the_turn(
    mcp_url, token, admin_api, model_asks_for_notes_and_a_message
):
    pause(mcp_url, token)

    [listed] = admin_api.pending().json()

    # request_approval's payload: the read-only search of the same turn is not staff's to decide.
    assert listed["tool_calls"] == [{"name": "draft_contact_message", "input": DRAFT}]


# --- deciding ---------------------------------------------------------------------------------


def test_approving_resumes_the_thread_runs_the_tool_and_archives_the_draft(mcp_url, token, admin_api, model_requests):
    from approvals.models import ContactMessage
    from mcp_gateway.models import ToolCall

    approval, thread_id = paused_thread(mcp_url, token)

    response = admin_api.decide(thread_id, approved=True)

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "approved" and body["thread_id"] == thread_id
    assert body["answer"].startswith("Your message was recorded")
    requests = model_requests()
    assert len(requests) == 2
    assert any("recorded" in m for m in tool_messages(requests[1]))
    assert admin_api.pending().json() == []
    assert thread_state(thread_id)["answer"] == body["answer"]  # the closing text lands in the thread state too
    assert thread_state(thread_id)["contact_drafts"] == [{"tool": "draft_contact_message", "input": DRAFT}]
    [archived] = ContactMessage.objects.filter(approval=approval)
    assert (archived.tool, archived.input) == ("draft_contact_message", DRAFT)
    approval.refresh_from_db()
    assert approval.answer == body["answer"] and approval.decided_at
    assert (approval.decided_via, approval.decided_by, approval.decider) == ("api", None, "the REST API (admin token)")
    assert ToolCall.objects.get(thread_id=thread_id).status == ToolCall.Status.FINISHED


def test_high_risk_tools_never_run_without_an_explicit_human_approval_so_each_call_needs_its_own(
    mcp_url, token, admin_api, monkeypatch
):
    from approvals.models import ApprovalRequest, ContactMessage
    from mcp_gateway.models import ToolCall

    script = openai_server.next_turn

    def asks_again(messages: list[dict[str, Any]], tools: list[str]) -> dict[str, Any]:
        # The fake model, once its first message is recorded, asks to send a second one.
        calls = [c["function"]["name"] for m in messages for c in m.get("tool_calls") or []]
        drafts = [name for name in calls if name == "draft_contact_message"]
        if len(drafts) == 1 and any("recorded" in content for content in tool_messages({"messages": messages})):
            return {
                "content": "",
                "tool_calls": [{"id": "call_2", "name": "draft_contact_message", "args": SECOND_DRAFT}],
            }
        return script(messages, tools)

    monkeypatch.setattr(openai_server, "next_turn", asks_again)
    first, thread_id = paused_thread(mcp_url, token)

    assert admin_api.decide(thread_id, approved=True).status_code == 200

    # The approval covered the call staff were shown; the second call paused for one of its own.
    assert thread_state(thread_id)["contact_drafts"] == [{"tool": "draft_contact_message", "input": DRAFT}]
    second = ApprovalRequest.objects.exclude(pk=first.pk).get(thread_id=thread_id)
    assert second.status == "pending"
    assert second.tool_calls == [{"name": "draft_contact_message", "input": SECOND_DRAFT}]
    assert ToolCall.objects.get(thread_id=thread_id).status == ToolCall.Status.AWAITING_STAFF

    response = admin_api.decide(thread_id, approved=False, note="One message is enough.")

    assert response.status_code == 200 and "declined" in response.json()["answer"]
    assert thread_state(thread_id)["contact_drafts"] == [{"tool": "draft_contact_message", "input": DRAFT}]
    assert [m.input for m in ContactMessage.objects.all()] == [DRAFT]


@pytest.mark.parametrize("approved", ["false", "no", "true", 1, [False], [True]])
def test_only_an_explicit_approved_true_reaches_the_run(mcp_url, token, model_in_this_process, approved):
    approval, thread_id = paused_thread(mcp_url, token)

    resume_with(approval, {"approved": approved})

    assert thread_state(thread_id)["contact_drafts"] == []
    assert "declined" in last_tool_result(thread_id)


@pytest.mark.parametrize("decision", [{}, {"note": "No verdict."}, {"approved": None}], ids=["empty", "no-key", "none"])
def test_an_empty_approval_a_missing_key_or_none_declines(mcp_url, token, model_in_this_process, decision):
    approval, thread_id = paused_thread(mcp_url, token)

    resume_with(approval, decision)

    assert thread_state(thread_id)["contact_drafts"] == []
    assert "declined" in last_tool_result(thread_id)


@pytest.mark.parametrize("value", [None, True, "approved", [{"approved": True}]])
def test_a_resume_value_that_is_not_a_decision_object_declines(mcp_url, token, model_in_this_process, value):
    approval, thread_id = paused_thread(mcp_url, token)

    resume_with(approval, value)

    assert thread_state(thread_id)["contact_drafts"] == []
    assert "declined" in last_tool_result(thread_id)


@pytest.mark.parametrize(
    "approval",
    [None, {}, {"decided": True}, {"decided": True, "approved": None}, {"decided": True, "approved": "true"}],
    ids=["none", "empty", "no-key", "approved-none", "approved-string"],
)
def test_execute_tools_declines_a_high_risk_call_unless_the_state_holds_an_explicit_approved_true(
    mcp_url, token, model_in_this_process, approval
):
    from hitl_project.graphs import runner
    from hitl_project.graphs.registry import get_graph

    _, thread_id = paused_thread(mcp_url, token)
    registered = get_graph("digital_twin")
    # The executor's own check, whatever request_approval made of the decision: the run goes on
    # to execute_tools with this approval in its state.
    runner.bound(registered.graph).update_state(
        {"configurable": {"thread_id": thread_id}}, {"approval": approval}, as_node="request_approval"
    )

    runner.run(registered, thread_id, carry_on=True)

    assert thread_state(thread_id)["contact_drafts"] == []
    assert json.loads(last_tool_result(thread_id)) == {
        "status": "declined",
        "reason": "The owner declined this request.",
    }


def test_a_decision_never_leaks_into_the_visitors_next_question(mcp_url, token, admin_api, model_in_this_process):
    from hitl_project.graphs import runner
    from hitl_project.graphs.registry import get_graph

    approval, thread_id = paused_thread(mcp_url, token)
    assert admin_api.decide(thread_id, approved=True).status_code == 200
    registered = get_graph("digital_twin")
    # A run that died between staff's decision and the tool leaves the decision in the checkpoint.
    runner.bound(registered.graph).update_state(
        {"configurable": {"thread_id": thread_id}},
        {"approval": {"decided": True, "approved": True, "note": None}},
        as_node="generate",
    )

    following = runner.run(registered, thread_id, arguments={"message": "Please pass another message to the owner."})

    assert [i.value["type"] for i in following.interrupts] == ["staff_approval"]  # paused for a new decision
    assert thread_state(thread_id)["contact_drafts"] == [{"tool": "draft_contact_message", "input": DRAFT}]


def test_rejecting_declines_without_running_the_tool_and_the_model_gets_the_note(
    mcp_url, token, admin_api, model_requests
):
    from approvals.models import ContactMessage

    _, thread_id = paused_thread(mcp_url, token)
    note = "Not taking projects right now — désolé."

    response = admin_api.decide(thread_id, approved=False, note=note)

    assert response.status_code == 200
    assert response.json()["status"] == "rejected"
    assert response.json()["answer"].startswith("Sorry, the owner declined")
    requests = model_requests()
    assert len(requests) == 2
    [result] = tool_messages(requests[1])
    assert json.loads(result) == {"status": "declined", "reason": note}
    assert "declined" in result and note in result  # the article: "my note verbatim", in any script
    assert thread_state(thread_id)["contact_drafts"] == []
    assert not ContactMessage.objects.exists()


def test_a_rejection_without_a_note_gives_the_model_the_default_reason(mcp_url, token, admin_api, model_requests):
    _, thread_id = paused_thread(mcp_url, token)

    response = admin_api.decide(thread_id, approved=False)

    assert response.status_code == 200 and response.json()["status"] == "rejected"
    [result] = tool_messages(model_requests()[1])
    assert json.loads(result) == {"status": "declined", "reason": "The owner declined this request."}


def test_a_rejection_declines_only_the_high_risk_call_and_a_read_only_call_of_the_same_turn_still_runs(
    mcp_url, token, admin_api, model_requests, model_asks_for_notes_and_a_message
):
    _, thread_id = paused_thread(mcp_url, token)
    assert len(model_requests()) == 1  # the search waited for the decision too

    response = admin_api.decide(thread_id, approved=False, note="Not now.")

    assert response.status_code == 200
    search, draft = (json.loads(result) for result in tool_messages(model_requests()[1]))
    assert search == {"results": ["The owner has built Django services since 2012, mostly APIs and admin tooling."]}
    assert draft == {"status": "declined", "reason": "Not now."}
    assert thread_state(thread_id)["contact_drafts"] == []


def test_a_redelivered_resume_neither_runs_the_model_again_nor_archives_twice(
    mcp_url, token, admin_api, model_requests
):
    from approvals.models import ApprovalRequest, ContactMessage
    from approvals.tasks import resume_approval

    approval, thread_id = paused_thread(mcp_url, token)
    answer = admin_api.decide(thread_id, approved=True).json()["answer"]

    resume_approval(str(approval.pk))  # delivered again after it finished
    # Delivered again after a worker died between resuming the thread and recording the outcome.
    ApprovalRequest.objects.filter(pk=approval.pk).update(answered_at=None, answer="")
    resume_approval(str(approval.pk))

    assert len(model_requests()) == 2
    assert ContactMessage.objects.filter(approval=approval).count() == 1
    approval.refresh_from_db()
    assert approval.answer == answer and approval.answered_at is not None


def test_two_copies_of_one_resume_running_at_once_run_the_tool_once(
    mcp_url, token, admin_api, model_requests, celery_worker, settings, model_in_this_process
):
    from django.db import connection

    from approvals.models import ContactMessage
    from approvals.tasks import resume_approval

    approval, thread_id = paused_thread(mcp_url, token)
    # The decision's resume waits in the queue while two copies of it run here at once, as two
    # workers would run a redelivered task.
    celery_worker.stop()
    settings.APPROVAL_WAIT_SECONDS = 0.5
    try:
        assert admin_api.decide(thread_id, approved=True).status_code == 202
        start = threading.Barrier(2)

        def deliver():
            start.wait()
            try:
                resume_approval(str(approval.pk))
            finally:
                connection.close()

        copies = [threading.Thread(target=deliver) for _ in range(2)]
        for copy in copies:
            copy.start()
        for copy in copies:
            copy.join(60)
    finally:
        celery_worker.start()

    assert len(model_requests()) == 2  # the pause, and one resumed run
    assert ContactMessage.objects.filter(approval=approval).count() == 1
    approval.refresh_from_db()
    assert approval.answer.startswith("Your message was recorded")


def test_a_resume_that_loses_the_database_is_retried_not_recorded_as_the_agents_failure(
    mcp_url, token, admin_api, model_requests, celery_worker, settings, model_in_this_process, monkeypatch
):
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    from approvals import services

    approval, thread_id = paused_thread(mcp_url, token)
    # The decision's resume waits in the queue while it is delivered here, where the database
    # connection can be lost at the moment the resume reads the checkpoint.
    celery_worker.stop()
    settings.APPROVAL_WAIT_SECONDS = 0.5
    try:
        assert admin_api.decide(thread_id, approved=True).status_code == 202
        reads = PostgresSaver.get_tuple

        def lost(self, config):
            raise psycopg.OperationalError("server closed the connection unexpectedly")

        monkeypatch.setattr(PostgresSaver, "get_tuple", lost)
        with pytest.raises(psycopg.OperationalError):  # the task's autoretry takes it from here
            services.approval_resume(approval_id=approval.pk)
        monkeypatch.setattr(PostgresSaver, "get_tuple", reads)
        approval.refresh_from_db()
        assert approval.answered_at is None and not approval.error

        services.approval_resume(approval_id=approval.pk)  # the retry
    finally:
        celery_worker.start()

    approval.refresh_from_db()
    assert approval.answer.startswith("Your message was recorded")


def test_a_saved_decision_whose_resume_the_broker_refused_is_still_resumed_by_the_periodic_job(
    mcp_url, token, admin_api, settings
):
    import time_machine
    from django.utils import timezone

    from approvals.models import ContactMessage
    from approvals.services import approval_wait_for_answer
    from approvals.tasks import sweep_approvals
    from mcp_gateway.models import ToolCall

    approval, thread_id = paused_thread(mcp_url, token)
    settings.APPROVAL_WAIT_SECONDS = 0.5

    with broker_refusing_tasks():
        response = admin_api.decide(thread_id, approved=True)

    # Not an error: the decision is saved, and answered like one whose run is slow.
    assert response.status_code == 202
    assert response.json() == {"status": "approved", "thread_id": thread_id, "answer": None}
    assert admin_api.decide(thread_id, approved=True).status_code == 409
    assert sweep_approvals() == {"approvals_expired": 0, "resumes_nudged": 0}  # a queued resume is left alone
    with time_machine.travel(timezone.now() + timedelta(minutes=2)):
        assert sweep_approvals() == {"approvals_expired": 0, "resumes_nudged": 1}
    approval = approval_wait_for_answer(approval_id=approval.pk, timeout=60)
    assert approval.answer.startswith("Your message was recorded")
    assert ContactMessage.objects.filter(approval=approval).count() == 1
    assert ToolCall.objects.get(thread_id=thread_id).status == ToolCall.Status.FINISHED


def test_a_second_decision_on_the_same_thread_gets_409(mcp_url, token, admin_api, model_requests):
    _, thread_id = paused_thread(mcp_url, token)
    assert admin_api.decide(thread_id, approved=True).status_code == 200

    again = admin_api.decide(thread_id, approved=False, note="Changed my mind.")

    assert again.status_code == 409
    assert again.json()["detail"] == "This approval was already approved."
    assert len(model_requests()) == 2


def test_ten_decisions_at_once_resume_the_thread_once_and_the_rest_get_409(
    mcp_url, token, admin_api, model_requests, live_server
):
    from approvals.models import ContactMessage

    approval, thread_id = paused_thread(mcp_url, token)
    start = threading.Barrier(10)
    statuses: list[int] = []

    def decide():
        client = AdminAPI(live_server.url, ADMIN_TOKEN)
        start.wait()
        statuses.append(client.decide(thread_id, approved=True).status_code)

    threads = [threading.Thread(target=decide) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)

    assert sorted(statuses) == [200] + [409] * 9
    assert len(model_requests()) == 2  # one resume: one more model call
    assert ContactMessage.objects.filter(approval=approval).count() == 1


def test_an_approval_nobody_decides_within_seven_days_expires_fail_closed_and_the_agent_is_told(
    mcp_url, token, admin_api
):
    import time_machine
    from django.utils import timezone

    from approvals.models import ContactMessage
    from approvals.services import approval_wait_for_answer
    from approvals.tasks import sweep_approvals
    from mcp_gateway.models import ToolCall

    approval, thread_id = paused_thread(mcp_url, token)

    with time_machine.travel(timezone.now() + timedelta(days=7, minutes=1)):
        assert sweep_approvals()["approvals_expired"] == 1
        response = admin_api.decide(thread_id, approved=True)
        assert admin_api.pending().json() == []
    assert response.status_code == 409
    assert "expired" in response.json()["detail"]

    # The agent is resumed with the decline, so its thread ends honestly; nothing was sent.
    approval = approval_wait_for_answer(approval_id=approval.pk, timeout=60)
    assert (approval.status, approval.decided_via, approval.decided_by) == ("expired", "expired", None)
    assert "declined" in approval.answer
    assert not ContactMessage.objects.filter(approval=approval).exists()
    assert ToolCall.objects.get(thread_id=thread_id).status == ToolCall.Status.FINISHED


def test_without_beat_the_cron_command_expires_approvals_nobody_decided_as_beat_does(mcp_url, token):
    import io

    import time_machine
    from django.core.management import call_command
    from django.utils import timezone

    from approvals.services import approval_wait_for_answer

    approval, _ = paused_thread(mcp_url, token)

    out = io.StringIO()
    with time_machine.travel(timezone.now() + timedelta(days=7, minutes=1)):
        call_command("sweep", stdout=out)
    assert "approvals_expired: 1" in out.getvalue()
    assert "resumes_nudged: 0" in out.getvalue() and "rounds_nudged: 0" in out.getvalue()
    approval = approval_wait_for_answer(approval_id=approval.pk, timeout=60)
    assert (approval.status, approval.decided_via) == ("expired", "expired")
    assert "declined" in approval.answer


def test_past_its_deadline_an_approval_leaves_the_queue_before_the_sweep_marks_it_expired(mcp_url, token, admin_api):
    import time_machine

    approval, _ = paused_thread(mcp_url, token)

    with time_machine.travel(approval.expires_at + timedelta(seconds=1)):
        listing = admin_api.pending()

    assert listing.status_code == 200 and listing.json() == []


def test_a_decision_past_the_deadline_is_refused_before_the_sweep_marks_it_expired(
    mcp_url, token, admin_api, model_requests
):
    import time_machine

    approval, thread_id = paused_thread(mcp_url, token)

    with time_machine.travel(approval.expires_at + timedelta(seconds=1)):
        response = admin_api.decide(thread_id, approved=True)

    assert response.status_code == 409
    assert response.json()["detail"] == "This approval has expired."
    approval.refresh_from_db()
    assert approval.status == "pending" and approval.decided_at is None  # the sweep will decline it
    assert len(model_requests()) == 1


# --- access -----------------------------------------------------------------------------------


def test_the_admin_api_needs_the_admin_token(mcp_url, token, admin_api, live_server):
    _, thread_id = paused_thread(mcp_url, token)

    for api in (AdminAPI(live_server.url, None), AdminAPI(live_server.url, "not-the-admin-token")):
        listing, decision = api.pending(), api.decide(thread_id, approved=True)
        assert listing.status_code == decision.status_code == 401
        assert listing.headers["WWW-Authenticate"] == 'Bearer realm="admin"'
    assert admin_api.pending().status_code == 200


def test_a_thread_with_nothing_pending_gets_404_with_the_articles_error(mcp_url, token, admin_api):
    response = admin_api.decide("no-such-thread", approved=True)

    assert response.status_code == 404
    assert response.json() == {"error": "No pending approval for this thread."}


def test_the_404_is_keyed_on_the_checkpoint_not_on_the_queue(mcp_url, token, admin_api, model_requests):
    from hitl_project.graphs import runner

    approval, thread_id = paused_thread(mcp_url, token)
    runner.delete_thread(thread_id)  # the checkpoint no longer says the thread is paused

    response = admin_api.decide(thread_id, approved=True)

    assert response.status_code == 404
    assert response.json() == {"error": "No pending approval for this thread."}
    approval.refresh_from_db()
    assert approval.status == "pending"  # still queued, but nothing was resumed
    assert len(model_requests()) == 1


def test_the_admin_api_is_off_without_an_admin_token_configured(mcp_url, token, settings, live_server):
    _, thread_id = paused_thread(mcp_url, token)
    settings.ADMIN_TOKEN = ""

    for api in (AdminAPI(live_server.url, None), AdminAPI(live_server.url, "anything")):
        assert api.pending().status_code == 403
        assert api.decide(thread_id, approved=True).status_code == 403


def test_a_decision_without_approved_is_rejected_with_400(mcp_url, token, admin_api):
    _, thread_id = paused_thread(mcp_url, token)

    response = admin_api.decide(thread_id, note="no verdict")

    assert response.status_code == 400
    assert "approved" in response.json()


def test_the_api_takes_only_a_json_boolean_as_the_decision(mcp_url, token, admin_api, model_requests):
    approval, thread_id = paused_thread(mcp_url, token)

    for approved in ("true", "yes", "on", 1, "false", 0):
        response = admin_api.decide(thread_id, approved=approved)
        assert response.status_code == 400, approved
        assert response.json() == {"approved": ["Must be a valid boolean."]}

    approval.refresh_from_db()
    assert approval.status == "pending"
    assert len(model_requests()) == 1


def test_the_openapi_schema_describes_the_admin_api(client):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/json")

    assert response.status_code == 200
    schema = response.json()
    assert {"/api/admin/approvals", "/api/admin/approvals/{thread_id}"} <= set(schema["paths"])
    assert schema["components"]["securitySchemes"]["adminToken"] == {"type": "http", "scheme": "bearer"}
