"""`make bench-faults`: several hosts under steady load, through one fault at a time, on each broker.

Simulated hosts on this machine, each a set of process groups with its own data directory
(HITL_VAR_DIR: the beat schedule file), metrics directory (METRICS_DIR) and host name (the
worker's Celery node name, `celery@<host>`, which its log lines carry): two web hosts (uvicorn with
2 workers each) behind a round-robin in the bench's clients, two worker hosts (one Celery worker
each, the settings' pool and concurrency), beat on the first worker host. They share one
PostgreSQL, one Redis and one broker, all of the bench's own: a PostgreSQL cluster made with initdb
in a temporary directory (fsync on), a redis-server without persistence on a free port, and, for
`--broker rabbitmq`, a queue of its own on the machine's RabbitMQ. The machine's PostgreSQL and
Redis are never restarted.

Clients (--clients) make calls of `asked_slow_effect` back to back: a round of questions, the
answer, then a model call of --seconds and one side effect recorded under the call's tag. Each
request goes to the next web host; one that fails (the host is down, or answered an error) is sent
again to the other, as a load balancer would, with the same idempotency key, answers or
requestState, so a retry never starts a second call. Through that load, one fault at a time, each
in its own phase:

- web-host-kill: SIGKILL every process of a web host, started again --restart-after seconds later;
- worker-host-kill: SIGKILL every process of the worker host that runs beat (the worker and beat),
  started again --restart-after seconds later;
- postgres-restart: the bench's PostgreSQL restarted (fast shutdown);
- broker-restart: the bench's redis-server restarted (what it held is lost), or RabbitMQ's app
  (`rabbitmqctl stop_app && rabbitmqctl start_app`; its node and quorum queues stay);
- worker-host-stop: SIGSTOP the other worker host for longer than a lease, then SIGCONT;
- two-beats: beat started on the second worker host too, both running for a while.

Reported per fault: the bound derived from the settings (as docs/guarantees.md does), the time
from the fault to the last call that was in flight during it completing, calls completed of those
started, side effects recorded twice or never, and the errors the clients saw (and the most retries
one request needed). The side effect asks for the lease right before it is made
(docs/writing-agents.md), and its line says when: an effect already under way when its worker
host was stopped (the lease found held before the SIGSTOP, the effect made after the SIGCONT)
finishes when the host goes on, which no fence can undo (docs/guarantees.md); so is an effect
made so shortly before a worker host was killed or stopped or PostgreSQL restarted (or during a
kill or a restart) that its step's checkpoint could not be written, which the retry makes again.
Such a second effect is reported on its own, and any other counts as twice. Written to
bench/faults.json and bench/faults.md, and printed.

    .venv/bin/python bench/faults.py --broker both      # what `make bench-faults` runs
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench import stack  # noqa: E402
from bench.client import META, MODERN  # noqa: E402

TOOL = "asked_slow_effect"
GO = {"action": "accept", "content": {"response": "yes"}}
IDEMPOTENCY_KEY = "hitl-mcp/idempotencyKey"  # mcp_gateway/calls/tool_calls.py
RABBITMQ = "amqp://guest:guest@127.0.0.1:5672//"
# The settings that govern recovery, at their defaults (hitl_project/settings.py) unless the
# environment sets them (the tests shorten the lease).
DEFAULTS = {
    "RUN_LEASE_SECONDS": 30,
    "STALLED_CHECK_SECONDS": 10,
    "RUN_STALLED_AFTER_SECONDS": 60,
    "MCP_RUN_WAIT_SECONDS": 60,
    "CELERY_VISIBILITY_TIMEOUT": 3600,
    "WORKER_CONCURRENCY": 8,
}
# The clients' pause before sending a failed request again, and before coming back for a run
# that is still going.
RETRY_PAUSE = 0.2
POLL_PAUSE = 0.25
FAULTS = ("web-host-kill", "worker-host-kill", "postgres-restart", "broker-restart", "worker-host-stop", "two-beats")


# --- the services the hosts share, the bench's own ---------------------------------------------------


class PrivateRedis(stack.Process):
    """A redis-server of the bench's own on a free port, without persistence (as the machine's)."""

    name = "redis"

    def __init__(self) -> None:
        super().__init__(dict(os.environ))
        self.port = stack.free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 30) -> PrivateRedis:
        self._spawn(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no"]
        )
        self._wait_until(self._answers, "redis-server", timeout)
        return self

    def _answers(self) -> bool:
        import redis

        try:
            return bool(redis.Redis.from_url(self.url, socket_timeout=1).ping())
        except redis.RedisError:
            time.sleep(0.05)
            return False

    def restart(self) -> None:
        self.stop()
        self.start()


class Broker:
    """Where Celery's tasks go: the bench's redis-server, or a queue of the bench's own on the
    machine's RabbitMQ. `restart()` restarts it as the broker fault does."""

    def __init__(self, kind: str, redis: PrivateRedis):
        self.kind, self.redis = kind, redis

    def env(self) -> dict[str, str]:
        return {"CELERY_BROKER_URL": RABBITMQ} if self.kind == "rabbitmq" else {}

    def restart(self) -> None:
        if self.kind == "redis":
            self.redis.restart()
        else:
            restart_rabbitmq()

    def delete_queue(self, queue: str) -> None:
        if self.kind == "rabbitmq":
            delete_rabbitmq_queue(queue)


