"""`make bench`: how fast paused tool calls are, against real PostgreSQL and Redis with the
production processes (a uvicorn web process and a Celery worker process), on 127.0.0.1.

Measurements, one function each:
  1+2. latency   the one-question graph `choose_region` in-process with PostgresSaver (the floor),
                 through runner.run (what the worker calls), and as an MCP tool over HTTP, interleaved
                 in one loop so the machine's noise falls on all three alike
  2b.  pages     a round answered on its answer page (MCP_ANSWER_PAGES=on) against the same round
                 answered with inputResponses, interleaved, on a web process with answer pages on
  3.   load      completed pause-and-resume rounds per second at 1, 8, 32 and 128 concurrent clients
  4.   waiting   how many tool calls one web process holds open while their runs are pending
  5.   paused    100,000 paused calls in the database: memory, a round's latency, the admin lists
  6.   cleanup   remove_expired_calls() over those 100,000 calls and their checkpoints
  7.   embedded  the embedded default (`make run`: SQLite, rounds in the web process) under the same
                 whole rounds at 1, 8 and 32 clients, beside it (bench/embedded.py)

It creates (dropping it first) and migrates its own database, makes its own MCP token with
`manage.py mcp_token`, uses its own Celery queue, and always stops what it started. The defaults
are the full sizes; `--quick` (or the size flags) makes a small run for a busy machine.
`--profile` adds py-spy/pyinstrument profiles (bench/profiles/).

One file longer than the service's modules on purpose: each measurement is one function over the
stack it starts (bench/stack.py), and the run reads best top to bottom.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hitl REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/run.py --quick
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import math
import os
import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import clone, paused, report, sizes, stack  # noqa: E402
from bench.client import Mcp, OlderMcp, RoundTimes, pause_and_resume, pause_only  # noqa: E402

TOOL = "choose_region"
ANSWER = "eu-west-1"


@dataclass
class Bench:
    """What every measurement needs: the database, the token and the running processes."""

    args: argparse.Namespace
    database_url: str
    redis_url: str
    queue: str
    env: dict[str, str]
    token: str = ""
    procs: stack.Stack = field(default_factory=stack.Stack)
    web: stack.Web | None = None
    worker: stack.Worker | None = None

    @property
    def mcp_url(self) -> str:
        assert self.web is not None
        return f"{self.web.url}/mcp/"

    @property
    def dsn(self) -> str:
        from graph_runtime.checkpointer import postgres_dsn

        return postgres_dsn()


def log(message: str) -> None:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"[{time.strftime('%H:%M:%S')}] {message}  (load {load})", flush=True)


# --- setup ---------------------------------------------------------------------------------------------


def setup(args: argparse.Namespace, **extra: str) -> Bench:
    """The bench database (dropped, created, migrated), its MCP token, and this process pointed at
    it; `extra`: more settings for the service's processes."""
    base_url = os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/hitl"
    redis_url = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    database_url = stack.bench_database_url(base_url, args.database)
    queue = f"hitl-bench-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    # Older clients answer too, so that a 2025-11-25 client's round is measured beside a 2026-07-28 one.
    env = stack.service_env(database_url, redis_url, queue, **{"MCP_OLDER_CLIENTS": "answer", **extra})
    bench = Bench(args, database_url, redis_url, queue, env)

    log(f"recreating database {args.database} and migrating")
    stack.recreate_database(database_url)
    stack.migrate(env)
    bench.token = stack.mcp_token(env)

    # This process reads the same settings: the floor, the SQL and the cleanup run here.
    for key in (
        "DATABASE_URL",
        "REDIS_URL",
        "CELERY_QUEUE",
        "GRAPHS_CONFIG",
        "DJANGO_SETTINGS_MODULE",
        "SECRET_KEY",
        "LOG_LEVEL",
    ):
        os.environ[key] = env[key]
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "DEBUG"):
        os.environ.pop(key, None)
    # This script drives the ORM from inside its asyncio loops, one step at a time (never the service).
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    import django

    django.setup()
    from django.conf import settings

    # The worker runs with what the settings say unless told otherwise; the report names it.
    args.worker_pool = args.worker_pool or settings.CELERY_WORKER_POOL
    args.worker_concurrency = args.worker_concurrency or settings.CELERY_WORKER_CONCURRENCY
    return bench


def start_services(bench: Bench) -> None:
    args = bench.args
    log(
        f"starting uvicorn ({args.web_workers} worker(s)) and a Celery worker "
        f"({args.worker_pool}, concurrency {args.worker_concurrency})"
    )
    bench.web = bench.procs.start(stack.Web(bench.env, workers=args.web_workers))
    bench.worker = bench.procs.start(stack.Worker(bench.env, args.worker_concurrency, args.worker_pool))


