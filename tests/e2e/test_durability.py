"""Durability: paused calls survive restarts and crashes, resume exactly once, and expire
at the documented times, proven with real OS processes, PostgreSQL and Redis."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
import time_machine
from django.db import connection, transaction
from django.utils import timezone

from mcp_gateway.calls.sweep import remove_expired_calls
from mcp_gateway.models import Round, ToolCall
from tests.clients import Raw, meta
from tests.processes import Web, Worker, service_env
from tests.rounds import eventually, until_run_ends

REGION = {"action": "accept", "content": {"response": "eu-west-1"}}
ADMIN_TOKEN = "durability-admin-token"


class Stack:
    """A web server and workers of this test's own, on a queue of its own."""

    def __init__(self, fake_model: str, logs: Path, **env: str):
        self.queue = f"hitl-durability-{uuid.uuid4().hex[:8]}"
        # A short visibility timeout, so a task whose worker was killed is redelivered in seconds.
        self.env = service_env(
            self.queue,
            fake_model,
            **{
                "CELERY_VISIBILITY_TIMEOUT": "5",
                "CELERY_RESTORE_INTERVAL": "1",
                "CELERY_RESTORE_THROTTLE": "1",
                "ADMIN_TOKEN": ADMIN_TOKEN,
                **env,
            },
        )
        self.logs = logs
        self.processes: list = []

    def web(self) -> Web:
        web = Web(self.env, self.logs / "web.log").start()
        self.processes.append(web)
        return web

    def worker(self, **options) -> Worker:
        worker = Worker(self.queue, self.env, self.logs / "worker.log").start(**options)
        self.processes.append(worker)
        return worker

    def stop(self) -> None:
        for process in self.processes:
            process.kill()


@pytest.fixture
def stack(django_db_setup, transactional_db, fake_model, tmp_path):
    stack = Stack(fake_model, tmp_path)
    yield stack
    stack.stop()


@pytest.fixture
def stack_with_short_leases(django_db_setup, transactional_db, fake_model, tmp_path):
    """Leases of 3 s, looked for every second, and the broker's redelivery out of reach: a run is
    taken over through its lease, or not at all."""
    stack = Stack(
        fake_model,
        tmp_path,
        RUN_LEASE_SECONDS="3",
        STALLED_CHECK_SECONDS="1",
        WORKER_STOP_GRACE_SECONDS="1",
        CELERY_VISIBILITY_TIMEOUT="3600",
    )
    yield stack
    stack.stop()


@pytest.fixture
def stack_with_redelivery_and_short_leases(django_db_setup, transactional_db, fake_model, tmp_path):
    """The broker's redelivery in 5 s, as `stack`'s, and leases of 5 s: a killed worker's task
    comes back to the next worker with the killed worker's lease run out, or about to (with the
    default lease the redelivered copy waits out the rest of it, half a minute, before it runs)."""
    stack = Stack(fake_model, tmp_path, RUN_LEASE_SECONDS="5")
    yield stack
    stack.stop()


def _answer(raw: Raw, tool: str, arguments: dict, first: httpx.Response, answer: dict) -> httpx.Response:
    result = first.json()["result"]
    (key,) = result["inputRequests"]
    return raw.call(tool, arguments, inputResponses={key: answer}, requestState=result["requestState"])


