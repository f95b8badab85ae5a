"""A queued approval reaches staff where they are: the worker that pauses the call posts a signed,
Slack-compatible webhook with a link to the decision page, after the pause commits."""

from __future__ import annotations

import json
import time

from approvals import notifications
from tests.e2e.approvals import paused_thread

SECRET = "webhook-secret-of-this-test"


def test_a_queued_approval_is_posted_to_the_staff_webhook_signed_and_linking_its_decision_page(
    mcp_url, token, receiver, worker_with_env
):
    worker_with_env(
        APPROVAL_WEBHOOK_URL=f"http://127.0.0.1:{receiver.server_port}/staff",
        APPROVAL_WEBHOOK_SECRET=SECRET,
        SITE_URL="https://hitl.example.com",
    )

    approval, _ = paused_thread(mcp_url, token)

    deadline = time.monotonic() + 60
    while not receiver.received and time.monotonic() < deadline:
        time.sleep(0.1)
    ((headers, body),) = receiver.received
    timestamp = headers.get(notifications.TIMESTAMP_HEADER)
    assert headers.get(notifications.SIGNATURE_HEADER) == notifications.signature(SECRET, timestamp, body)
    sent = json.loads(body)
    link = f"https://hitl.example.com/admin/approvals/approvalrequest/{approval.pk}/change/"
    assert (sent["event"], sent["approval_id"], sent["url"]) == ("approval_requested", str(approval.pk), link)
    assert sent["text"].startswith("Approval needed: draft_contact_message") and link in sent["text"]