async def warm_up(bench: Bench, rounds: int) -> None:
    """Every web and worker process imports, connects and compiles before anything is timed."""
    clients = [Mcp(bench.mcp_url, bench.token) for _ in range(max(2, bench.args.web_workers * 2))]
    for _ in range(max(1, rounds // len(clients))):
        await asyncio.gather(*(pause_and_resume(c, TOOL) for c in clients))
    for c in clients:
        await c.close()


# --- 1 + 2: the floor and the full stack, interleaved --------------------------------------------------


def floor_round(graph: Any) -> tuple[float, float]:
    """The graph alone with PostgresSaver: invoke to the interrupt, then Command(resume=...) to the end."""
    from langgraph.types import Command

    config = {"configurable": {"thread_id": f"floor-{uuid.uuid4()}"}}
    t0 = time.perf_counter()
    paused = graph.invoke({}, config)
    t1 = time.perf_counter()
    done = graph.invoke(Command(resume=ANSWER), config)
    t2 = time.perf_counter()
    assert "__interrupt__" in paused and done.get("region") == ANSWER, (paused, done)
    return t1 - t0, t2 - t1


def runner_round(registered: Any) -> tuple[float, float]:
    """What the worker runs per round: runner.run (bound graph, invoke, get_state), both rounds."""
    from graph_runtime import runner

    thread_id = f"runner-{uuid.uuid4()}"
    t0 = time.perf_counter()
    paused = runner.run(registered, thread_id, arguments={})
    t1 = time.perf_counter()
    done = runner.run(registered, thread_id, resume={paused.interrupts[0].id: ANSWER})
    t2 = time.perf_counter()
    assert done.values.get("region") == ANSWER, done
    return t1 - t0, t2 - t1


# The round's statements (mcp_gateway/calls/store.py) in the order a round makes them: its durable state
# changes and the reads its rules need. The tokens' reads are left out: a bare request makes them too.
STATEMENTS = (
    "the call and round 0 created",
    "the first run's lease",
    "the pause recorded",
    "the answered round read",
    "the claim, the call running, round 1",
    "the resumed run's lease",
    "the cancel flag read",
    "the end recorded",
)


def statements_round() -> list[float]:
    """The gateway's statements of one round, each timed alone in this process, on rows of a call
    of their own (removed with the other measurements' calls): what storing a round costs with
    nothing around it (no HTTP, Celery, graph, checks), the part of a round beyond the stack floor
    that no bookkeeping in Python can remove while the gateway stores what it stores."""
    from django.utils import timezone

    from mcp_gateway import lifetimes
    from mcp_gateway.calls import store
    from mcp_gateway.models import Round, ToolCall

    times: list[float] = []

    def timed(statement: Any) -> Any:
        t0 = time.perf_counter()
        out = statement()
        times.append(time.perf_counter() - t0)
        return out

    call = ToolCall(
        thread_id=f"statements-{uuid.uuid4()}",
        graph=TOOL,
        tool_name=TOOL,
        arguments_digest="0" * 64,
        caller="bench:statements",
        expires_at=lifetimes.paused_until(timezone.now()),
    )
    first = Round(id=uuid.uuid4(), call=call, number=0, state=Round.State.RUNNING, request_state_hash="0" * 64)
    timed(lambda: store.start(call, first))
    running = timed(lambda: store.lease_first(first.id))
    asked = {"kind": "questions", "requests": {"region": {"method": "elicitation/create"}}, "interrupts": []}
    timed(lambda: store.record_round(running, Round.State.ASKING, asked, unless_cancelled=True))
    answered = timed(lambda: store.round_with_call(first.id))
    second = Round(
        id=uuid.uuid4(),
        call=answered.call,
        number=1,
        state=Round.State.RUNNING,
        request_state_hash="0" * 64,
        with_request_state=True,
    )
    timed(lambda: store.claim_and_resume(answered, {"region": ANSWER}, second))
    resumed = timed(lambda: store.lease_first(second.id))
    timed(lambda: store.cancel_requested(call.pk))
    done = {"kind": "result", "result": {"content": [], "structuredContent": {"region": ANSWER}, "isError": False}}
    assert timed(lambda: store.record_round(resumed, Round.State.FINISHED, done)) is store.Recording.RECORDED
    return times


async def traced_round(mcp: Mcp) -> tuple[tuple[float, float], tuple[str, float, float, float]]:
    """A full-stack pause-and-resume round, with wall-clock times to set against the rows' timestamps."""
    from bench.client import answers_for

    w0, t0 = time.time(), time.perf_counter()
    first = await mcp.call(TOOL, {})
    w1, t1 = time.time(), time.perf_counter()
    final = await mcp.call(TOOL, {}, inputResponses=answers_for(first, ANSWER), requestState=first["requestState"])
    w2, t2 = time.time(), time.perf_counter()
    assert final.get("structuredContent", {}).get("region") == ANSWER, final
    return (t1 - t0, t2 - t1), (first["requestState"].split(".")[0], w0, w1, w2)


async def progress_round(mcp: Mcp) -> tuple[float, float]:
    """The same round with a progressToken on both calls: what asking for progress costs when the
    graph reports none (both answers stay JSON: a stream would not parse)."""
    from bench.client import answers_for

    token = {"progressToken": "bench"}
    t0 = time.perf_counter()
    first = await mcp.call(TOOL, {}, meta=token)
    t1 = time.perf_counter()
    responses = answers_for(first, ANSWER)
    final = await mcp.call(TOOL, {}, meta=token, inputResponses=responses, requestState=first["requestState"])
    t2 = time.perf_counter()
    assert final.get("structuredContent", {}).get("region") == ANSWER, final
    return t1 - t0, t2 - t1


def breakdown(traces: list[tuple[str, float, float, float]]) -> dict[str, Any]:
    """Where a request's time goes, from the Round rows' timestamps (same clock, same machine):
    web before the run (request → Round row created), queue + worker (created → run recorded),
    and back (recorded → response received: commit, notify, wake the view, settle, respond)."""
    from mcp_gateway.models import Round

    phases: dict[str, list[float]] = {
        k: []
        for k in (
            "pause_web_in",
            "pause_queue_and_run",
            "pause_back",
            "resume_web_in",
            "resume_queue_and_run",
            "resume_back",
        )
    }
    for round_id, w0, w1, w2 in traces:
        first = Round.objects.get(pk=round_id)
        second = Round.objects.get(call_id=first.call_id, number=first.number + 1)
        for prefix, r, sent, received in (("pause", first, w0, w1), ("resume", second, w1, w2)):
            phases[f"{prefix}_web_in"].append(r.created_at.timestamp() - sent)
            phases[f"{prefix}_queue_and_run"].append(r.finished_at.timestamp() - r.created_at.timestamp())
            phases[f"{prefix}_back"].append(received - r.finished_at.timestamp())
    return {k: report.summary_ms(v) for k, v in phases.items()}


class Handoff:
    """A no-op Celery round trip through the bench's broker and worker (`bench.tasks.echo`):
    enqueued as a round's run is, acknowledged late by the same worker process, and back as a
    Redis publish this process hears, as a round's end comes back to the web."""

    TASK = "bench.tasks.echo"

    def __init__(self, redis_url: str):
        import redis

        from hitl_project.celery import app

        self.app = app
        self.channel = f"hitl-bench:echo:{uuid.uuid4().hex}"
        self.pubsub = redis.Redis.from_url(redis_url).pubsub(ignore_subscribe_messages=True)
        self.pubsub.subscribe(self.channel)

    def trip(self, task: str = TASK, *args: Any) -> float:
        t0 = time.perf_counter()
        self.app.send_task(task, args=[self.channel, *args])
        while self.pubsub.get_message(timeout=30) is None:
            if time.perf_counter() - t0 > 30:
                raise RuntimeError("the no-op task did not come back within 30 s")
        return time.perf_counter() - t0

    def floor_round(self) -> tuple[float, float]:
        """The floor's round run in the worker (`bench.tasks.floor_run`), each run a hand-off:
        the in-process floor as the worker's process runs it, with its two hand-offs."""
        thread_id = f"floor-{uuid.uuid4()}"
        return self.trip(FloorClient.TASK, TOOL, thread_id, None), self.trip(FloorClient.TASK, TOOL, thread_id, ANSWER)

    def close(self) -> None:
        self.pubsub.close()


def stack_floor(lat: dict[str, Any]) -> dict[str, Any]:
    """What a round costs on this stack before the gateway stores anything: the in-process floor,
    two bare requests and two no-op hand-offs (p50 each), and the round's ratio to it. Beside it,
    the same with the graph run where a round runs it, in the worker (its two runs each a
    hand-off): the same parts, with what the worker's process adds to the graph's own run."""
    floor = lat["floor"]["total"]["p50_ms"]
    bare = lat["bare_request"]["p50_ms"]
    handoff = lat["handoff"]["p50_ms"]
    total = floor + 2 * bare + 2 * handoff
    in_worker = lat["worker_floor"]["total"]["p50_ms"] + 2 * bare
    round_ = lat["full_stack"]["total"]["p50_ms"]
    statements = sum(s["p50_ms"] for s in lat["statements"].values())
    return {
        # The stack floor and the gateway's statements alone: the least a round storing what it
        # stores can cost, whatever the Python around the statements.
        "statements_ms": round(statements, 2),
        "with_statements_ms": round(total + statements, 2),
        "ratio_with_statements": round((total + statements) / total, 2),
        "floor_ms": floor,
        "two_requests_ms": round(2 * bare, 2),
        "two_handoffs_ms": round(2 * handoff, 2),
        "total_ms": round(total, 2),
        "ratio_p50": round(round_ / total, 2),
        "graph_in_worker_ms": round(in_worker, 2),
        "ratio_graph_in_worker_p50": round(round_ / in_worker, 2),
    }


async def measure_latency(bench: Bench, calls: int, warmup: int) -> dict[str, Any]:
    from graph_runtime import runner
    from graph_runtime.registry import get_graph

    registered = get_graph(TOOL)
    graph = runner.bound(registered.graph)
    mcp = Mcp(bench.mcp_url, bench.token)
    # A 2025-11-25 client in its session: the call's event stream, and the answer POSTed.
    older = OlderMcp(bench.mcp_url, bench.token)
    await older.initialize()
    times: dict[str, list[tuple[float, float]]] = {
        "floor": [],
        "runner": [],
        "full_stack": [],
        "older_client": [],
        "with_progress": [],
        "worker_floor": [],
    }
    bare: list[float] = []
    handoffs: list[float] = []
    statements: list[list[float]] = []
    handoff = Handoff(bench.redis_url)
    traces = []
    floor_cpu: list[float] = []
    log(
        f"latency: {calls} interleaved rounds of floor, runner.run, full stack (2026-07-28 and an older "
        f"client's stream), a bare request and two no-op hand-offs (+{warmup} warm-up)"
    )
    wall = None
    if bench.args.profile:
        from bench import profiling

        assert bench.worker is not None
        # One round at a time: where a run's time goes in the worker, its waits included.
        wall = profiling.start(bench.worker.pid, "worker-round-wall", None, rate=1000, wall=True)
    for i in range(warmup + calls):
        # One after the other, never at once: each gets the machine to itself.
        c0 = time.process_time()
        f = floor_round(graph)
        c1 = time.process_time()
        r = runner_round(registered)
        h, trace = await traced_round(mcp)
        p = await progress_round(mcp)
        older_times, older_result = await older.round(TOOL, ANSWER)
        assert older_result.get("structuredContent", {}).get("region") == ANSWER, older_result
        b0 = time.perf_counter()
        await mcp.list_tools()
        b = time.perf_counter() - b0
        o = [handoff.trip(), handoff.trip()]
        w = handoff.floor_round()
        s = statements_round()
        if i >= warmup:
            statements.append(s)
            times["worker_floor"].append(w)
            bare.append(b)
            handoffs.extend(o)
            times["floor"].append(f)
            times["runner"].append(r)
            times["full_stack"].append(h)
            times["with_progress"].append(p)
            times["older_client"].append((older_times.pause, older_times.resume))
            traces.append(trace)
            floor_cpu.append(c1 - c0)
    await mcp.close()
    await older.close()
    handoff.close()
    if wall is not None:
        profiling.finish_profile(wall, "worker-round-wall", stop=True, under="run_round (mcp_gateway/calls/runs.py)")
        log("  profile: bench/profiles/worker-round-wall.txt")
    out: dict[str, Any] = {}
    for key, pairs in times.items():
        out[key] = {
            "pause": report.summary_ms([p for p, _ in pairs]),
            "resume": report.summary_ms([r for _, r in pairs]),
            "total": report.summary_ms([p + r for p, r in pairs]),
        }
    out["ratio_p50"] = round(out["full_stack"]["total"]["p50_ms"] / out["floor"]["total"]["p50_ms"], 2)
    out["ratio_p95"] = round(out["full_stack"]["total"]["p95_ms"] / out["floor"]["total"]["p95_ms"], 2)
    # An older client's round beside a 2026-07-28 one: the same call, asked on its stream.
    out["ratio_older_p50"] = round(out["older_client"]["total"]["p50_ms"] / out["full_stack"]["total"]["p50_ms"], 2)
    # The same round asking for progress, of a graph that reports none.
    out["ratio_progress_p50"] = round(out["with_progress"]["total"]["p50_ms"] / out["full_stack"]["total"]["p50_ms"], 2)
    out["full_stack_breakdown"] = breakdown(traces)
    # What any request costs before it touches a call: a round makes two.
    out["bare_request"] = report.summary_ms(bare)
    # The no-op Celery round trip: a round hands off to the worker and back twice.
    out["handoff"] = report.summary_ms(handoffs)
    by_statement = zip(STATEMENTS, zip(*statements, strict=True), strict=True)
    out["statements"] = {name: report.summary_ms(list(times)) for name, times in by_statement}
    out["stack_floor"] = stack_floor(out)
    # This process's CPU for a floor round (LangGraph and PostgresSaver, not PostgreSQL's own): a
    # lower bound on the CPU any full-stack round costs.
    out["floor_cpu_ms"] = report.summary_ms(floor_cpu)
    out["ratio_runner_p50"] = round(out["runner"]["total"]["p50_ms"] / out["floor"]["total"]["p50_ms"], 2)
    return out


# --- 2b: a round answered on its answer page -------------------------------------------------------

# A 2026-07-28 client that opens URLs but fills no forms: the round's question is a URL question to
# the round's answer page (docs/rules.md, "Answer through a link").
URL_ONLY = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {"url": {}}}}