def rabbitmq_up() -> bool:
    from kombu import Connection

    try:
        with Connection(RABBITMQ, connect_timeout=2) as connection:
            connection.connect()
        return True
    except Exception:
        return False


def delete_rabbitmq_queue(queue: str) -> None:
    """A queue of the machine's RabbitMQ and its exchange, made for one run: durable, so nothing
    else removes them."""
    from kombu import Connection

    with Connection(RABBITMQ, connect_timeout=5) as connection:
        channel = connection.default_channel
        channel.queue_delete(queue)
        channel.exchange_delete(queue)


def restart_rabbitmq() -> None:
    """The application only (the machine's environment notes say so): the node and its quorum
    queues' log stay."""
    subprocess.run(["rabbitmqctl", "stop_app"], check=True, capture_output=True, timeout=120)
    subprocess.run(["rabbitmqctl", "start_app"], check=True, capture_output=True, timeout=120)
    deadline = time.monotonic() + 60
    while not rabbitmq_up():
        if time.monotonic() > deadline:
            raise RuntimeError("RabbitMQ did not come back")
        time.sleep(0.2)


# --- hosts -----------------------------------------------------------------------------------------


class Beat(stack.Process):
    """Celery beat, as the Procfile runs it; its schedule file is in its host's data directory
    (CELERY_BEAT_SCHEDULE_FILENAME)."""

    name = "beat"

    def start(self, timeout: float = 90) -> Beat:
        self._spawn([sys.executable, "-m", "celery", "-A", "hitl_project", "beat", "-l", "INFO"])
        time.sleep(1)
        if not self.alive():
            raise RuntimeError(f"beat exited: see {self.log}")
        return self


@dataclass
class Host:
    """A simulated host: its processes (each a process group), its data and metrics directories,
    its name."""

    name: str
    env: dict[str, str]
    processes: list[stack.Process] = field(default_factory=list)

    @classmethod
    def make(cls, name: str, base_env: dict[str, str], root: Path) -> Host:
        var, metrics = root / name / "var", root / name / "metrics"
        metrics.mkdir(parents=True)
        env = {**base_env, "HITL_VAR_DIR": str(var), "METRICS_ENABLED": "true", "METRICS_DIR": str(metrics)}
        return cls(name, env)

    def start(self, process: stack.Process) -> stack.Process:
        self.processes.append(process)
        return process.start()

    def signal(self, signum: int) -> None:
        for process in self.processes:
            if process.alive():
                os.killpg(process.pid, signum)

    def crash(self) -> None:
        """SIGKILL every process of the host, as a lost machine."""
        self.signal(signal.SIGKILL)
        for process in self.processes:
            if process.proc is not None:
                process.proc.wait(10)
        self.processes.clear()


