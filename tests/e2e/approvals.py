"""Staff approvals, helpers for the end-to-end tests: pause a digital_twin call for staff, decide
through the REST admin API, read the paused thread, and a broker that refuses tasks."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import httpx

from tests.clients import Raw
from tests.staff_approvals import DRAFT, HIRE_ME, SECOND_DRAFT, tool_messages  # noqa: F401  (for the e2e tests)

ADMIN_TOKEN = "staff-only-admin-token"
# The Slack app's signing secret of the served instances: the tests sign Slack's requests with it.
SLACK_SIGNING_SECRET = "test-slack-signing-secret"


def record_model_requests(fake_model_url: str):
    """Clear the fake model's record; the function returned lists the requests it gets from now on."""
    httpx.delete(f"{fake_model_url}/_requests")
    return lambda: httpx.get(f"{fake_model_url}/_requests").json()


class AdminAPI:
    def __init__(self, base_url: str, token: str | None):
        self.base_url = f"{base_url}/api/admin/approvals"
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(headers=headers, timeout=120)

    def pending(self) -> httpx.Response:
        return self.http.get(self.base_url)

    def decide(self, thread_id: str, **body: Any) -> httpx.Response:
        return self.http.post(f"{self.base_url}/{thread_id}", json=body)


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
    from graph_runtime import runner
    from graph_runtime.registry import get_graph

    return dict(runner.state(get_graph("digital_twin"), thread_id).values)


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