async def page_round(mcp: Mcp, browser: Any) -> tuple[float, float]:
    """A round answered on its page: from the person's POST of the form (its claim, answered 303)
    until the client's retry, with its accept of the link, gets the resumed call's result; and the
    POST's own part. The round's first request and the form's GET (the CSRF token; the person reads
    the questions meanwhile) are not timed."""
    import re

    first = await mcp.call(TOOL, {}, meta=URL_ONLY)
    [(key, question)] = first["inputRequests"].items()
    link = question["params"]["url"]
    form = await browser.get(link)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
    assert form.status_code == 200 and token is not None, form.text[:300]
    t0 = time.perf_counter()
    sent = await browser.post(link, data={"q0-f0": ANSWER, "action": "accept", "csrfmiddlewaretoken": token[1]})
    posted = time.perf_counter() - t0
    accepted = {key: {"action": "accept"}}
    final = await mcp.call(TOOL, {}, meta=URL_ONLY, inputResponses=accepted, requestState=first["requestState"])
    elapsed = time.perf_counter() - t0
    assert sent.status_code == 303, sent.text[:300]
    assert final.get("structuredContent", {}).get("region") == ANSWER, final
    return elapsed, posted


async def input_responses_round(mcp: Mcp) -> float:
    """The same round answered in the client: the answering tools/call (inputResponses) until its
    result; the first request is not timed."""
    from bench.client import answers_for

    first = await mcp.call(TOOL, {})
    t0 = time.perf_counter()
    final = await mcp.call(TOOL, {}, inputResponses=answers_for(first, ANSWER), requestState=first["requestState"])
    elapsed = time.perf_counter() - t0
    assert final.get("structuredContent", {}).get("region") == ANSWER, final
    return elapsed


async def measure_answer_page(bench: Bench, calls: int, warmup: int) -> dict[str, Any]:
    """Both rounds interleaved on a web process of their own with answer pages on (the main one
    serves the other measurements as the settings' default has it), the same worker behind it."""
    import httpx

    port = stack.free_port()
    env = {**bench.env, "MCP_ANSWER_PAGES": "on", "SITE_URL": f"http://127.0.0.1:{port}"}
    web = bench.procs.start(stack.Web(env, workers=bench.args.web_workers, port=port))
    log(f"answer page: {calls} interleaved rounds answered on the page and with inputResponses (+{warmup} warm-up)")
    mcp = Mcp(f"http://127.0.0.1:{port}/mcp/", bench.token)
    page: list[float] = []
    posts: list[float] = []
    in_client: list[float] = []
    try:
        async with httpx.AsyncClient(timeout=120) as browser:
            for i in range(warmup + calls):
                p, post = await page_round(mcp, browser)
                r = await input_responses_round(mcp)
                if i >= warmup:
                    page.append(p)
                    posts.append(post)
                    in_client.append(r)
    finally:
        await mcp.close()
        bench.procs.stop(web)
    out = {
        "page": report.summary_ms(page),
        "page_post": report.summary_ms(posts),
        "input_responses": report.summary_ms(in_client),
    }
    out["ratio_p50"] = round(out["page"]["p50_ms"] / out["input_responses"]["p50_ms"], 2)
    return out


# --- 3: load ----------------------------------------------------------------------------------------


# The processes that serve a round (the load generator is not one of them).
SERVICE_PROCESSES = ("web", "worker", "postgres", "redis")