class Deployment:
    """Two web hosts, two worker hosts (beat on the first), the bench's PostgreSQL, Redis and broker."""

    def __init__(self, env: dict[str, str], root: Path, concurrency: int, web_workers: int = 2):
        self.concurrency, self.web_workers = concurrency, web_workers
        self.web = [Host.make(f"web-{n}", env, root) for n in ("a", "b")]
        self.workers = [Host.make(f"worker-{n}", env, root) for n in ("a", "b")]
        self.ports = [stack.free_port() for _ in self.web]

    @property
    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}/mcp/" for port in self.ports]

    def start_web(self, n: int) -> None:
        self.web[n].start(stack.Web(self.web[n].env, workers=self.web_workers, port=self.ports[n]))

    def start_worker(self, n: int, *, beat: bool = False) -> None:
        host = self.workers[n]
        host.start(stack.Worker(host.env, self.concurrency, "threads", node=f"celery@{host.name}"))
        if beat:
            host.start(Beat(host.env))

    def start(self) -> None:
        starting = [threading.Thread(target=self.start_web, args=(n,)) for n in range(len(self.web))]
        starting += [threading.Thread(target=self.start_worker, args=(n,), kwargs={"beat": n == 0}) for n in (0, 1)]
        for thread in starting:
            thread.start()
        for thread in starting:
            thread.join()
        for host in [*self.web, *self.workers]:
            if not host.processes or not all(p.alive() for p in host.processes):
                raise RuntimeError(f"{host.name} did not start: see {stack.LOGS}")

    def stop(self) -> None:
        """Once measured: every host's processes killed, not drained."""
        for host in [*self.web, *self.workers]:
            host.crash()


# --- the clients -------------------------------------------------------------------------------------


@dataclass
class Call:
    tag: str
    started: float
    completed: float | None = None
    done: bool = False
    # What a call that completed without its effect's {"done": true} returned instead.
    result: dict | None = None


class Load:
    """Clients making calls back to back until `stopping`, each request to the next web host."""

    def __init__(self, urls: list[str], token: str, signals: Path, seconds: float, wait: float):
        self.urls, self.token, self.signals, self.seconds = urls, token, signals, seconds
        self.timeout = wait + 30  # a request waits for its run up to MCP_RUN_WAIT_SECONDS
        self.calls: list[Call] = []
        self.errors: list[tuple[float, str]] = []
        self.retries: list[tuple[float, int]] = []  # (when it succeeded, the retries it needed)
        self.stopping = threading.Event()
        self.deadline = math.inf
        self._threads: list[threading.Thread] = []

    def start(self, clients: int) -> None:
        for n in range(clients):
            thread = threading.Thread(target=self._client, args=(n,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def finish(self, timeout: float) -> None:
        """No new calls; every call going is carried to its end, for `timeout` seconds at most."""
        self.stopping.set()
        self.deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, self.deadline - time.monotonic()) + self.timeout)

    def _client(self, n: int) -> None:
        hosts = itertools.count(n)
        with httpx.Client(timeout=self.timeout) as http:
            for k in itertools.count():
                if self.stopping.is_set():
                    return
                call = Call(f"client-{n}-call-{k}", time.monotonic())
                self.calls.append(call)
                try:
                    self._call(http, hosts, call)
                except TimeoutError:
                    return

    def _call(self, http: httpx.Client, hosts: Iterator[int], call: Call) -> None:
        """One call, as an MCP client makes it: the first call, the answer to its round, then
        coming back with the requestState while the answer is "still running"."""
        arguments = {"signal_dir": str(self.signals), "tag": call.tag, "seconds": self.seconds}
        params: dict = {"name": TOOL, "arguments": arguments, "_meta": {**META, IDEMPOTENCY_KEY: call.tag}}
        while True:
            result = self._request(http, hosts, params)
            params = {"name": TOOL, "arguments": arguments, "_meta": META}
            if "inputRequests" in result:
                params["inputResponses"] = {key: GO for key in result["inputRequests"]}
            elif "requestState" not in result:
                call.completed = time.monotonic()
                call.done = (result.get("structuredContent") or {}).get("done") is True
                call.result = None if call.done else result
                return
            else:
                time.sleep(POLL_PAUSE)  # still running: come back
            params["requestState"] = result["requestState"]

    def _request(self, http: httpx.Client, hosts: Iterator[int], params: dict) -> dict:
        """One request's result, sent again to the next web host while it fails."""
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "tools/call",
            "Mcp-Name": TOOL,
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        for retries in itertools.count():
            if time.monotonic() > self.deadline:
                raise TimeoutError("the call never completed")
            url = self.urls[next(hosts) % len(self.urls)]
            try:
                response = http.post(url, json=body, headers=headers)
                answer = response.json()
            except (httpx.HTTPError, ValueError) as exc:
                self.errors.append((time.monotonic(), type(exc).__name__))
            else:
                if isinstance(answer, dict) and "result" in answer:
                    self.retries.append((time.monotonic(), retries))
                    return answer["result"]
                error = answer.get("error", {}) if isinstance(answer, dict) else {}
                self.errors.append(
                    (time.monotonic(), f"HTTP {response.status_code} {error.get('message', '')}".strip())
                )
            time.sleep(RETRY_PAUSE)
        raise AssertionError("unreachable")