def _checkpoint_rows(thread_id: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM checkpoints WHERE thread_id = %s", [thread_id])
        return cursor.fetchone()[0]


def _wait_for(path: Path, lines: int = 1, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and len(path.read_text().splitlines()) >= lines):
        assert time.monotonic() < deadline, f"{path} never reached {lines} line(s)"
        time.sleep(0.05)


def test_a_paused_call_survives_sigkill_of_web_and_worker_and_is_answered_after_restart(stack, token):
    web, worker = stack.web(), stack.worker()
    first = Raw(f"{web.url}/mcp/", token).call("choose_region")
    assert first.json()["result"]["resultType"] == "input_required"

    web.kill()
    worker.kill()
    web, _ = stack.web(), stack.worker()

    final = _answer(Raw(f"{web.url}/mcp/", token), "choose_region", {}, first, REGION)
    assert final.status_code == 200
    assert final.json()["result"]["structuredContent"] == {"region": "eu-west-1"}


def test_a_staff_approval_survives_sigkill_of_web_and_worker_and_is_decided_after_restart(stack, token):
    from approvals.models import ApprovalRequest, ContactMessage

    web, worker = stack.web(), stack.worker()
    paused = Raw(f"{web.url}/mcp/", token).call("digital_twin", {"message": "Please contact the owner: hire me?"})
    assert paused.json()["result"]["structuredContent"]["status"] == "pending"
    thread_id = ApprovalRequest.objects.get().thread_id

    web.kill()
    worker.kill()
    web, _ = stack.web(), stack.worker()

    admin = httpx.Client(headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=120)
    decided = admin.post(f"{web.url}/api/admin/approvals/{thread_id}", json={"approved": True, "note": "ok"})
    assert decided.status_code == 200, decided.text
    assert decided.json()["status"] == "approved"
    assert "recorded" in decided.json()["answer"]
    assert ContactMessage.objects.count() == 1


def test_a_worker_killed_mid_resume_leaves_the_call_resumable_and_it_completes_once(
    stack_with_redelivery_and_short_leases, token, tmp_path
):
    stack = stack_with_redelivery_and_short_leases
    web, worker = stack.web(), stack.worker()
    raw = Raw(f"{web.url}/mcp/", token)
    arguments = {"signal_dir": str(tmp_path)}
    first = raw.call("held_effect", arguments)
    answered: list[httpx.Response] = []
    go = {"action": "accept", "content": {"response": "yes"}}
    request = threading.Thread(target=lambda: answered.append(_answer(raw, "held_effect", arguments, first, go)))
    request.start()

    _wait_for(tmp_path / "started")
    worker.kill()  # in the middle of the resumed run, before its side effect
    stack.worker()
    (tmp_path / "release").touch()
    request.join(120)

    # The broker hands the killed worker's task to the new worker once its visibility timeout is
    # over (5 s here), or, if kombu's periodic restore comes later than the request's 60 s wait,
    # the request answers "still running", enqueues the stalled round again, and the client comes
    # back with its requestState, as a client does.
    done = until_run_ends(raw, "held_effect", arguments, answered[0].json()["result"])
    assert done["structuredContent"]["done"] is True, done
    assert (tmp_path / "effects").read_text().splitlines() == ["effect"]
    call = ToolCall.objects.get()
    assert list(call.rounds.values_list("number", "state")) == [(0, "answered"), (1, "finished")]


def test_a_worker_killed_mid_run_has_every_call_in_flight_completed_exactly_once_by_another_worker(
    stack_with_short_leases, token, tmp_path
):
    stack = stack_with_short_leases
    web, worker = stack.web(), stack.worker(beat_schedule=tmp_path / "beat-1")
    arguments = {tag: {"signal_dir": str(tmp_path), "tag": tag, "seconds": 1} for tag in [f"c{n}" for n in range(4)]}
    with ThreadPoolExecutor(len(arguments)) as pool:
        calls = {
            tag: pool.submit(lambda a: Raw(f"{web.url}/mcp/", token).call("slow_effect", a), a)
            for tag, a in arguments.items()
        }
        _wait_for(tmp_path / "started", lines=2)  # both of the worker's threads are mid-run
        worker.kill()
        stack.worker(beat_schedule=tmp_path / "beat-2")
        results = {tag: future.result(timeout=120) for tag, future in calls.items()}

    for tag, response in results.items():
        done = until_run_ends(Raw(f"{web.url}/mcp/", token), "slow_effect", arguments[tag], response.json()["result"])
        assert done["structuredContent"]["done"] is True, (tag, done)
    assert sorted((tmp_path / "effects").read_text().splitlines()) == sorted(arguments)


def test_a_run_several_leases_long_on_a_live_worker_is_never_taken_over_and_runs_once(
    stack_with_short_leases, token, tmp_path
):
    """The worker's heartbeat is a thread of its own: a run that sleeps through three leases (a long
    model call) keeps its lease while the stalled-run check looks every second and a thread of the
    worker is free to take it over."""
    stack = stack_with_short_leases
    web, _ = stack.web(), stack.worker(beat_schedule=tmp_path / "beat")
    arguments = {"signal_dir": str(tmp_path), "tag": "long", "seconds": 10}

    response = Raw(f"{web.url}/mcp/", token).call("slow_effect", arguments)

    done = until_run_ends(Raw(f"{web.url}/mcp/", token), "slow_effect", arguments, response.json()["result"])
    assert done["structuredContent"]["done"] is True, done
    # A takeover would have started the node again on the free thread.
    assert (tmp_path / "started").read_text().splitlines() == ["long"]
    assert (tmp_path / "effects").read_text().splitlines() == ["long"]


def test_a_worker_stopped_past_its_lease_and_continued_after_a_takeover_records_and_writes_nothing_of_the_round(
    stack_with_short_leases, token, tmp_path
):
    """SIGSTOP a worker host mid-run for longer than its lease, let another worker take the round
    over and complete it, then SIGCONT the stopped one: its step ends at once (its sleep ran on
    while it was stopped), and the checkpoint it would write, which would lead it on to the
    effect, is refused."""
    stack = stack_with_short_leases
    web = stack.web()
    stopped = Worker(stack.queue, stack.env, tmp_path / "stopped-worker.log").start()
    stack.processes.append(stopped)
    arguments = {"signal_dir": str(tmp_path), "tag": "once", "seconds": 2}
    raw = Raw(f"{web.url}/mcp/", token)
    calling = ThreadPoolExecutor(1)
    response = calling.submit(raw.call, "slow_step_then_effect", arguments)
    _wait_for(tmp_path / "started")
    os.killpg(stopped.proc.pid, signal.SIGSTOP)
    try:
        stack.worker(beat_schedule=tmp_path / "beat")  # takes the round over once the lease ran out
        first = response.result(timeout=120).json()["result"]
        done = until_run_ends(raw, "slow_step_then_effect", arguments, first)
        assert done["structuredContent"]["done"] is True, done
    finally:
        os.killpg(stopped.proc.pid, signal.SIGCONT)
        calling.shutdown()

    log = tmp_path / "stopped-worker.log"
    deadline = time.monotonic() + 30
    while "lost its lease" not in log.read_text():
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.1)
    stopped.stop()  # whatever it would still do, it has done
    assert (tmp_path / "started").read_text().splitlines() == ["once", "once"]  # taken over
    assert (tmp_path / "effects").read_text().splitlines() == ["once"]
    call = ToolCall.objects.get()
    assert call.status == ToolCall.Status.FINISHED
    assert list(call.rounds.values_list("number", "state")) == [(0, "finished")]


