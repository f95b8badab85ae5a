"""Staff approvals, pausing and listing: a high-risk tool call pauses the run, the MCP call ends
with the approval notice, staff are told by e-mail and list what waits for them."""

from __future__ import annotations

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult

from approvals.handover import APPROVAL_NOTICE
from tests.clients import run, sdk_client
from tests.e2e.approvals import DRAFT, HIRE_ME, pause, paused_thread, wait_until
from tests.processes import free_port


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


def test_pending_approvals_are_listed_with_the_tool_call_input_and_the_visitor_message(mcp_url, token, admin_api):
    approval_id = pause(mcp_url, token)["structuredContent"]["approval_id"]

    response = admin_api.pending()

    assert response.status_code == 200
    [listed] = response.json()
    assert listed["id"] == approval_id
    assert listed["tool_calls"] == [{"name": "draft_contact_message", "input": DRAFT}]
    assert listed["visitor_message"] == HIRE_ME
    assert listed["thread_id"]