# --- the faults, their bounds, and what each phase measured ----------------------------------------------


@dataclass
class Settings:
    lease: float
    check: float
    # A run nobody took within this long of being enqueued is stalled (RUN_STALLED_AFTER_SECONDS):
    # a task the broker lost, or that a worker received and never started.
    stalled: float
    wait: float
    concurrency: int

    @classmethod
    def of(cls, env: dict[str, str]) -> Settings:
        def get(name: str) -> float:
            return float(env.get(name) or DEFAULTS[name])

        return cls(
            get("RUN_LEASE_SECONDS"),
            get("STALLED_CHECK_SECONDS"),
            get("RUN_STALLED_AFTER_SECONDS"),
            get("MCP_RUN_WAIT_SECONDS"),
            int(get("WORKER_CONCURRENCY")),
        )


def bound(fault: str, s: Settings, *, clients: int, call: float, window: float) -> tuple[float, str]:
    """How long after the fault the last call in flight during it may complete, and its terms.

    `call`: a call's own time, measured before the fault (p95), longer in proportion when a worker
    host is gone and its runs queue on the one left. `window`: how long the fault lasted (a restart,
    a stop, two beats), measured; a call that starts at its end waits the whole delay after it."""
    survivors = 1 if fault in ("worker-host-kill", "worker-host-stop") else 2
    call *= math.ceil(clients / (survivors * s.concurrency)) / math.ceil(clients / (2 * s.concurrency))
    lease_path = s.lease + s.check  # a lease runs out; beat (or a waiting request) enqueues the run again
    stalled_path = s.stalled + s.check  # a task lost before a worker leased its run
    terms = {
        # Each request the dead host had is sent again to the other one, once. A request killed
        # between committing its round and publishing its task left the round to nobody: its retry
        # enqueues it (round_queue.enqueue_unless_held).
        "web-host-kill": (call + 3 * RETRY_PAUSE, "a call + one retry of each of its requests"),
        "worker-host-kill": (lease_path + call, "RUN_LEASE_SECONDS + STALLED_CHECK_SECONDS + a call"),
        # A run that lost its connection is retried once its own lease (it could not end it) runs out.
        "postgres-restart": (
            window + lease_path + call,
            "the restart + RUN_LEASE_SECONDS + STALLED_CHECK_SECONDS + a call",
        ),
        # A task the broker lost, or could not take, is enqueued again once the run is stalled.
        "broker-restart": (
            window + stalled_path + call,
            "the restart + RUN_STALLED_AFTER_SECONDS + STALLED_CHECK_SECONDS + a call",
        ),
        # Its runs are taken over once their leases run out; a task delivered to the stopped process
        # and not started there is enqueued again once stalled.
        "worker-host-stop": (
            window + stalled_path + call,
            "the stop + RUN_STALLED_AFTER_SECONDS + STALLED_CHECK_SECONDS + a call",
        ),
        "two-beats": (window + call, "the time with two beats + a call"),
    }
    seconds, how = terms[fault]
    return round(seconds, 1), how


def p95(values: list[float]) -> float | None:
    return sorted(values)[math.ceil(0.95 * len(values)) - 1] if values else None


# How long after a node's effect its step's checkpoint may still be on its way to PostgreSQL: the
# node returns and its write follows in the same thread (durability="sync"), in milliseconds, and
# in well under this on a busy 2-core machine.
WRITE_AFTER_EFFECT = 0.5


