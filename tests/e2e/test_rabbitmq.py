"""RabbitMQ as the broker (CELERY_BROKER_URL=amqp://...): the web and the worker hand rounds over a
durable quorum queue with publisher confirms, so a task queued while the broker restarts is not
lost, and a killed worker's task comes back when its connection closes. Redis still carries the
round notifications and the rate limits, as docs/operating.md ("Brokers") says."""

from __future__ import annotations

import re
import subprocess
import time
import uuid

import pytest

from bench.faults import RABBITMQ, delete_rabbitmq_queue, rabbitmq_up, restart_rabbitmq
from tests.clients import Raw
from tests.e2e.test_durability import Stack
from tests.rounds import until_run_ends


@pytest.fixture
def rabbitmq_stack(django_db_setup, transactional_db, fake_model, tmp_path):
    if not rabbitmq_up():
        pytest.fail(f"RabbitMQ is not running at {RABBITMQ} (make test starts it: see the Makefile's services)")
    stack = Stack(
        fake_model,
        tmp_path,
        CELERY_BROKER_URL=RABBITMQ,
        MCP_RUN_WAIT_SECONDS="1",
        RUN_LEASE_SECONDS="3",
        STALLED_CHECK_SECONDS="1",
    )
    stack.queue = stack.env["CELERY_QUEUE"] = f"hitl-rabbitmq-{uuid.uuid4().hex[:8]}"
    yield stack
    stack.stop()
    delete_rabbitmq_queue(stack.queue)


def _queue_arguments(name: str) -> str:
    listed = subprocess.run(
        ["rabbitmqctl", "list_queues", "-q", "name", "type", "durable"], capture_output=True, text=True, timeout=30
    )
    return next((line for line in listed.stdout.splitlines() if line.split("\t")[0] == name), "")


def test_on_rabbitmq_a_round_queued_while_the_broker_restarts_runs_once_when_a_worker_comes(
    rabbitmq_stack, token, tmp_path
):
    stack = rabbitmq_stack
    web = stack.web()
    raw = Raw(f"{web.url}/mcp/", token)
    arguments = {"signal_dir": str(tmp_path), "tag": "once", "seconds": 0.2}

    # No worker yet: the round waits in the queue, and its call answers "still running".
    still_running = raw.call("slow_effect", arguments).json()["result"]
    assert "requestState" in still_running, still_running
    assert _queue_arguments(stack.queue).split("\t")[1:] == ["quorum", "true"]
    restart_rabbitmq()
    stack.worker()

    done = until_run_ends(raw, "slow_effect", arguments, still_running)

    assert done["structuredContent"]["done"] is True, done
    assert (tmp_path / "effects").read_text().splitlines() == ["once"]
    # The broker kept it: no stalled-round check had to enqueue it again.
    assert "looks stalled" not in (stack.logs / "web.log").read_text(errors="replace")


def test_on_rabbitmq_a_worker_killed_mid_run_has_its_call_completed_once_by_another(rabbitmq_stack, token, tmp_path):
    stack = rabbitmq_stack
    web, worker = stack.web(), stack.worker()
    raw = Raw(f"{web.url}/mcp/", token)
    # Long enough that the kill below comes mid-run on a busy machine too.
    arguments = {"signal_dir": str(tmp_path), "tag": "killed", "seconds": 3}

    first = raw.call("slow_effect", arguments).json()["result"]
    deadline = time.monotonic() + 60
    while not (tmp_path / "started").exists():
        assert time.monotonic() < deadline, "the run did not start"
        time.sleep(0.05)
    worker.kill()  # its unacknowledged task goes back to the queue as its connection closes
    assert not (tmp_path / "effects").exists(), "the run ended before the kill"
    stack.worker()

    done = until_run_ends(raw, "slow_effect", arguments, first)

    assert done["structuredContent"]["done"] is True, done
    assert (tmp_path / "effects").read_text().splitlines() == ["killed"]
    # The broker gave the killed worker's task back: the next worker received that same task (a
    # nudge of the stalled round would be a task of its own). Whether a nudge also came, as the
    # lease ran out before the returned task's retry, is timing: the lease lets one of them run.
    received = re.findall(r"run_round\[([0-9a-f-]+)\] received", (stack.logs / "worker.log").read_text())
    assert received.count(received[0]) >= 2, received