class FloorClient:
    """A client of the stack's floor: whole rounds with nothing stored. Each round is a bare request,
    a hand-off that runs the graph to its interrupt in the worker (`bench.tasks.floor_run`,
    the in-process floor's pause), a bare request, and a hand-off that resumes it: what a round
    costs on this stack before the gateway reads or writes a row, at the same concurrency. This
    client enqueues the runs in the web's place; `enqueue_cpu` is what that costs it (its event
    loop's thread, so nothing else is counted)."""

    TASK = "bench.tasks.floor_run"
    enqueue_cpu = 0.0  # every FloorClient's, in this process

    def __init__(self, bench: Bench):
        import redis.asyncio

        from hitl_project.celery import app

        self.app = app
        self.mcp = Mcp(bench.mcp_url, bench.token)
        self.redis = redis.asyncio.Redis.from_url(bench.redis_url)
        self.pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
        self.channel = f"hitl-bench:floor:{uuid.uuid4().hex}"
        self.subscribed = False

    async def round(self) -> RoundTimes:
        if not self.subscribed:
            await self.pubsub.subscribe(self.channel)
            self.subscribed = True
        thread_id = f"floor-{uuid.uuid4()}"
        t0 = time.perf_counter()
        await self.mcp.list_tools()
        await self._handoff(thread_id, None)
        t1 = time.perf_counter()
        await self.mcp.list_tools()
        await self._handoff(thread_id, ANSWER)
        return RoundTimes(t1 - t0, time.perf_counter() - t1)

    async def _handoff(self, thread_id: str, resume: str | None) -> None:
        c0 = time.thread_time()
        self.app.send_task(self.TASK, args=[self.channel, TOOL, thread_id, resume])
        FloorClient.enqueue_cpu += time.thread_time() - c0
        deadline = time.monotonic() + 30
        while await self.pubsub.get_message(timeout=1.0) is None:
            if time.monotonic() > deadline:
                raise RuntimeError("the floor's run did not come back within 30 s")

    async def close(self) -> None:
        await self.mcp.close()
        await self.pubsub.aclose()
        await self.redis.aclose()


class RoundClient:
    """A client doing the tool's whole pause-and-resume rounds over MCP."""

    def __init__(self, bench: Bench):
        self.mcp = Mcp(bench.mcp_url, bench.token)

    async def round(self) -> RoundTimes:
        return await pause_and_resume(self.mcp, TOOL)

    async def close(self) -> None:
        await self.mcp.close()


async def load_level(
    bench: Bench,
    clients: int,
    seconds: float,
    warmup: float,
    kind: type[RoundClient | FloorClient] = RoundClient,
    waits: str | None = None,
    statements: str | None = None,
) -> dict[str, Any]:
    """`clients` clients, each doing whole rounds back to back (the tool's, or the stack floor's);
    rounds that end inside the measured window count. The window opens after `warmup` seconds and
    once every client has ended two rounds: with many clients a round takes seconds, and a window
    opened while the first rounds are still on their way counts the CPU of rounds it does not
    count (at 128 clients, 2 s of warm-up was about one round). `waits`: the name of a profile of
    PostgreSQL's wait events and Redis's commands during the window (bench/profiling.py);
    `statements`: the name of one of each statement's cost (`--statements`)."""
    from bench import profiling

    assert bench.web is not None and bench.worker is not None
    start = time.monotonic()
    window = [start + warmup, math.inf]
    done: list[tuple[float, Any]] = []
    errors: list[str] = []
    warm = asyncio.Event()
    ended: collections.Counter[int] = collections.Counter()

    async def client(number: int) -> None:
        one = kind(bench)
        try:
            while time.monotonic() < window[1]:
                try:
                    times = await one.round()
                    done.append((time.monotonic(), times))
                    ended[number] += 1
                    if len(ended) == clients and min(ended.values()) >= 2:
                        warm.set()
                except Exception as exc:  # counted, and the client carries on
                    errors.append(repr(exc)[:300])
                    await one.close()
                    one = kind(bench)
                    await asyncio.sleep(0.1)
        finally:
            await one.close()

    tasks = [asyncio.create_task(client(n)) for n in range(clients)]
    await asyncio.sleep(max(0.0, window[0] - time.monotonic()))
    with contextlib.suppress(TimeoutError):  # clients that keep failing: measure what there is
        await asyncio.wait_for(warm.wait(), timeout=60)
    window[0] = time.monotonic()
    window[1] = window[0] + seconds
    sampler = profiling.Waits(bench.dsn, bench.redis_url) if waits else None
    costs = profiling.Statements(bench.dsn) if statements else None
    cpu0 = _cpu_now(bench)
    await asyncio.sleep(max(0.0, window[1] - time.monotonic()))
    cpu1 = _cpu_now(bench)
    if costs is not None:
        costs.stop()
    if sampler is not None:
        await asyncio.to_thread(sampler.stop)
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=180)
    inside = [t for end, t in done if window[0] <= end <= window[1]]
    elapsed = cpu1.pop("at") - cpu0.pop("at")
    enqueued = cpu1.pop("enqueue") - cpu0.pop("enqueue")
    spent = {
        name: stack.cpu_spent(cpu0[name], cpu1[name]) if isinstance(cpu0[name], dict) else cpu1[name] - cpu0[name]
        for name in cpu0
    }
    # The floor's clients publish its runs in the web's place: the web's work in a round.
    spent["web"] += enqueued
    spent["client"] -= enqueued
    service = 1000 * sum(spent[name] for name in SERVICE_PROCESSES) / max(len(inside), 1)
    level_waits = sampler.summary(waits, len(inside)) if sampler is not None and waits else None
    level_statements = costs.summary(statements, len(inside)) if costs is not None and statements else None
    return {
        **({"waits": level_waits} if level_waits else {}),
        **({"statements": level_statements} if level_statements else {}),
        "clients": clients,
        "seconds": round(elapsed, 1),
        "rounds": len(inside),
        "rounds_per_second": round(len(inside) / elapsed, 1),
        "round": report.summary_ms([t.total for t in inside]),
        "pause": report.summary_ms([t.pause for t in inside]),
        "resume": report.summary_ms([t.resume for t in inside]),
        "errors": len(errors),
        "first_errors": errors[:3],
        # CPU spent per completed round, in milliseconds, by each process group; "machine" is every
        # core's busy time, whoever spent it.
        "cpu_ms_per_round": {name: round(1000 * cpu / max(len(inside), 1), 1) for name, cpu in spent.items()},
        # Percent of one core; the machine has os.cpu_count() of them.
        "cpu_percent": {name: round(100 * cpu / elapsed, 0) for name, cpu in spent.items()},
        # The service's CPU per round (web, worker, PostgreSQL, Redis; not the load generator), and
        # the rounds per second the machine's cores could give at that cost if nothing else ran.
        "service_cpu_ms": round(service, 1),
        "cpu_bound_rounds_per_second": round(1000 * (os.cpu_count() or 1) / service, 1) if service else None,
    }


def _cpu_now(bench: Bench) -> dict[str, Any]:
    assert bench.web is not None and bench.worker is not None
    return {
        "web": stack.cpu_seconds(bench.web),
        "worker": stack.cpu_seconds(bench.worker),
        "client": time.process_time(),
        "enqueue": FloorClient.enqueue_cpu,
        "postgres": stack.service_cpu_seconds("postgres"),
        "redis": stack.service_cpu_seconds("redis-server"),
        "machine": stack.machine_busy_seconds(),
        "at": time.monotonic(),
    }


async def measure_load(bench: Bench, levels: list[int], seconds: float, warmup: float) -> dict[str, Any]:
    out = []
    floors = []
    profiles = {}
    for clients in levels:
        log(f"load: {clients} concurrent clients for {seconds:.0f} s (+{warmup:.0f} s warm-up)")
        profiled = bench.args.profile and clients in _profiled_levels(bench.args, levels)
        level = await _profiled(bench, profiles, profiled, f"{clients}-clients", clients, seconds, warmup)
        _log_level(level)
        out.append(level)
        # The stack's floor at the same concurrency, right after: what the same processes do with
        # the gateway's bookkeeping left out, and what that costs them per round.
        log(f"load: the stack floor's rounds, {clients} concurrent clients")
        floor_level = await _profiled(
            bench, profiles, profiled, f"{clients}-clients-floor", clients, seconds, warmup, FloorClient
        )
        _log_level(floor_level)
        floors.append(floor_level)
        if profiled:
            _write_worker_parts(clients, level, floor_level)
    return {"levels": out, "floor_levels": floors, "seconds": seconds, "warmup": warmup, "profiles": profiles}