@dataclass
class Effects:
    """The side effects recorded (the effects file: a call's tag, when its run found the lease held,
    when it made the effect, in time.monotonic), the times worker hosts were stopped (after the
    SIGSTOP was sent, before the SIGCONT was), and the times a fault cut workers off from
    PostgreSQL (a worker host killed, PostgreSQL restarting: from just before it began to its end)."""

    made: dict[str, list[tuple[float, float]]]
    stops: list[tuple[float, float]]
    cuts: list[tuple[float, float]] = field(default_factory=list)

    @classmethod
    def read(cls, path: Path, stops: list[tuple[float, float]], cuts: list[tuple[float, float]] = ()) -> Effects:
        made: dict[str, list[tuple[float, float]]] = {}
        for line in path.read_text().splitlines() if path.exists() else []:
            tag, cleared, written = line.split()
            made.setdefault(tag, []).append((float(cleared), float(written)))
        return cls(made, stops, list(cuts))

    def under_way_at_a_stop(self, tag: str) -> int:
        """The effects of `tag` whose lease was found held before a stop and made after it: a stopped
        process runs nothing between, so each was under way when its process was stopped."""
        return sum(
            1 for cleared, written in self.made.get(tag, []) if any(cleared < s and written > c for s, c in self.stops)
        )

    def cut_before_written(self, tag: str) -> int:
        """The effects of `tag` made so shortly before a cut or a stop, or during a cut, that their
        step's checkpoint could not be written (a stopped process's write comes after its lease ran
        out, and the fence refuses it): the run's next holder runs the node again from the
        checkpoint before it, as LangGraph does any step whose end was not written
        (docs/guarantees.md)."""
        windows = [*self.cuts, *((stopped, stopped) for stopped, _ in self.stops)]
        return sum(
            1
            for _, written in self.made.get(tag, [])
            if any(start - WRITE_AFTER_EFFECT <= written <= end for start, end in windows)
        )

    def _explained(self, tag: str) -> int:
        """Copies beyond the first that a fault explains (at most all but one)."""
        made = len(self.made.get(tag, []))
        return min(made - 1, self.under_way_at_a_stop(tag) + self.cut_before_written(tag))

    def twice(self, tag: str) -> bool:
        """Made more than once, counting none that a stop or a cut explains beyond the first."""
        made = len(self.made.get(tag, []))
        return made - self._explained(tag) > 1 if made else False

    def again_after_a_stop(self, tag: str) -> bool:
        return len(self.made.get(tag, [])) > 1 and not self.twice(tag) and self.under_way_at_a_stop(tag) > 0

    def again_after_a_cut(self, tag: str) -> bool:
        return len(self.made.get(tag, [])) > 1 and not self.twice(tag) and not self.again_after_a_stop(tag)

    def missing(self, tag: str) -> bool:
        return not self.made.get(tag)


def measure(fault: str, load: Load, effects: Effects, marks: Marks, bound_: tuple[float, str]) -> dict:
    """What one phase measured. Its calls are those started during it; those in flight during the
    fault are the calls going when it began, and those started while it lasted (its window)."""
    calls = [c for c in load.calls if marks.start <= c.started < marks.end]
    in_flight = [
        c
        for c in list(load.calls)
        if c.started <= marks.fault_at + marks.window and (c.completed is None or c.completed > marks.fault_at)
    ]
    last = max((c.completed for c in in_flight if c.completed is not None), default=None)
    errors = Counter(kind for when, kind in load.errors if marks.start <= when < marks.end)
    retries = [n for when, n in load.retries if marks.start <= when < marks.end]
    figure = round(last - marks.fault_at, 1) if last is not None else None
    return {
        "fault": fault,
        "bound_seconds": bound_[0],
        "bound": bound_[1],
        "call_p95_before_seconds": round(marks.call, 2),
        "fault_seconds": round(marks.recovered_at - marks.fault_at, 1),
        "fault_to_last_completion_seconds": figure,
        "calls_started": len(calls),
        "calls_completed": sum(1 for c in calls if c.done),
        "calls_in_flight_during_fault": len(in_flight),
        "calls_in_flight_completed": sum(1 for c in in_flight if c.done),
        "effects_twice": sum(1 for c in calls if effects.twice(c.tag)),
        "effects_under_way_at_the_stop_made_again": sum(1 for c in calls if effects.again_after_a_stop(c.tag)),
        "effects_cut_before_written_made_again": sum(1 for c in calls if effects.again_after_a_cut(c.tag)),
        "effects_missing": sum(1 for c in calls if effects.missing(c.tag)),
        # Each call whose effect was made more than once: when each copy found the lease held and
        # when it was made, in seconds after the fault, to set beside the fault's own times.
        "effects_made_more_than_once": {
            c.tag: [
                (round(cleared - marks.fault_at, 3), round(written - marks.fault_at, 3)) for cleared, written in made
            ]
            for c in calls
            if len(made := effects.made.get(c.tag, [])) > 1
        },
        # Those not completed, each with what it returned, to follow in the hosts' logs by its tag.
        "calls_not_completed": {c.tag: c.result or "no result" for c in calls if not c.done},
        "client_errors": sum(errors.values()),
        "client_errors_by_kind": dict(errors.most_common()),
        "most_retries_of_one_request": max(retries, default=0),
        "within_bound": figure is not None and figure <= bound_[0],
    }