def test_a_worker_stopped_with_sigterm_hands_back_a_run_still_going_after_its_grace_period(
    stack_with_short_leases, token, tmp_path
):
    stack = stack_with_short_leases
    web, worker = stack.web(), stack.worker()
    raw = Raw(f"{web.url}/mcp/", token)
    arguments = {"signal_dir": str(tmp_path)}
    first = raw.call("held_effect", arguments)
    go = {"action": "accept", "content": {"response": "yes"}}
    answered: list[httpx.Response] = []
    request = threading.Thread(target=lambda: answered.append(_answer(raw, "held_effect", arguments, first, go)))
    request.start()
    _wait_for(tmp_path / "started")

    stopped_at = time.monotonic()
    worker.stop()  # SIGTERM, as a deploy or a scale-down sends it
    assert time.monotonic() - stopped_at < 10  # a grace period of 1 s, not the run's end
    resumed = Round.objects.get(number=1)
    assert resumed.state == "running" and resumed.leased_until <= timezone.now()  # handed back

    stack.worker()  # takes the handed-back round at once: no lease to wait out, no sweep
    (tmp_path / "release").touch()
    request.join(120)
    done = until_run_ends(raw, "held_effect", arguments, answered[0].json()["result"])
    assert done["structuredContent"]["done"] is True, done
    assert (tmp_path / "effects").read_text().splitlines() == ["effect"]


def _staff_approve_in_the_background(web: Web, token: str, tmp_path: Path) -> tuple[str, threading.Thread]:
    """A call handed to staff and their approval, whose resumed run holds until the test releases
    it (the API waits for the answer meanwhile, on a thread); the approval's id."""
    from approvals.models import ApprovalRequest

    paused = Raw(f"{web.url}/mcp/", token).call("staff_held_effect", {"signal_dir": str(tmp_path)})
    approval_id = paused.json()["result"]["structuredContent"]["approval_id"]
    thread_id = ApprovalRequest.objects.get(pk=approval_id).thread_id
    admin = httpx.Client(headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=120)
    decide = threading.Thread(
        target=lambda: admin.post(f"{web.url}/api/admin/approvals/{thread_id}", json={"approved": True})
    )
    decide.start()
    _wait_for(tmp_path / "started")  # the resumed run is in the approved effect
    return approval_id, decide