def _write_worker_parts(clients: int, level: dict[str, Any], floor_level: dict[str, Any]) -> None:
    """Where the worker's CPU per round goes, part by part, for the tool and the stack floor at one
    profiled level: what a round does beyond the stack floor, in ms of the worker's CPU."""
    from bench import profiling

    raws = [profiling.PROFILES / f"worker-{clients}-clients{end}.raw" for end in ("", "-floor")]
    if not all(raw.exists() for raw in raws):
        return
    tool, floor = (profiling.worker_parts(raw) for raw in raws)
    table = profiling.render_worker_parts(
        clients, tool, level["cpu_ms_per_round"]["worker"], floor, floor_level["cpu_ms_per_round"]["worker"]
    )
    (profiling.PROFILES / f"worker-parts-{clients}-clients.txt").write_text(table)
    log(f"  profile: bench/profiles/worker-parts-{clients}-clients.txt")


async def _profiled(
    bench: Bench,
    profiles: dict[str, Any],
    profiled: bool,
    suffix: str,
    clients: int,
    seconds: float,
    warmup: float,
    kind: type[RoundClient | FloorClient] = RoundClient,
) -> dict[str, Any]:
    """A load level; when `profiled`, with py-spy on both process groups for its warm-up and
    measured window, and PostgreSQL's wait events and Redis's commands during the window."""
    from bench import profiling

    spies = []
    if profiled:
        for proc in (bench.web, bench.worker):
            assert proc is not None
            name = f"{proc.name}-{suffix}"
            spies.append((name, profiling.start(proc.pid, name, seconds + warmup)))
        # And the worker's wall clock, every thread waiting or not: where its runs queue (for the
        # GIL, a pooled connection, PostgreSQL).
        assert bench.worker is not None
        name = f"worker-{suffix}-wall"
        spies.append((name, profiling.start(bench.worker.pid, name, seconds + warmup, rate=100, wall=True)))
    level = await load_level(
        bench,
        clients,
        seconds,
        warmup,
        kind,
        waits=f"waits-{suffix}" if profiled else None,
        statements=f"statements-{suffix}" if bench.args.statements else None,
    )
    for name, spy in spies:
        summary = profiling.finish_profile(spy, name, wall=name.endswith("-wall"))
        if summary:
            profiles[name] = {
                "samples": summary["samples"],
                "top_self": summary["self"][:15],
                "top_inclusive": summary["inclusive"][:25],
            }
            log(f"  profile: bench/profiles/{name}.txt")
    for kind_of in ("waits", "statements"):
        if kind_of in level:
            log(f"  profile: bench/profiles/{kind_of}-{suffix}.txt")
    return level


def _profiled_levels(args: argparse.Namespace, levels: list[int]) -> set[int]:
    """The levels --profile samples: those of --profile-clients that are levels, else the busiest."""
    return (set(args.profile_clients) & set(levels)) or {max(levels)}


def _log_level(level: dict[str, Any]) -> None:
    log(
        f"  {level['rounds_per_second']} rounds/s, round p50 {level['round']['p50_ms']} ms "
        f"p95 {level['round']['p95_ms']} ms, errors {level['errors']}, CPU {level['cpu_percent']}, "
        f"service CPU per round {level['service_cpu_ms']} ms (at most {level['cpu_bound_rounds_per_second']} "
        "rounds/s on this machine's cores)"
    )


def measure_embedded(levels: list[int], seconds: float, warmup: float) -> dict[str, Any]:
    from bench import embedded

    server = embedded.Embedded(stack.free_port())
    log(f"embedded default: `make run`'s server in {server.home}")
    out = []
    try:
        for clients in levels:
            log(f"embedded default: {clients} concurrent clients for {seconds:.0f} s (+{warmup:.0f} s warm-up)")
            level = asyncio.run(embedded.level(server, clients, seconds, warmup, TOOL))
            log(
                f"  {level['rounds_per_second']} rounds/s, round p95 {level['round']['p95_ms']} ms, errors "
                f"{level['errors']}, unanswered {level['unanswered']}, 'database is locked' "
                f"{level['database_is_locked']}, enqueued again {level['enqueued_again']}"
            )
            out.append(level)
    finally:
        server.stop()
    return {"levels": out, "seconds": seconds, "warmup": warmup}


# --- 4: waiting calls -------------------------------------------------------------------------------


def _count_running_rounds(dsn: str, since_call_ids_after: float) -> int:
    import psycopg

    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT count(*) FROM mcp_gateway_round r JOIN mcp_gateway_toolcall c ON c.id = r.call_id"
            " WHERE r.state = 'running' AND c.created_at >= to_timestamp(%s)",
            (since_call_ids_after,),
        ).fetchone()[0]


def _open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def _redis_clients(redis_url: str) -> int:
    import redis

    return int(redis.Redis.from_url(redis_url).info("clients")["connected_clients"])


async def measure_waiting(bench: Bench, calls: int, hold: float) -> dict[str, Any]:
    """How many tool calls one web process holds open while their runs are pending.

    What the web process holds per waiting call does not depend on what the worker is doing: the
    round is RUNNING in the database and the view waits on Redis for its end. So the calls are
    made to a fresh web process (one uvicorn worker) whose queue has no consumer yet: every call
    stays open, however many there are, without needing as many worker slots (a worker running
    N sleeping graphs at once needs N threads and N database connections, and measures the
    worker, not the web). Then a worker is started on that queue, runs the N rounds, and every
    held call must come back with its questions.
    """
    queue = f"{bench.queue}-waiting"
    env = stack.service_env(bench.database_url, bench.redis_url, queue, MCP_RUN_WAIT_SECONDS=str(hold + 600))
    web = bench.procs.start(stack.Web(env, workers=1))
    assert isinstance(web, stack.Web)
    url = f"{web.url}/mcp/"
    log(f"waiting calls: warming up a fresh web process (pid {web.pid}) with a worker on its own queue")
    warm_worker = bench.procs.start(stack.Worker(env, bench.args.worker_concurrency, bench.args.worker_pool))
    warm = [Mcp(url, bench.token) for _ in range(4)]
    for _ in range(5):
        await asyncio.gather(*(pause_and_resume(c, TOOL) for c in warm))
    for c in warm:
        await c.close()
    bench.procs.stop(warm_worker)
    await asyncio.sleep(1)
    baseline = stack.memory(web)
    fds0, redis0 = _open_fds(web.pid), _redis_clients(bench.redis_url)

    log(f"waiting calls: opening {calls} tool calls that wait for a run")
    since = time.time() - 1
    clients = [Mcp(url, bench.token, timeout=hold + 900) for _ in range(calls)]
    t0 = time.monotonic()
    tasks = [asyncio.create_task(pause_only(c, TOOL)) for c in clients]
    held, deadline = 0, time.monotonic() + max(120, calls / 10)
    while time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        held = await asyncio.to_thread(_count_running_rounds, bench.dsn, since)
        finished_early = sum(t.done() for t in tasks)
        if held >= calls or finished_early:
            break
    ramp = time.monotonic() - t0
    finished_early = sum(t.done() for t in tasks)
    log(f"waiting calls: {held} held open after {ramp:.1f} s ({finished_early} answered early); holding {hold:.0f} s")
    cpu0, m0 = stack.cpu_seconds(web), time.monotonic()
    await asyncio.sleep(hold)
    cpu1, m1 = stack.cpu_seconds(web), time.monotonic()
    held_memory = stack.memory(web)
    fds1, redis1 = _open_fds(web.pid), _redis_clients(bench.redis_url)
    still_open = sum(not t.done() for t in tasks)

    log("waiting calls: starting a worker on their queue; every held call should now get its questions")
    t1 = time.monotonic()
    worker = bench.procs.start(stack.Worker(env, bench.args.worker_concurrency, bench.args.worker_pool))
    _, pending = await asyncio.wait(tasks, timeout=max(120, calls / 5))
    drain = time.monotonic() - t1
    for task in pending:  # a run that never settles (see the worker's log) must not hang the bench
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    results = [t.exception() or t.result() if not t.cancelled() else "not answered in time" for t in tasks]
    ok = sum(isinstance(r, dict) and "requestState" in r for r in results)
    failures = [repr(r)[:200] for r in results if not isinstance(r, dict)][:3]
    for c in clients:
        await c.close()
    after = stack.memory(web)
    bench.procs.stop(worker)
    bench.procs.stop(web)
    per_call = (held_memory["rss_max_mib"] - baseline["rss_max_mib"]) * 1024 / max(held, 1)
    return {
        "requested": calls,
        "held": min(held, still_open),
        "ramp_seconds": round(ramp, 1),
        "hold_seconds": hold,
        "rss_baseline_mib": baseline["rss_max_mib"],
        "rss_held_mib": held_memory["rss_max_mib"],
        "rss_after_release_mib": after["rss_max_mib"],
        "rss_per_call_kib": round(per_call, 1),
        "threads": {"before": baseline["threads"], "holding": held_memory["threads"], "after": after["threads"]},
        "web_cpu_percent_holding": round(100 * (cpu1 - cpu0) / (m1 - m0), 1),
        "open_fds": {"before": fds0, "holding": fds1},
        "redis_clients": {"before": redis0, "holding": redis1},
        "drain_seconds": round(drain, 1),
        "completed_ok": ok,
        "not_completed": len(results) - ok,
        "failures": failures,
        "method": "calls to a fresh one-process web server whose queue has no consumer until all are held",
    }