@dataclass
class Marks:
    """A phase's times: its start, the fault, the fault over (`recovered_at`: a killed host
    started again), its end; `window`, how long new calls met the fault; `call`, the p95 of the
    calls completed before the fault."""

    start: float
    fault_at: float = 0.0
    recovered_at: float = 0.0
    end: float = 0.0
    window: float = 0.0
    call: float = 0.0


@dataclass
class Options:
    clients: int = 16
    seconds: float = 2.0
    concurrency: int = 8
    web_workers: int = 2  # uvicorn workers per web host
    restart_after: float = 5.0
    warmup: float = 5.0
    settle: float = 2.0
    faults: tuple[str, ...] = FAULTS
    database: str = "hitl_bench_faults"
    env: dict[str, str] = field(default_factory=dict)  # settings for every host (the tests shorten the lease)


def run_broker(broker_kind: str, options: Options) -> dict:
    """Start a deployment on `broker_kind`, carry the load through each fault, and stop it all."""
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="hitl-faults-"))
    signals = root / "signals"
    signals.mkdir()
    postgres, redis = stack.PrivatePostgres(), PrivateRedis()
    broker = Broker(broker_kind, redis)
    queue = f"hitl-faults-{broker_kind}-{uuid.uuid4().hex[:8]}"
    deployment: Deployment | None = None
    load: Load | None = None
    try:
        postgres.start()
        redis.start()
        database_url = postgres.url(options.database)
        stack.recreate_database(database_url)
        env = stack.service_env(database_url, redis.url, queue, **broker.env())
        if broker_kind == "redis":
            env.pop("CELERY_BROKER_URL", None)
        for name in DEFAULTS:  # the defaults are what is measured, unless the options set them
            env.pop(name, None)
        env.update(options.env)
        settings = Settings.of(env)
        stack.migrate(env)
        token = stack.mcp_token(env)
        deployment = Deployment(env, root, options.concurrency, options.web_workers)
        deployment.start()
        ready = time.monotonic()
        load = Load(deployment.urls, token, signals, options.seconds, settings.wait)
        load.start(options.clients)
        faults = Faults(deployment, postgres, broker, settings, options)
        phases: list[tuple[str, Marks]] = []
        for fault in options.faults:
            marks = Marks(start=time.monotonic())
            time.sleep(options.warmup)
            marks.fault_at = time.monotonic()
            durations = [c.completed - c.started for c in list(load.calls) if c.completed and c.done]
            marks.call = p95(durations[-4 * options.clients :]) or options.seconds + 1
            faults.inject(fault)
            marks.recovered_at = time.monotonic()
            marks.window = faults.window(fault, marks)
            # The phase lasts until every call in flight during the fault has completed.
            give_up = marks.recovered_at + 3 * settings.stalled + 3 * settings.lease
            while time.monotonic() < give_up and any(
                c.completed is None and c.started < marks.recovered_at for c in list(load.calls)
            ):
                time.sleep(0.1)
            faults.restarted()
            time.sleep(options.settle)
            marks.end = time.monotonic()
            phases.append((fault, marks))
        load.finish(timeout=settings.stalled + 3 * settings.lease + 60)
        effects = Effects.read(signals / "effects", faults.stops, faults.cuts)
        measured = [
            measure(
                fault,
                load,
                effects,
                marks,
                bound(
                    fault,
                    settings,
                    clients=options.clients,
                    call=marks.call,
                    window=marks.window,
                ),
            )
            for fault, marks in phases
        ]
        return {
            "broker": broker_kind,
            "clients": options.clients,
            "run_seconds": options.seconds,
            "worker_concurrency": options.concurrency,
            "web_workers": options.web_workers,
            "restart_after_seconds": options.restart_after,
            "settings": {
                "RUN_LEASE_SECONDS": settings.lease,
                "STALLED_CHECK_SECONDS": settings.check,
                "RUN_STALLED_AFTER_SECONDS": settings.stalled,
                "MCP_RUN_WAIT_SECONDS": settings.wait,
                "WORKER_CONCURRENCY": settings.concurrency,
            },
            "calls_started": len(load.calls),
            "calls_completed": sum(1 for c in load.calls if c.done),
            "effects_twice": sum(1 for c in load.calls if effects.twice(c.tag)),
            "startup_seconds": round(ready - started, 1),
            "total_seconds": round(time.monotonic() - started, 1),
            "phases": measured,
        }
    finally:
        if load is not None:
            load.stopping.set()
            load.deadline = 0
        if deployment is not None:
            deployment.stop()
        redis.stop()
        try:
            broker.delete_queue(queue)
        except Exception as exc:
            print(f"could not delete the queue {queue}: {exc}", file=sys.stderr)
        postgres.remove()
        shutil.rmtree(root, ignore_errors=True)