def _answered_within(approval_id: str, seconds: float):
    from approvals.models import ApprovalRequest

    deadline = time.monotonic() + seconds
    while (approval := ApprovalRequest.objects.get(pk=approval_id)).answered_at is None:
        assert time.monotonic() < deadline, "the resume was never carried on"
        time.sleep(0.1)
    return approval


def test_a_worker_killed_mid_staff_resume_has_it_taken_over_through_its_lease_and_done_once(
    stack_with_short_leases, token, tmp_path
):
    stack = stack_with_short_leases
    web, worker = stack.web(), stack.worker(beat_schedule=tmp_path / "beat-1")
    approval_id, decide = _staff_approve_in_the_background(web, token, tmp_path)

    worker.kill()  # in the middle of the resumed run, before its side effect
    stack.worker(beat_schedule=tmp_path / "beat-2")
    (tmp_path / "release").touch()

    # Through the lease (3 s) and the stalled-resume check (every second): the broker's redelivery
    # is an hour away.
    approval = _answered_within(approval_id, 60)
    decide.join(120)
    assert not approval.error, approval.error
    assert (tmp_path / "started").read_text().splitlines() == ["started", "started"]  # carried on
    assert (tmp_path / "effects").read_text().splitlines() == ["effect"]
    assert ToolCall.objects.get().status == ToolCall.Status.FINISHED


def test_a_worker_stopped_with_sigterm_hands_back_a_staff_resume_still_going_after_its_grace_period(
    stack_with_short_leases, token, tmp_path
):
    from approvals.models import ApprovalRequest

    stack = stack_with_short_leases
    web, worker = stack.web(), stack.worker()  # no beat: the hand-back alone carries it on
    approval_id, decide = _staff_approve_in_the_background(web, token, tmp_path)

    stopped_at = time.monotonic()
    worker.stop()  # SIGTERM
    assert time.monotonic() - stopped_at < 10  # a grace period of 1 s, not the run's end
    handed_back = ApprovalRequest.objects.get(pk=approval_id)
    assert handed_back.answered_at is None and handed_back.resume_leased_until is None

    stack.worker()
    (tmp_path / "release").touch()
    approval = _answered_within(approval_id, 60)
    decide.join(120)
    assert not approval.error, approval.error
    assert (tmp_path / "effects").read_text().splitlines() == ["effect"]


def test_a_web_process_killed_while_waiting_loses_nothing_and_the_retry_gets_the_outcome(stack, token, tmp_path):
    web, _ = stack.web(), stack.worker()
    arguments = {"signal_dir": str(tmp_path)}
    first = Raw(f"{web.url}/mcp/", token).call("held_effect", arguments)
    go = {"action": "accept", "content": {"response": "yes"}}
    waiting = threading.Thread(
        target=lambda: pytest.raises(
            httpx.HTTPError, _answer, Raw(f"{web.url}/mcp/", token), "held_effect", arguments, first, go
        )
    )
    waiting.start()
    _wait_for(tmp_path / "started")
    web.kill()  # the request waiting for the run dies with it
    waiting.join(30)
    (tmp_path / "release").touch()

    retry = _answer(Raw(f"{stack.web().url}/mcp/", token), "held_effect", arguments, first, go)
    assert retry.json()["result"]["structuredContent"]["done"] is True
    assert (tmp_path / "effects").read_text().splitlines() == ["effect"]


def test_a_first_call_cut_by_the_death_of_its_web_process_and_sent_again_with_its_idempotency_key_runs_once(
    stack, token, tmp_path
):
    from mcp_gateway.calls.tool_calls import IDEMPOTENCY_KEY

    web, _ = stack.web(), stack.worker()
    arguments = {"signal_dir": str(tmp_path)}
    keyed = {**meta(), IDEMPOTENCY_KEY: str(uuid.uuid4())}
    cut = threading.Thread(
        target=lambda: pytest.raises(
            httpx.HTTPError, Raw(f"{web.url}/mcp/", token).call, "effect_then_ask", arguments, _meta=keyed
        )
    )
    cut.start()
    _wait_for(tmp_path / "started")
    web.kill()  # the first call's answer is lost with it
    cut.join(30)
    (tmp_path / "release").touch()

    again = Raw(f"{stack.web().url}/mcp/", token).call("effect_then_ask", arguments, _meta=keyed)

    assert again.json()["result"]["inputRequests"], again.text
    assert (tmp_path / "effects").read_text().splitlines() == ["effect"]
    assert ToolCall.objects.count() == 1