# --- 5: paused calls held -------------------------------------------------------------------------------


async def measure_paused(
    bench: Bench, total: int, seeds: int, staff_seeds: int, staff_share: float, rounds: int, page_requests: int
) -> dict[str, Any]:
    assert bench.web is not None and bench.worker is not None
    log("paused calls: clearing what the earlier measurements left")
    pre_cleaned = paused.pre_clean(bench.dsn)
    approvals = paused.approvals_installed()
    pages = [
        ("/admin/mcp_gateway/toolcall/", "ToolCall changelist, all calls"),
        ("/admin/mcp_gateway/toolcall/?status__exact=paused", "ToolCall changelist, paused"),
    ]
    if approvals:
        pages.insert(0, ("/admin/approvals/approvalrequest/", "pending-approval list (approvals app)"))
    else:
        pages.insert(
            0,
            (
                "/admin/mcp_gateway/toolcall/?status__exact=awaiting_staff",
                "approvals app not installed: ToolCall changelist, awaiting staff",
            ),
        )
    # The admin's code and templates load on first use: warm every web process before "before".
    for _ in range(2 * bench.args.web_workers + 2):
        await asyncio.to_thread(paused.measure_admin_pages, bench.web.url, pages, 1)
    await asyncio.sleep(1)
    memory_before = {"web": stack.memory(bench.web), "worker": stack.memory(bench.worker)}

    log(f"paused calls: {seeds} real paused calls and {staff_seeds} staff approvals through HTTP")
    mcp = Mcp(bench.mcp_url, bench.token)
    made = await paused.make_seeds(mcp, seeds, staff_seeds if approvals else 0)
    log(f"paused calls: cloning to {total:,} ({staff_share:.0%} awaiting staff)")
    cloned = paused.grow(bench.dsn, made, total, staff_share)
    analyze_seconds = cloned["analyze_seconds"]
    counts = clone.table_counts(bench.dsn)
    log(f"paused calls: cloned in {cloned['seconds']} s, VACUUM ANALYZE {analyze_seconds:.1f} s; rows {counts}")

    log(f"paused calls: {rounds} rounds and admin lists at {counts['mcp_gateway_toolcall']:,} calls")
    times = [await pause_and_resume(mcp, TOOL) for _ in range(rounds)]
    answer_times = []
    for first in made.firsts[: max(1, min(len(made.firsts), rounds))]:
        from bench.client import answers_for

        t0 = time.perf_counter()
        final = await mcp.call(TOOL, {}, inputResponses=answers_for(first, ANSWER), requestState=first["requestState"])
        answer_times.append(time.perf_counter() - t0)
        assert not final.get("isError") and final.get("structuredContent", {}).get("region") == ANSWER, final
    await mcp.close()
    await asyncio.sleep(1)
    # Before the admin lists render pages of 100 rows, which the warm-up's empty lists did not: the
    # web's growth up to here is what the calls themselves hold.
    memory_before_admin = {"web": stack.memory(bench.web), "worker": stack.memory(bench.worker)}
    admin_pages = await asyncio.to_thread(paused.measure_admin_pages, bench.web.url, pages, page_requests)
    await asyncio.sleep(1)
    memory_after = {"web": stack.memory(bench.web), "worker": stack.memory(bench.worker)}
    return {
        "paused_calls": total,
        "pre_cleaned_calls": pre_cleaned,
        "seeds": len(made.paused_ids) + len(made.staff_ids),
        "seed_paused": len(made.paused_ids),
        "seed_awaiting_staff": len(made.staff_ids),
        "clone": cloned,
        "analyze_seconds": round(analyze_seconds, 1),
        "rows": counts,
        "database_mib": clone.database_size_mib(bench.dsn),
        "round": report.summary_ms([t.total for t in times]),
        "round_pause": report.summary_ms([t.pause for t in times]),
        "round_resume": report.summary_ms([t.resume for t in times]),
        "answer_seed": report.summary_ms(answer_times),
        "admin_pages": admin_pages,
        "memory_before": memory_before,
        "memory_before_admin": memory_before_admin,
        "memory_after": memory_after,
        "method": "a few real paused calls through HTTP, the rest cloned in bulk with SQL (bench/clone.py)",
    }


# --- 6: cleanup -----------------------------------------------------------------------------------------


def measure_cleanup(bench: Bench) -> dict[str, Any]:
    from mcp_gateway.calls.sweep import remove_expired_calls

    expired = paused.expire_everything()
    counts_before = clone.table_counts(bench.dsn)
    log(f"cleanup: remove_expired_calls() over {expired:,} expired calls")
    profiler = _cleanup_profiler(bench)
    t0 = time.perf_counter()
    removed = remove_expired_calls()["calls_removed"]
    seconds = time.perf_counter() - t0
    if profiler is not None:
        from bench import profiling

        profiler.stop()
        profiling.PROFILES.mkdir(exist_ok=True)
        (profiling.PROFILES / "cleanup.txt").write_text(profiler.output_text(unicode=False, color=False))
        log("  profile: bench/profiles/cleanup.txt (pyinstrument)")
    left = clone.table_counts(bench.dsn)
    log(f"cleanup: {removed:,} calls in {seconds:.1f} s; left {left}")
    return {"expired": expired, **paused.sweep_figures(removed, seconds, counts_before, left)}


def _cleanup_profiler(bench: Bench):
    if not bench.args.profile:
        return None
    try:
        from pyinstrument import Profiler
    except ImportError:
        print("pyinstrument is not installed (pip install pyinstrument): no cleanup profile")
        return None
    profiler = Profiler(interval=0.002)
    profiler.start()
    return profiler