class Faults:
    """Each fault, done to the running deployment and undone as a process manager or an operator
    would."""

    def __init__(
        self,
        deployment: Deployment,
        postgres: stack.PrivatePostgres,
        broker: Broker,
        settings: Settings,
        options: Options,
    ):
        self.deployment, self.postgres, self.broker = deployment, postgres, broker
        self.settings, self.options = settings, options
        self._restarting: threading.Thread | None = None
        self._failed: Exception | None = None
        # When a worker host was stopped: after its SIGSTOP was sent, before its SIGCONT was.
        self.stops: list[tuple[float, float]] = []
        # When the workers were cut off from PostgreSQL: a worker host killed, PostgreSQL restarting.
        self.cuts: list[tuple[float, float]] = []

    def window(self, fault: str, marks: Marks) -> float:
        """How long new calls met the fault: none for a host killed (the other one serves them at
        once), else until it was over."""
        return 0.0 if fault in ("web-host-kill", "worker-host-kill") else marks.recovered_at - marks.fault_at

    def inject(self, fault: str) -> None:
        """Do the fault; a killed host is started again on a thread of its own, while the phase
        waits for its calls (`restarted` waits for it)."""
        action: Callable[[], None] = {
            "web-host-kill": self.web_host_kill,
            "worker-host-kill": self.worker_host_kill,
            "postgres-restart": self.postgres_restart,
            "broker-restart": self.broker.restart,
            "worker-host-stop": self.worker_host_stop,
            "two-beats": self.two_beats,
        }[fault]
        action()

    def web_host_kill(self) -> None:
        self.deployment.web[0].crash()
        self._restart_after(lambda: self.deployment.start_web(0))

    def worker_host_kill(self) -> None:
        self._cut(self.deployment.workers[0].crash)
        self._restart_after(lambda: self.deployment.start_worker(0, beat=True))

    def postgres_restart(self) -> None:
        self._cut(self.postgres.restart)

    def _cut(self, fault: Callable[[], None]) -> None:
        """Do a fault that cuts workers off from PostgreSQL, and keep when it began and ended."""
        began = time.monotonic()
        fault()
        self.cuts.append((began, time.monotonic()))

    def _restart_after(self, start: Callable[[], None]) -> None:
        """As a process manager would: --restart-after seconds after the crash."""

        def restart() -> None:
            time.sleep(self.options.restart_after)
            try:
                start()
            except Exception as exc:
                self._failed = exc

        self._restarting = threading.Thread(target=restart)
        self._restarting.start()

    def restarted(self) -> None:
        if self._restarting is not None:
            self._restarting.join()
            self._restarting = None
        if self._failed is not None:
            raise RuntimeError("a killed host did not start again") from self._failed

    def worker_host_stop(self) -> None:
        host = self.deployment.workers[1]
        host.signal(signal.SIGSTOP)
        stopped = time.monotonic()
        # Longer than a lease, and than the check that finds it ran out: its runs are taken over.
        time.sleep(self.settings.lease + self.settings.check + self.options.seconds + 1)
        self.stops.append((stopped, time.monotonic()))
        host.signal(signal.SIGCONT)

    def two_beats(self) -> None:
        host = self.deployment.workers[1]
        second = host.start(Beat(host.env))
        time.sleep(max(3 * self.settings.check, self.options.seconds * 2))
        second.stop()
        host.processes.remove(second)


