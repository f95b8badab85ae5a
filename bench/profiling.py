"""py-spy profiles of the web and worker process groups while the bench loads them.

`bench/run.py --profile` samples both groups (every process, with --subprocesses) during the
load level with the most clients, and writes into bench/profiles/:
  <name>.raw        collapsed stacks ("frame;frame;... count"), for flamegraph.pl or speedscope
  <name>.txt        the functions with the largest share of samples, inclusive and self
Samples are taken with --gil: only threads holding the GIL count, so the shares are CPU spent in
Python, not time spent waiting on PostgreSQL or Redis.

It also samples the worker's wall clock (--idle: every thread, waiting or not) during the latency
loop, one round at a time, and keeps the stacks under the round's run: worker-round-wall.txt says
where a run's time goes, waits on PostgreSQL, Redis and other threads included.
"""

from __future__ import annotations

import collections
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

PROFILES = Path(__file__).resolve().parent / "profiles"


def py_spy() -> str | None:
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if here.exists() else shutil.which("py-spy")


def start(
    pid: int, name: str, seconds: float | None, rate: int = 250, *, wall: bool = False
) -> subprocess.Popen | None:
    """Sample `pid` and its children for `seconds` (None: until `finish_profile(..., stop=True)`): CPU in
    Python (--gil), or with `wall` the wall clock of every thread (--idle)."""
    exe = py_spy()
    if exe is None:
        print("py-spy is not installed (pip install py-spy): no profile")
        return None
    PROFILES.mkdir(exist_ok=True)
    duration = [] if seconds is None else ["--duration", str(max(1, int(seconds)))]
    return subprocess.Popen(
        [
            exe,
            "record",
            "--pid",
            str(pid),
            "--subprocesses",
            "--idle" if wall else "--gil",
            "--nonblocking",
            "--rate",
            str(rate),
            *duration,
            "--format",
            "raw",
            "--output",
            str(PROFILES / f"{name}.raw"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def finish_profile(
    proc: subprocess.Popen | None,
    name: str,
    timeout: float = 60,
    *,
    stop: bool = False,
    under: str | None = None,
    wall: bool = False,
) -> dict | None:
    """Wait for the profile (`stop`: end it now; py-spy writes what it has on SIGINT) and summarise
    it, or only the stacks through the frame `under` (a wall-clock profile of one kind of work)."""
    if proc is None:
        return None
    if stop:
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return None
    raw = PROFILES / f"{name}.raw"
    if not raw.exists():
        return None
    summary = summarize(raw, under=under) | {"wall": wall or under is not None}
    (PROFILES / f"{name}.txt").write_text(render(summary))
    return summary


_BORING = re.compile(r"^(process \d+|<module>|_run_code|_run_module_as_main|Thread\.|_worker |_bootstrap)")


def _stacks(raw: Path) -> Iterator[tuple[list[str], int]]:
    """Each stack of a collapsed py-spy profile, its frames without line numbers, and its samples."""
    for line in raw.read_text().splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if stack and count.isdigit():
            yield [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")], int(count)


def summarize(raw: Path, top: int = 40, *, under: str | None = None) -> dict:
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for frames, n in _stacks(raw):
        if under is not None:
            if under not in frames:
                continue
            frames = frames[frames.index(under) :]
        total += n
        for frame in set(frames):
            inclusive[frame] += n
        own[frames[-1]] += n

    def share(counter: collections.Counter[str]) -> list[tuple[str, float]]:
        keep = [(f, c) for f, c in counter.most_common() if not _BORING.match(f)]
        return [(f, round(100 * c / max(total, 1), 1)) for f, c in keep[:top]]

    return {"samples": total, "under": under, "inclusive": share(inclusive), "self": share(own)}


def render(summary: dict) -> str:
    if summary.get("under"):
        what = f"py-spy --idle: wall clock of every thread, only the stacks through {summary['under']}"
    elif summary.get("wall"):
        what = "py-spy --idle: wall clock of every thread, waiting or not"
    else:
        what = "py-spy --gil: CPU in Python"
    lines = [f"{summary['samples']} samples ({what})", "", "inclusive:"]
    lines += [f"  {pct:5.1f}%  {frame}" for frame, pct in summary["inclusive"]]
    lines += ["", "self:"]
    lines += [f"  {pct:5.1f}%  {frame}" for frame, pct in summary["self"]]
    return "\n".join(lines) + "\n"


# The parts of a worker's round, each named by the frames its stacks run under; a stack counts
# for the first part one of whose frames it has (the most specific first), so a statement made
# inside the run counts for the statement, and a node LangGraph runs on the task's own thread for
# the graph. Of the parts only the lease, the record, the cancel flag, the questions, the run's
# observation and the round's bookkeeping are the tool's alone; the stack floor (bench/tasks.py)
# has the others too.
WORKER_PARTS: list[tuple[str, tuple[str, ...]]] = [
    ("the end published to Redis", ("(mcp_gateway/calls/waiter.py)", "_publish (bench/tasks.py)")),
    ("the lease taken, with the round and call", ("take_lease (mcp_gateway/calls/store.py)",)),
    ("the round recorded, the cancel flag read under the call's lock", ("_record (mcp_gateway/calls/runs.py)",)),
    ("the cancel flag read between steps", ("cancel_requested (mcp_gateway/calls/store.py)",)),
    ("the questions built", ("build_round (mcp_gateway/calls/questions.py)",)),
    (
        "the run's log context, span, metrics and heartbeat",
        ("(mcp_gateway/observe.py)", "(graph_runtime/heartbeat.py)"),
    ),
    (
        "checkpoints read and written, the lease fence with them",
        ("(postgres/__init__.py)", "(graph_runtime/checkpointer.py)"),
    ),
    ("the graph's nodes", ("run_with_retry ",)),
    ("LangGraph's loop (runner.run's stream, the floor's invoke)", ("Pregel.stream ", "Pregel.invoke ")),
    ("the rest of the round's bookkeeping (mcp_gateway/calls/runs.py)", ("(mcp_gateway/calls/runs.py)",)),
    ("the rest of the stack floor's task (bench/tasks.py)", ("floor_run (bench/tasks.py)",)),
    ("Celery's task wrapper", ("apply_target (celery/",)),
    ("Celery's consumer: messages taken and acknowledged", ("asynloop (celery/",)),
]
OTHER_PART = "the rest (idle pool threads, stacks py-spy could not unwind)"


def worker_parts(raw: Path) -> dict[str, float]:
    """Each part's share (%) of a worker profile's samples (`WORKER_PARTS`)."""
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for frames, n in _stacks(raw):
        stack = ";".join(frames[1:])  # after the process's name
        part = next((name for name, marks in WORKER_PARTS if any(m in stack for m in marks)), OTHER_PART)
        counts[part] += n
        total += n
    return {name: 100 * counts[name] / max(total, 1) for name, _ in [*WORKER_PARTS, (OTHER_PART, ())]}


def render_worker_parts(
    clients: int, tool: dict[str, float], tool_ms: float, floor: dict[str, float], floor_ms: float
) -> str:
    """A table of the worker's CPU per round, part by part, for the tool's rounds and the stack
    floor's at one level: each part's share of the profile's samples times the worker's CPU per
    round measured over the window."""
    lines = [
        f"The worker's CPU per round at {clients} clients, by part (py-spy --gil shares of "
        f"worker-{clients}-clients.raw and -floor.raw, times the worker's CPU per round)",
        "",
        f"{'ms a round':>10s} {'floor':>7s}  part",
    ]
    for name in tool:
        lines.append(f"{tool[name] * tool_ms / 100:10.2f} {floor[name] * floor_ms / 100:7.2f}  {name}")
    lines.append(f"{tool_ms:10.2f} {floor_ms:7.2f}  the worker's CPU per round")
    return "\n".join(lines) + "\n"


class Waits:
    """What PostgreSQL's backends of the bench database and Redis do during a load level, sampled
    beside py-spy: `pg_stat_activity` every `interval` seconds (each backend's state and wait event,
    and the statement it runs or waits in), PostgreSQL's transactions and rows (`pg_stat_database`),
    and Redis's commands (`INFO commandstats`) between start and stop, so per round. The database's
    counters are the whole database's: they hold the sampler's own transactions and the rows it
    reads from `pg_stat_activity` (one per backend of the server, each sample)."""

    def __init__(self, dsn: str, redis_url: str, interval: float = 0.02):
        import threading

        self.dsn, self.redis_url, self.interval = dsn, redis_url, interval
        self.samples = 0
        self.waits: collections.Counter[tuple[str, str, str]] = collections.Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="pg-waits", daemon=True)
        self._before = self._counters()
        self._thread.start()

    def _counters(self) -> dict[str, dict[str, float]]:
        import psycopg
        import redis

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT xact_commit, xact_rollback, tup_returned, tup_fetched, tup_inserted, tup_updated, "
                "tup_deleted, blks_hit, blks_read FROM pg_stat_database WHERE datname = current_database()"
            ).fetchone()
        names = ("commits", "rollbacks", "returned", "fetched", "inserted", "updated", "deleted", "hit", "read")
        stats = redis.Redis.from_url(self.redis_url).info("commandstats")
        return {
            "postgres": dict(zip(names, row, strict=True)),
            "redis": {k.removeprefix("cmdstat_"): v["calls"] for k, v in stats.items()},
            "redis_usec": {k.removeprefix("cmdstat_"): v["usec"] for k, v in stats.items()},
        }

    def _sample(self) -> None:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            me = conn.info.backend_pid
            while not self._stop.wait(self.interval):
                rows = conn.execute(
                    "SELECT state, coalesce(wait_event_type || ':' || wait_event, 'CPU'), left(query, 60) "
                    "FROM pg_stat_activity WHERE datname = current_database() AND pid <> %s "
                    "AND state IS NOT NULL",
                    (me,),
                ).fetchall()
                self.samples += 1
                for state, wait, query in rows:
                    # An idle backend's query is its last one: only the busy ones' say what waits.
                    self.waits[(state, wait, " ".join(query.split()) if state != "idle" else "")] += 1

    def stop(self) -> None:
        """Stop sampling and read the counters: at the measured window's end."""
        self._stop.set()
        self._thread.join()
        self._after = self._counters()

    def summary(self, name: str, rounds: int) -> dict:
        """Write bench/profiles/<name>.txt and return the summary, per round of the window."""
        after = self._after
        per_round = max(rounds, 1)

        def delta(kind: str) -> dict[str, float]:
            before = self._before[kind]
            return {k: v - before.get(k, 0) for k, v in after[kind].items() if v - before.get(k, 0)}

        redis_calls = delta("redis")
        redis_usec = delta("redis_usec")
        busy = [(k, n) for k, n in self.waits.most_common() if k[0] != "idle"]
        summary = {
            "samples": self.samples,
            "rounds": rounds,
            "postgres_per_round": {k: round(v / per_round, 2) for k, v in delta("postgres").items()},
            "redis_calls_per_round": {
                k: round(v / per_round, 2) for k, v in sorted(redis_calls.items(), key=lambda kv: -kv[1])
            },
            "redis_usec_per_round": round(sum(redis_usec.values()) / per_round, 1),
            "backends": {
                "idle": round(sum(n for k, n in self.waits.items() if k[0] == "idle") / max(self.samples, 1), 1),
                "busy": round(sum(n for _, n in busy) / max(self.samples, 1), 2),
            },
            # Busy backends by what they wait for (CPU: not waiting), in backends on average.
            "busy_by_wait": [
                (state, wait, query, round(n / max(self.samples, 1), 3)) for (state, wait, query), n in busy[:25]
            ],
        }
        PROFILES.mkdir(exist_ok=True)
        lines = [
            f"{self.samples} samples of pg_stat_activity (every {self.interval * 1000:.0f} ms), {rounds} rounds",
            f"backends on average: idle {summary['backends']['idle']}, busy {summary['backends']['busy']}",
            "",
            "PostgreSQL per round (pg_stat_database, the sampler's own reads included): "
            + ", ".join(f"{k} {v}" for k, v in summary["postgres_per_round"].items()),
            f"Redis per round (INFO commandstats, {summary['redis_usec_per_round']} µs of Redis's time): "
            + ", ".join(f"{k} {v}" for k, v in summary["redis_calls_per_round"].items()),
            "",
            "busy backends by state, wait event (CPU: none) and statement, on average:",
        ]
        lines += [f"  {n:6.3f}  {state:<20} {wait:<28} {query}" for state, wait, query, n in summary["busy_by_wait"]]
        (PROFILES / f"{name}.txt").write_text("\n".join(lines) + "\n")
        return summary


class Statements:
    """What each statement of the bench database cost during a load level, from PostgreSQL's
    `pg_stat_statements` (`--statements` runs the bench on a PostgreSQL cluster of its own with it
    loaded): calls, rows, execution time and shared blocks touched, between start and stop, so per
    round. `pg_stat_database` says how many rows a round reads; this says which statement reads them."""

    FIELDS = ("calls", "rows", "ms", "blocks")

    def __init__(self, dsn: str):
        self.dsn = dsn
        self._before = self._counters()

    def _counters(self) -> dict[int, dict]:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT queryid, query, calls, rows, total_exec_time, shared_blks_hit + shared_blks_read "
                "FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
            ).fetchall()
        return {
            queryid: {"query": " ".join(query.split()), **dict(zip(self.FIELDS, numbers, strict=True))}
            for queryid, query, *numbers in rows
        }

    def stop(self) -> None:
        """Read the counters: at the measured window's end."""
        self._after = self._counters()

    def summary(self, name: str, rounds: int, top: int = 30) -> dict:
        """Write bench/profiles/<name>.txt and return the statements, per round of the window, the
        costliest first."""
        statements = statement_costs(self._before, self._after, rounds)
        totals = {k: round(sum(s[k] for s in statements), 2) for k in self.FIELDS}
        PROFILES.mkdir(exist_ok=True)
        lines = [
            f"pg_stat_statements over {rounds} rounds, per round: {totals['calls']} statements, "
            f"{totals['rows']} rows, {totals['ms']} ms executing, {totals['blocks']} shared blocks",
            "",
            f"{'calls':>7} {'rows':>8} {'ms':>7} {'blocks':>8}  statement",
        ]
        lines += [
            f"{s['calls']:7.2f} {s['rows']:8.2f} {s['ms']:7.3f} {s['blocks']:8.2f}  {s['query'][:400]}"
            for s in statements[:top]
        ]
        (PROFILES / f"{name}.txt").write_text("\n".join(lines) + "\n")
        return {"totals": totals, "statements": statements[:top]}


def statement_costs(before: dict[int, dict], after: dict[int, dict], rounds: int) -> list[dict]:
    """Each statement's calls, rows, time and blocks between two readings of pg_stat_statements
    (by queryid), per round, the costliest in time first; a statement not run in between is left out."""
    per_round = max(rounds, 1)
    statements = []
    for queryid, now in after.items():
        then = before.get(queryid, {})
        spent = {k: now[k] - then.get(k, 0) for k in Statements.FIELDS}
        if spent["calls"]:
            statements.append({"query": now["query"], **{k: round(v / per_round, 3) for k, v in spent.items()}})
    return sorted(statements, key=lambda s: -s["ms"])