# --- goals ---------------------------------------------------------------------------------------------


def _verdict(met: bool | None, full_size: bool = True) -> str:
    if met is None:
        return "not measured"
    if not full_size:
        return "likely met (small size)" if met else "likely not met (small size)"
    return "met" if met else "not met"


def _before_admin(p: dict[str, Any]) -> str:
    """How much of the web's growth was there before the admin lists rendered (runs that predate
    the snapshot have none)."""
    if "memory_before_admin" not in p:
        return ""
    grown = p["memory_before_admin"]["web"]["pss_total_mib"] - p["memory_before"]["web"]["pss_total_mib"]
    return f" (web {grown:+.1f} MiB before the admin lists rendered their pages of 100 rows)"


def _scaling_goals(load: dict[str, Any]) -> list[tuple[str, bool | None, str]]:
    """Throughput that holds as clients grow: the rounds per second at 32 and 128 clients against
    8 clients', 32 clients' against the stack floor's own, and 32 clients' p95 against what
    queueing alone gives (each client waits for the clients ahead of it: clients / rounds per second)."""
    levels = {lv["clients"]: lv for lv in load.get("levels", [])}
    floors = {lv["clients"]: lv for lv in load.get("floor_levels", [])}
    at8, at32, at128, floor32 = levels.get(8), levels.get(32), levels.get(128), floors.get(32)

    def rps(level: dict[str, Any] | None) -> str:
        return f"{level['rounds_per_second']:.1f}" if level else "—"

    out: list[tuple[str, bool | None, str]] = []
    held = [lv for lv in (at32, at128) if lv]
    out.append(
        (
            "rounds/s at 32 and at 128 clients ≥ at 8 clients",
            all(lv["rounds_per_second"] >= at8["rounds_per_second"] for lv in held) if at8 and held else None,
            f"{rps(at32)} and {rps(at128)} against {rps(at8)} rounds/s",
        )
    )
    out.append(
        (
            "rounds/s at 32 clients ≥ 0.9× the stack floor's own",
            at32["rounds_per_second"] >= 0.9 * floor32["rounds_per_second"] if at32 and floor32 else None,
            f"{rps(at32)} against {rps(floor32)} rounds/s"
            + (f" ({at32['rounds_per_second'] / floor32['rounds_per_second']:.2f}×)" if at32 and floor32 else ""),
        )
    )
    bound = 1.5 * 32 / at32["rounds_per_second"] * 1000 if at32 and at32["rounds_per_second"] else None
    out.append(
        (
            "round p95 at 32 clients ≤ 1.5 × (clients / rounds/s)",
            at32["round"]["p95_ms"] <= bound if at32 and bound else None,
            f"p95 {at32['round']['p95_ms']:.0f} ms against {bound:.0f} ms" if at32 and bound else "—",
        )
    )
    return out


def goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The performance goals; at sizes below the goal's own, the verdict says it is an extrapolation."""
    out = []

    def add(goal: str, met: bool | None, value: str, full_size: bool = True) -> None:
        out.append(
            {"goal": goal, "met": met, "full_size": full_size, "verdict": _verdict(met, full_size), "value": value}
        )

    lat = results.get("latency")
    if lat:
        n = lat["floor"]["total"]["n"]
        sf = lat["stack_floor"]
        add(
            "pause-and-resume round ≤ 1.3× the stack floor (p50)",
            sf["ratio_p50"] <= 1.3,
            f"{sf['ratio_p50']:.2f}× ({lat['full_stack']['total']['p50_ms']:.1f} / {sf['total_ms']:.1f} ms, n={n}); "
            f"the stack floor + the round's statements alone: {sf['ratio_with_statements']:.2f}×",
            n >= 200,
        )
    else:
        add("pause-and-resume round ≤ 1.3× the stack floor (p50)", None, "—")
    load = results.get("load", {})
    at32 = next((lv for lv in load.get("levels", []) if lv["clients"] == 32), None)
    floor32 = next((lv for lv in load.get("floor_levels", []) if lv["clients"] == 32), None)
    value = "—"
    if at32:
        value = f"{at32['rounds_per_second']:.1f} rounds/s, p95 {at32['round']['p95_ms']:.0f} ms"
        if floor32:
            value += (
                f"; the stack floor's own: {floor32['rounds_per_second']:.1f} rounds/s, "
                f"{floor32['service_cpu_ms']:.1f} ms of the service's CPU per round against the round's "
                f"{at32['service_cpu_ms']:.1f}"
            )
    add("≥ 100 rounds/s at 32 clients", at32["rounds_per_second"] >= 100 if at32 else None, value)
    for goal, met, value in _scaling_goals(load):
        add(goal, met, value)
    w = results.get("waiting")
    if w:
        add(
            "≥ 1,000 waiting calls per web process",
            w["held"] >= min(1000, w["requested"]) and w["completed_ok"] == w["requested"],
            f"{w['held']:,} of {w['requested']:,} held, {w['completed_ok']:,} completed, "
            f"{w['rss_per_call_kib']:.0f} KiB and one thread each, web CPU {w['web_cpu_percent_holding']:.0f}% "
            "while only holding",
            w["requested"] >= 1000,
        )
    else:
        add("≥ 1,000 waiting calls per web process", None, "—")
    p = results.get("paused")
    if p:
        growth = {
            k: p["memory_after"][k]["pss_total_mib"] - p["memory_before"][k]["pss_total_mib"] for k in ("web", "worker")
        }
        # "Flat": the groups' PSS (RSS double-counts pages the processes share) grows by less than
        # 5 % while the paused calls are in place and used.
        limit = {k: 0.05 * p["memory_before"][k]["pss_total_mib"] for k in ("web", "worker")}
        add(
            "flat memory with 100,000 paused calls",
            all(growth[k] <= limit[k] for k in growth),
            f"PSS web {growth['web']:+.1f} MiB, worker {growth['worker']:+.1f} MiB at {p['paused_calls']:,} calls"
            + _before_admin(p),
            p["paused_calls"] >= 100_000,
        )
    else:
        add("flat memory with 100,000 paused calls", None, "—")
    c = results.get("cleanup")
    if c:
        add(
            "cleanup of 100,000 calls < 60 s",
            c["seconds_per_100k"] < 60,
            f"{c['seconds']:.1f} s for {c['removed']:,}"
            + ("" if c["removed"] >= 100_000 else f" (≈{c['seconds_per_100k']:.0f} s per 100,000)"),
            c["removed"] >= 100_000,
        )
    else:
        add("cleanup of 100,000 calls < 60 s", None, "—")
    return out


# --- main ------------------------------------------------------------------------------------------------