def test_a_first_run_redelivered_after_its_checkpoint_was_saved_does_not_run_finished_nodes_again(
    stack_with_redelivery_and_short_leases, token, tmp_path
):
    stack = stack_with_redelivery_and_short_leases
    web, worker = stack.web(), stack.worker()
    arguments = {"signal_dir": str(tmp_path)}
    asked: list[httpx.Response] = []
    call = threading.Thread(
        target=lambda: asked.append(Raw(f"{web.url}/mcp/", token).call("effect_then_ask", arguments))
    )
    call.start()
    _wait_for(tmp_path / "started")
    first_round = Round.objects.get(number=0)
    with transaction.atomic():
        # The worker's record of where the run stopped waits on this row lock: the worker is killed
        # after LangGraph saved the checkpoint (the effect done, the question pending) and before
        # the Round row says so.
        Round.objects.select_for_update().get(pk=first_round.pk)
        (tmp_path / "release").touch()
        assert _eventually_waiting_on_a_lock()
        worker.kill()
    stack.worker()
    call.join(120)

    # The run taken over (redelivered, or enqueued again by a request that found it stalled) asks
    # its question, without doing the effect again; "still running" alone would prove neither.
    raw = Raw(f"{web.url}/mcp/", token)
    question = until_run_ends(raw, "effect_then_ask", arguments, asked[0].json()["result"])
    assert question["inputRequests"], question
    assert (tmp_path / "effects").read_text().splitlines() == ["effect"]


def _eventually_waiting_on_a_lock(timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            # Called inside the test's transaction, where PostgreSQL would answer every poll from the
            # activity snapshot its first one took.
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND query ILIKE '%%mcp_gateway_round%%'"
            )
            if cursor.fetchone()[0]:
                return True
        time.sleep(0.05)
    return False


def test_a_copy_of_a_round_another_thread_holds_run_in_process_ends_quietly_instead_of_failing(
    mcp_url, token, tmp_path
):
    """The embedded default runs a round's task in-process (Celery's `apply`, eager). A nudge's copy
    of a round that a thread of the same process holds must not try to retry: eagerly, the retry is
    raised back as an error, logged with its traceback for every copy."""
    from mcp_gateway.tasks import run_round

    raw, arguments = Raw(mcp_url, token), {"signal_dir": str(tmp_path)}
    first = raw.call("held_effect", arguments)
    go = {"action": "accept", "content": {"response": "yes"}}
    request = threading.Thread(target=lambda: _answer(raw, "held_effect", arguments, first, go))
    request.start()
    _wait_for(tmp_path / "started")  # the worker holds round 1's lease while its run is held
    held = Round.objects.get(number=1)

    try:
        copy = run_round.apply(args=(str(held.pk),), throw=True)
        assert copy.successful()
    finally:
        (tmp_path / "release").touch()
        request.join(120)
    assert (tmp_path / "effects").read_text().splitlines() == ["effect"]


def test_a_postgresql_restart_while_a_call_is_paused_does_not_fail_its_next_round(stack, token):
    web, _ = stack.web(), stack.worker()
    raw = Raw(f"{web.url}/mcp/", token)
    first = raw.call("choose_region")
    _end_every_other_session()

    answered = _answer(raw, "choose_region", {}, first, REGION)

    assert answered.status_code == 200, answered.text
    assert answered.json()["result"]["structuredContent"] == {"region": "eu-west-1"}


def test_a_postgresql_restart_does_not_stall_a_busy_process_on_its_dead_pooled_connections(mcp_url, token):
    from django.conf import settings

    from graph_runtime.checkpointer import _postgres_pool, postgres_dsn

    Raw(mcp_url, token).call("choose_region")
    call = ToolCall.objects.get()
    # A process busy enough to have grown its checkpoint pool to the full, as a web or beat process is.
    pool = _postgres_pool(postgres_dsn())
    held = [pool.getconn() for _ in range(settings.CHECKPOINT_POOL_MAX_SIZE)]
    for conn in held:
        pool.putconn(conn)
    _end_every_other_session()

    # Testing the dead connections one at a time, with psycopg_pool's backoff between them, ran
    # past the pool's 30 s timeout: the job failed with PoolTimeout.
    ToolCall.objects.filter(pk=call.pk).update(expires_at=timezone.now())
    with time_machine.travel(timezone.now() + timedelta(minutes=11)):
        assert remove_expired_calls() == {"calls_removed": 1}
    assert _checkpoint_rows(call.thread_id) == 0


