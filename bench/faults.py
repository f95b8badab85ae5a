"""`make bench-faults`: how long a worker's SIGKILL delays the calls in flight, at default settings.

The production processes on 127.0.0.1 (uvicorn with 2 workers, one Celery worker, Celery beat,
PostgreSQL, Redis), with the settings' defaults for everything that governs recovery
(RUN_LEASE_SECONDS, STALLED_CHECK_SECONDS, MCP_RUN_WAIT_SECONDS, CELERY_VISIBILITY_TIMEOUT,
WORKER_CONCURRENCY). 100 clients each make one call of `slow_effect`, a run of --seconds (a model
call) that records one side effect under the call's tag; once the worker's threads are all mid-run,
the worker is killed with SIGKILL and a new one is started --restart-after seconds later, as a
process manager would. Each client collects its call's outcome as an MCP client does (coming back
with the requestState while the answer is "still running").

Reported: the time from the SIGKILL to the last call completing, whether every call completed, and
whether any side effect happened twice. Written to bench/faults.json and printed.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hitl REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/faults.py
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench import stack  # noqa: E402
from bench.client import META, MODERN  # noqa: E402

TOOL = "slow_effect"
# The settings that govern recovery, at their defaults (hitl_project/settings.py).
DEFAULTS = {
    "RUN_LEASE_SECONDS": 30,
    "STALLED_CHECK_SECONDS": 10,
    "MCP_RUN_WAIT_SECONDS": 60,
    "CELERY_VISIBILITY_TIMEOUT": 3600,
    "WORKER_CONCURRENCY": 8,
}


class Beat(stack.Process):
    """Celery beat, as the Procfile runs it, with its schedule file in a directory of its own."""

    name = "beat"

    def start(self, timeout: float = 90) -> Beat:
        schedule = Path(tempfile.mkdtemp(prefix="hitl-beat-")) / "schedule"
        self._spawn([sys.executable, "-m", "celery", "-A", "hitl_project", "beat", "-s", str(schedule), "-l", "INFO"])
        time.sleep(2)
        if not self.alive():
            raise RuntimeError(f"beat exited: see {self.log}")
        return self


def call_until_done(url: str, token: str, arguments: dict, deadline: float) -> dict:
    """One tools/call, collected to its end as an MCP client does."""
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": TOOL,
    }
    params: dict = {"name": TOOL, "arguments": arguments, "_meta": META}
    with httpx.Client(timeout=120) as http:
        while time.monotonic() < deadline:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
            result = http.post(url, json=body, headers=headers).json()["result"]
            if "requestState" not in result or "inputRequests" in result:
                return result
            params = {**params, "requestState": result["requestState"]}  # still running: come back
            time.sleep(0.25)
    raise TimeoutError("the call never completed")


def run(args: argparse.Namespace) -> dict:
    base = os.environ.get("DATABASE_URL", "")
    redis_url = os.environ.get("REDIS_URL", "")
    if not redis_url:
        raise SystemExit("REDIS_URL is needed (make bench-faults sets it)")
    database_url = stack.bench_database_url(base, args.database)
    stack.recreate_database(database_url)
    queue = f"hitl-faults-{uuid.uuid4().hex[:8]}"
    env = stack.service_env(database_url, redis_url, queue)
    for name in DEFAULTS:  # the defaults are what is measured
        env.pop(name, None)
    stack.migrate(env)
    token = stack.mcp_token(env)
    signals = Path(tempfile.mkdtemp(prefix="hitl-faults-"))
    procs = stack.Stack()
    try:
        web = procs.start(stack.Web(env, workers=2))
        procs.start(Beat(env))
        worker = procs.start(stack.Worker(env, concurrency=args.concurrency, pool="threads"))
        url = f"{web.url}/mcp/"  # type: ignore[attr-defined]
        tags = [f"call-{n:03d}" for n in range(args.calls)]
        done_at: dict[str, float] = {}
        outcomes: dict[str, dict] = {}
        deadline = time.monotonic() + 600

        def one(tag: str) -> None:
            arguments = {"signal_dir": str(signals), "tag": tag, "seconds": args.seconds}
            outcomes[tag] = call_until_done(url, token, arguments, deadline)
            done_at[tag] = time.monotonic()

        with ThreadPoolExecutor(args.calls) as pool:
            futures = [pool.submit(one, tag) for tag in tags]
            started = signals / "started"
            while not (started.exists() and len(started.read_text().splitlines()) >= args.concurrency):
                time.sleep(0.05)
            time.sleep(args.seconds / 2)  # every thread of the worker is mid-run
            killed_at = time.monotonic()
            os.killpg(worker.pid, signal.SIGKILL)
            in_flight = args.calls - len(done_at)
            threading.Event().wait(args.restart_after)
            procs.start(stack.Worker(env, concurrency=args.concurrency, pool="threads"))
            for future in futures:
                future.result()

        effects = Counter((signals / "effects").read_text().splitlines())
        completed = [t for t in tags if (outcomes.get(t) or {}).get("structuredContent", {}).get("done") is True]
        return {
            "calls": args.calls,
            "in_flight_at_kill": in_flight,
            "run_seconds": args.seconds,
            "worker_concurrency": args.concurrency,
            "restart_after_seconds": args.restart_after,
            "completed": len(completed),
            "effects_twice": sum(1 for n in effects.values() if n > 1),
            "effects_missing": sum(1 for t in tags if effects[t] == 0),
            "kill_to_last_completion_seconds": round(max(done_at.values()) - killed_at, 1),
            "settings": DEFAULTS,
        }
    finally:
        procs.stop_all()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=100, help="calls in flight (default 100)")
    p.add_argument("--seconds", type=float, default=2.0, help="how long each run takes (default 2)")
    p.add_argument("--concurrency", type=int, default=8, help="the worker's threads (WORKER_CONCURRENCY's default)")
    p.add_argument("--restart-after", type=float, default=5.0, help="seconds from the kill to the new worker")
    p.add_argument("--database", default="hitl_bench_faults", help="the bench database (dropped and created)")
    args = p.parse_args(argv)
    report = run(args)
    (stack.BENCH / "faults.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    ok = report["completed"] == args.calls and not report["effects_twice"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