# --- the report ----------------------------------------------------------------------------------------


def markdown(reports: list[dict]) -> str:
    lines = [
        "| broker | fault | bound (s) | fault → last call completed (s) | calls completed / started "
        "| side effects twice | errors seen by clients | most retries of one request |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for report in reports:
        for p in report["phases"]:
            figure = p["fault_to_last_completion_seconds"]
            lines.append(
                f"| {report['broker']} | {p['fault']} | {p['bound_seconds']} | "
                f"{'never' if figure is None else figure}{'' if p['within_bound'] else ' (over)'} | "
                f"{p['calls_completed']} / {p['calls_started']} | {p['effects_twice']}{_again(p)} | "
                f"{p['client_errors']} | {p['most_retries_of_one_request']} |"
            )
    return "\n".join(lines) + "\n"


def _again(phase: dict) -> str:
    stopped = phase.get("effects_under_way_at_the_stop_made_again", 0)
    cut = phase.get("effects_cut_before_written_made_again", 0)
    again = [
        f"{stopped} under way at the stop" if stopped else "",
        f"{cut} cut before its step was written" if cut else "",
    ]
    return f" (and made again: {', '.join(a for a in again if a)})" if stopped or cut else ""


def passed(report: dict) -> bool:
    return all(
        p["calls_completed"] == p["calls_started"] and not p["effects_twice"] and not p["effects_missing"]
        for p in report["phases"]
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--broker", choices=("redis", "rabbitmq", "both"), default="both")
    p.add_argument("--clients", type=int, default=Options.clients, help="clients making calls back to back")
    p.add_argument("--seconds", type=float, default=Options.seconds, help="each call's model call, in seconds")
    p.add_argument("--concurrency", type=int, default=Options.concurrency, help="each worker host's threads")
    p.add_argument("--web-workers", type=int, default=Options.web_workers, help="each web host's uvicorn workers")
    p.add_argument("--restart-after", type=float, default=Options.restart_after, help="a killed host's restart")
    p.add_argument("--warmup", type=float, default=Options.warmup, help="load before each fault, in seconds")
    p.add_argument("--faults", default=",".join(FAULTS), help=f"a subset of {','.join(FAULTS)}")
    p.add_argument("--database", default=Options.database, help="the bench database (in the bench's own cluster)")
    args = p.parse_args(argv)
    faults = tuple(f for f in args.faults.split(",") if f)
    if unknown := set(faults) - set(FAULTS):
        raise SystemExit(f"unknown faults: {', '.join(sorted(unknown))}")
    options = Options(
        clients=args.clients,
        seconds=args.seconds,
        concurrency=args.concurrency,
        web_workers=args.web_workers,
        restart_after=args.restart_after,
        warmup=args.warmup,
        faults=faults,
        database=args.database,
    )
    brokers = ("redis", "rabbitmq") if args.broker == "both" else (args.broker,)
    reports = [run_broker(kind, options) for kind in brokers]
    (stack.BENCH / "faults.json").write_text(json.dumps(reports, indent=2) + "\n")
    (stack.BENCH / "faults.md").write_text(markdown(reports))
    print(json.dumps(reports, indent=2))
    print(markdown(reports))
    return 0 if all(passed(r) for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