def _end_every_other_session() -> None:
    """What a PostgreSQL restart does to every session of the test database but this one. It is
    over once they are gone and have told their clients so: pg_terminate_backend only signals."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        ended = [pid for (pid,) in cursor.fetchall()]
        cursor.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", [ended])

        def left() -> int:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [ended])
            return cursor.fetchone()[0]

        assert eventually(lambda: left() == 0)


def test_cleanup_leaves_a_call_whose_round_is_running_until_the_run_has_ended(mcp_url, token, tmp_path):
    raw = Raw(mcp_url, token)
    arguments = {"signal_dir": str(tmp_path)}
    first = raw.call("held_effect", arguments)
    call = ToolCall.objects.get()
    go = {"action": "accept", "content": {"response": "yes"}}
    answered: list[httpx.Response] = []
    request = threading.Thread(target=lambda: answered.append(_answer(raw, "held_effect", arguments, first, go)))
    request.start()
    _wait_for(tmp_path / "started")

    # Answered a moment before the paused call's 24 hours ran out; cleanup runs while the resume does.
    ToolCall.objects.filter(pk=call.pk).update(expires_at=timezone.now())
    assert remove_expired_calls() == {"calls_removed": 0}
    (tmp_path / "release").touch()
    request.join(120)

    assert answered[0].json()["result"]["structuredContent"]["done"] is True
    with time_machine.travel(timezone.now() + timedelta(minutes=11)):
        assert remove_expired_calls() == {"calls_removed": 1}
    assert _checkpoint_rows(call.thread_id) == 0


def test_a_call_discarded_while_its_thread_cannot_be_deleted_is_left_to_the_cleanup_job(mcp_url, token, monkeypatch):
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    raw = Raw(mcp_url, token)

    def lost(self, thread_id):  # the database connection drops at that moment
        raise psycopg.OperationalError("the connection is lost")

    monkeypatch.setattr(PostgresSaver, "delete_thread", lost)  # in the web (this process) only
    first = raw.call("plan_deployment", {}, inputResponses={"bogus": {"action": "accept"}}).json()["result"]
    key = next(iter(first["inputRequests"]))
    # An invalid answer in a first call discards the call (docs/rules.md, "Invalid answers").
    refused = raw.call("plan_deployment", {}, inputResponses={key: {"action": "accept", "content": {"replicas": 20}}})
    assert refused.status_code == 400
    monkeypatch.undo()
    threads = set(ToolCall.objects.values_list("thread_id", flat=True))
    assert len(threads) == 2  # the first call, and the discarded one kept for the cleanup job

    with time_machine.travel(timezone.now() + timedelta(hours=25)):
        assert remove_expired_calls() == {"calls_removed": 2}
    assert sum(_checkpoint_rows(t) for t in threads) == 0


def test_a_first_call_whose_run_the_broker_refused_is_removed_and_never_runs(mcp_url, token, tmp_path, monkeypatch):
    from kombu import Producer
    from kombu.exceptions import OperationalError

    from mcp_gateway.calls.round_queue import nudge_stalled_rounds

    def refused(self, *args, **kwargs):  # Redis refuses connections at that moment
        raise OperationalError("Error 111 connecting to redis: Connection refused.")

    monkeypatch.setattr(Producer, "publish", refused)  # in the web (this process) only
    failed = Raw(mcp_url, token).call("effect_then_ask", {"signal_dir": str(tmp_path)})
    monkeypatch.undo()

    assert failed.status_code == 500 and failed.json()["error"]["code"] == -32603
    assert not ToolCall.objects.exists()  # the client cannot come back to it: it must not run later
    with time_machine.travel(timezone.now() + timedelta(minutes=2)):
        assert nudge_stalled_rounds() == {"rounds_nudged": 0}
    assert not (tmp_path / "started").exists()


def test_fifty_parallel_identical_answers_resume_the_round_once_and_get_the_same_result(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = raw.call("choose_region")
    with ThreadPoolExecutor(50) as pool:
        responses = list(
            pool.map(lambda _: _answer(Raw(mcp_url, token), "choose_region", {}, first, REGION), range(50))
        )
    assert {r.status_code for r in responses} == {200}
    assert len({r.content.replace(b'"id":1', b"") for r in responses}) == 1
    assert responses[0].json()["result"]["structuredContent"] == {"region": "eu-west-1"}
    assert Round.objects.count() == 2  # round 0 asked, exactly one resume ran


def test_a_paused_call_expires_24_hours_after_its_latest_round_with_its_checkpoints(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = raw.call("choose_region")
    call = ToolCall.objects.get()
    assert _checkpoint_rows(call.thread_id) > 0

    with time_machine.travel(timezone.now() + timedelta(hours=23, minutes=59)):
        assert remove_expired_calls() == {"calls_removed": 0}
    with time_machine.travel(timezone.now() + timedelta(hours=24, seconds=1)):
        late = _answer(raw, "choose_region", {}, first, REGION)
        assert late.status_code == 400
        assert late.json()["error"]["message"] == "Invalid or expired requestState"
        assert remove_expired_calls() == {"calls_removed": 1}
    assert not ToolCall.objects.exists()
    assert _checkpoint_rows(call.thread_id) == 0


def test_a_call_finished_with_a_request_state_is_kept_10_minutes_then_removed(mcp_url, token):
    raw = Raw(mcp_url, token)
    first = raw.call("choose_region")
    assert _answer(raw, "choose_region", {}, first, REGION).status_code == 200
    thread_id = ToolCall.objects.get().thread_id

    with time_machine.travel(timezone.now() + timedelta(minutes=9)):
        assert remove_expired_calls() == {"calls_removed": 0}
        assert _answer(raw, "choose_region", {}, first, REGION).json()["result"]["structuredContent"] == {
            "region": "eu-west-1"
        }
    with time_machine.travel(timezone.now() + timedelta(minutes=10, seconds=1)):
        assert remove_expired_calls() == {"calls_removed": 1}
    assert _checkpoint_rows(thread_id) == 0


def test_concurrent_cleanup_runs_remove_each_expired_call_once(mcp_url, token):
    raw = Raw(mcp_url, token)
    for _ in range(40):
        assert raw.call("choose_region").json()["result"]["resultType"] == "input_required"
    threads = list(ToolCall.objects.values_list("thread_id", flat=True))

    with time_machine.travel(timezone.now() + timedelta(hours=25)):
        with ThreadPoolExecutor(4) as pool:
            counts = list(pool.map(lambda _: remove_expired_calls(batch=5)["calls_removed"], range(4)))
    assert sum(counts) == 40
    assert not ToolCall.objects.exists()
    assert sum(_checkpoint_rows(t) for t in threads) == 0


def test_waiting_calls_look_at_their_rows_again_when_the_round_notifications_reconnect(settings):
    """A notification published while the web's subscription is down is lost: once the subscription
    is back, every call still waiting is woken to read its round's row (the run may have ended)."""
    import asyncio

    import redis

    from mcp_gateway.calls import waiter

    async def scenario() -> None:
        listener = await waiter._listener()
        woken = listener.register(str(uuid.uuid4()))
        server = redis.Redis.from_url(settings.REDIS_URL)
        ours = [c["id"] for c in server.client_list(_type="pubsub") if c.get("name") == waiter.CLIENT_NAME]
        assert ours, "the listener's subscription is not on Redis"
        for client_id in ours:
            server.client_kill_filter(_id=client_id)
        try:
            assert await asyncio.wait_for(woken, 10) is True
            assert listener.subscribed.is_set()
        finally:
            listener.task.cancel()

    asyncio.run(scenario())


def test_a_run_that_ended_before_its_call_started_waiting_is_answered_from_the_record_its_notification_carried(
    settings,
):
    """Under load a run often ends before its request is back on the event loop to wait for it: the
    request answers from the record the run's notification carried, as one that waited in time
    does, without reading the round's row."""
    import asyncio

    from mcp_gateway.calls import waiter

    recorded = {
        "state": "finished",
        "outcome": {"kind": "result", "result": {"content": [], "isError": False}},
        "finished_at": timezone.now().isoformat(),
        "with_request_state": False,
        "expires_at": timezone.now().isoformat(),
    }

    async def scenario() -> None:
        listener = await waiter._listener()
        since = time.monotonic()
        round_id = uuid.uuid4()
        try:
            waiter.notify(round_id, recorded)
            deadline = time.monotonic() + 10
            while str(round_id) not in listener.recent and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert await waiter.wait_for(round_id, 5, since=since) == recorded
        finally:
            listener.task.cancel()

    asyncio.run(scenario())
