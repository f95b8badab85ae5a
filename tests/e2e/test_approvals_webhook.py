"""A queued approval reaches staff where they are: the worker that pauses the call posts a signed,
Slack-compatible webhook with a link to the decision page, after the pause commits."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from approvals import notifications
from tests.e2e.approvals import paused_thread

SECRET = "webhook-secret-of-this-test"


class _Receiver(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802  (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append((self.headers, body))  # type: ignore[attr-defined]
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    server.received = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


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