# The full sizes of `make bench`, and the small ones of --quick for a busy machine.
FULL = {
    "calls": 500,
    "warmup": 30,
    "load_seconds": 30.0,
    "load_warmup": 5.0,
    "waiting": 1000,
    "hold": 10.0,
    "paused": 100_000,
    "seeds": 20,
    "staff_seeds": 3,
    "paused_rounds": 100,
    "page_requests": 20,
}
QUICK = {
    "calls": 200,
    "warmup": 20,
    "load_seconds": 8.0,
    "load_warmup": 2.0,
    "waiting": 50,
    "hold": 5.0,
    "paused": 1000,
    "seeds": 5,
    "staff_seeds": 1,
    "paused_rounds": 20,
    "page_requests": 5,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = sizes.parser(
        __doc__,
        FULL,
        QUICK,
        {
            "--calls": (int, "interleaved latency rounds (at least 200 for the goal)"),
            "--warmup": (int, "latency rounds not counted"),
            "--load-seconds": (float, "measured seconds per load level"),
            "--load-warmup": (float, "seconds of load before each measured window"),
            "--waiting": (int, "waiting calls held by one web process"),
            "--hold": (float, "seconds the waiting calls are held before release"),
            "--paused": (int, "paused calls in the database"),
            "--seeds": (int, "real paused calls made through HTTP before cloning"),
            "--staff-seeds": (int, "real staff approvals (digital_twin) before cloning"),
            "--paused-rounds": (int, "rounds timed with the paused calls in place"),
            "--page-requests": (int, "GETs of each admin page"),
        },
        "small sizes for a busy machine (each size flag says which)",
    )
    p.add_argument("--clients", default="1,8,32,128", help="concurrent clients of the load levels (default 1,8,32,128)")
    p.add_argument(
        "--embedded-clients",
        default="1,8,32",
        help="concurrent clients of the embedded default's levels (default 1,8,32; past 64 waiting runs it "
        "answers 503 by design, EMBEDDED_RUN_QUEUE_MAX)",
    )
    p.add_argument("--staff-share", type=float, default=0.1, help="share of the paused calls awaiting staff")
    p.add_argument(
        "--only",
        default="latency,pages,load,embedded,waiting,paused,cleanup",
        help="comma-separated measurements to run (cleanup needs paused)",
    )
    p.add_argument("--web-workers", type=int, default=2, help="uvicorn workers of the main web process (Procfile: 2)")
    p.add_argument(
        "--worker-concurrency", type=int, default=None, help="Celery worker concurrency (default: the settings', 8)"
    )
    p.add_argument(
        "--worker-pool", default=None, help="Celery pool: threads, prefork, ... (default: the settings', threads)"
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="py-spy the web and worker groups during the load levels of --profile-clients, pyinstrument the "
        "cleanup (bench/profiles/)",
    )
    p.add_argument(
        "--profile-clients",
        type=lambda text: [int(n) for n in text.split(",") if n.strip()],
        default=[32],
        help="the load levels --profile samples, comma-separated (default 32; the busiest level when none is "
        "one of --clients): 8,32 compares two levels of one run",
    )
    p.add_argument(
        "--statements",
        action="store_true",
        help="run on a PostgreSQL cluster of the bench's own with pg_stat_statements loaded, and write each "
        "load level's cost per statement (bench/profiles/statements-*.txt)",
    )
    p.add_argument("--database", default="hitl_bench", help="the bench database (dropped and created)")
    p.add_argument("--keep-db", action="store_true", help="leave the bench database in place at the end")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where results.json/.md/.png go (default bench/)",
    )
    args = p.parse_args(argv)
    sizes.fill_sizes(args, FULL, QUICK)
    args.only = {s.strip() for s in args.only.split(",") if s.strip()}
    if args.out is None:
        args.out = ROOT / "bench"
    return args


def postgres_headroom(bench: Bench) -> dict[str, int]:
    """PostgreSQL's max_connections is shared with everything else on the machine: say how much is left."""
    import psycopg

    with psycopg.connect(bench.dsn) as conn:
        limit = int(conn.execute("SHOW max_connections").fetchone()[0])
        used = conn.execute("SELECT count(*) FROM pg_stat_activity").fetchone()[0]
    if limit - used < 60:
        log(f"WARNING: PostgreSQL has {limit - used} of {limit} connections free; the bench needs about 40")
    return {"max_connections": limit, "in_use_at_start": used}


def _raise_on_signal(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _raise_on_signal)
    signal.signal(signal.SIGHUP, _raise_on_signal)
    results: dict[str, Any] = {"machine": report.machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    private = _statements_cluster() if args.statements else None
    try:
        return _run(args, results)
    finally:
        if private is not None:
            private.remove()


def _statements_cluster() -> stack.PrivatePostgres:
    """A PostgreSQL cluster of the bench's own with pg_stat_statements loaded (the machine's shared
    server does not load it, and loading it needs a restart), which the bench then uses. The
    extension is made in template1, so the bench database, created from it, has it."""
    import psycopg

    private = stack.PrivatePostgres("shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track=all")
    log(f"starting a PostgreSQL cluster of the bench's own with pg_stat_statements ({private.root})")
    private.start()
    with psycopg.connect(private.url("template1"), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION pg_stat_statements")
    os.environ["DATABASE_URL"] = private.url("postgres")
    return private


def _run(args: argparse.Namespace, results: dict[str, Any]) -> int:
    bench = setup(args)
    results["config"] = {
        "web_workers": args.web_workers,
        "worker_concurrency": args.worker_concurrency,
        "worker_pool": args.worker_pool,
        "database": args.database,
        "sizes": f"{args.calls} latency rounds, {args.load_seconds:.0f} s per load level, "
        f"{args.waiting} waiting, {args.paused:,} paused",
        "args": {
            k: (sorted(v) if isinstance(v, set) else str(v) if isinstance(v, Path) else v)
            for k, v in vars(args).items()
        },
    }
    results["postgres_connections"] = postgres_headroom(bench)
    try:
        if "waiting" in args.only:
            # First, on processes of its own: the main web and worker would hold database connections
            # the waiting section's worker needs (PostgreSQL's max_connections is shared).
            results["waiting"] = asyncio.run(measure_waiting(bench, args.waiting, args.hold))
        start_services(bench)
        asyncio.run(warm_up(bench, 40))
        if "latency" in args.only:
            results["latency"] = asyncio.run(measure_latency(bench, args.calls, args.warmup))
        if "pages" in args.only:
            results["answer_page"] = asyncio.run(measure_answer_page(bench, args.calls, args.warmup))
        if "load" in args.only:
            levels = [int(c) for c in args.clients.split(",")]
            results["load"] = asyncio.run(measure_load(bench, levels, args.load_seconds, args.load_warmup))
        if "embedded" in args.only:
            levels = [int(c) for c in args.embedded_clients.split(",")]
            results["embedded"] = measure_embedded(levels, args.load_seconds, args.load_warmup)
        if "paused" in args.only:
            results["paused"] = asyncio.run(
                measure_paused(
                    bench,
                    args.paused,
                    args.seeds,
                    args.staff_seeds,
                    args.staff_share,
                    args.paused_rounds,
                    args.page_requests,
                )
            )
            if "cleanup" in args.only:
                results["cleanup"] = measure_cleanup(bench)
    finally:
        bench.procs.stop_all()
        _close(bench)
    results["goals"] = goals(results)
    results["machine"]["loadavg_at_end"] = os.getloadavg()
    results["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    report.print_table(results)
    args.out.mkdir(parents=True, exist_ok=True)
    report.write(results, args.out)
    print(f"wrote {args.out / 'results.json'}, results.md and results.png")
    print("Numbers from a machine that is busy with other work are noisy: compare runs on a quiet machine.")
    return 0


def _close(bench: Bench) -> None:
    """Close this process's connections, delete the bench queues from Redis, drop the database."""
    try:
        from django.db import connections

        from graph_runtime.checkpointer import close_pools

        close_pools()
        connections.close_all()
    except Exception as exc:
        print(f"could not close connections: {exc}", file=sys.stderr)
    try:
        import redis

        r = redis.Redis.from_url(bench.redis_url)
        for queue in (bench.queue, f"{bench.queue}-waiting"):
            r.delete(queue, f"_kombu.binding.{queue}")
    except Exception as exc:
        print(f"could not delete the bench queues: {exc}", file=sys.stderr)
    if not bench.args.keep_db:
        try:
            import psycopg
            from psycopg import sql

            from bench.stack import urlsplit, urlunsplit

            parts = urlsplit(bench.database_url)
            admin = urlunsplit((parts.scheme, parts.netloc, "/postgres", parts.query, ""))
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(bench.args.database))
                )
        except Exception as exc:
            print(f"could not drop the bench database: {exc}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
