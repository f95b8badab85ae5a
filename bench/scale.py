"""`make bench-scale`: the service with many paused calls stored, at growing sizes.

A few real paused calls (and calls waiting for staff) are made through HTTP, then copied in bulk
(bench/paused.py, bench/clone.py) to each size in turn, 1,000, 100,000 and 1,000,000 by default. At
each size, with the production processes (uvicorn with 2 workers, a Celery worker) running:

  rounds     whole rounds of fresh calls (call → input_required → answer → result): p50/p99 of the
             round, and p50 of its first call
  answers    real paused seed calls, made before the copies, answered over HTTP: p50/p99
  admin      every changelist filter of the ToolCall and ApprovalRequest admins, a page of 100,
             logged in as staff: p50 of several loads
  metrics    the /metrics scrape
  storage    pg_total_relation_size of each table the calls use, per paused call

Then, at the largest size: the web and worker groups' memory (RSS and PSS) sampled under steady
load (--memory-minutes), and the sweep (mcp_gateway.calls.sweep, in a process of its own, as beat runs it)
of every call, expired at once, timed while a client keeps making rounds: the round p99 during the
sweep against the one measured at that size without it.

Writes bench/scale.json and bench/scale.md.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hitl REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/scale.py --quick
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import clone, paused, report, run, sizes, stack  # noqa: E402
from bench.client import Mcp, answers_for, pause_and_resume  # noqa: E402

TOOL = paused.TOOL
ANSWER = run.ANSWER

FULL = {
    "sizes": "1000,100000,1000000",
    "rounds": 200,
    "answers": 20,
    "page_requests": 5,
    "memory_minutes": 30.0,
    "seeds": 20,
    "staff_seeds": 3,
}
QUICK = {
    "sizes": "200,2000",
    "rounds": 40,
    "answers": 5,
    "page_requests": 3,
    "memory_minutes": 1.0,
    "seeds": 5,
    "staff_seeds": 1,
}

# The sweep, as beat's task runs it, in a process of its own (the service's settings, the bench's
# database), printing what it removed and how long it took.
SWEEP = """
import json, time, django
django.setup()
from mcp_gateway.calls.sweep import remove_expired_calls
t0 = time.perf_counter()
removed = remove_expired_calls()["calls_removed"]
print(json.dumps({"removed": removed, "seconds": time.perf_counter() - t0}))
"""


def log(message: str) -> None:
    run.log(message)


# --- what the admin offers ---------------------------------------------------------------------------------


def admin_pages() -> list[tuple[str, str]]:
    """Each changelist with nothing chosen, then with one choice of each of its list_filter (every
    choice of the approvals' queue: each is a different query)."""
    from mcp_gateway.models import ToolCall

    pages = [
        ("/admin/mcp_gateway/toolcall/", "tool calls"),
        *(
            (f"/admin/mcp_gateway/toolcall/?status__exact={s}", f"tool calls, status {s}")
            for s in (ToolCall.Status.PAUSED, ToolCall.Status.AWAITING_STAFF, ToolCall.Status.FINISHED)
        ),
        (f"/admin/mcp_gateway/toolcall/?tool_name={TOOL}", "tool calls, tool"),
        ("/admin/mcp_gateway/toolcall/?task_hash__isempty=1", "tool calls, not tasks"),
        ("/admin/mcp_gateway/toolcall/?task_hash__isempty=0", "tool calls, tasks"),
    ]
    if not paused.approvals_installed():
        return pages
    from approvals.models import ApprovalRequest

    first = ApprovalRequest.objects.order_by().first()
    tool = first.tool_calls[0]["name"] if first is not None and first.tool_calls else "send_contact_message"
    base = "/admin/approvals/approvalrequest/"
    return [
        (base, "approvals, pending (the queue)"),
        *((f"{base}?queue={q}", f"approvals, {q}") for q in ("decided", "expired", "withdrawn", "all")),
        (f"{base}?tool={tool}", "approvals, tool"),
        *((f"{base}?waiting={age}", f"approvals, waiting {age}") for age in ("1h", "1d", "3d")),
        (f"{base}?policy=-", "approvals, policy"),
        *pages,
    ]


# --- one size --------------------------------------------------------------------------------------------


def _ms(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50_ms": round(report.percentile(values, 50) * 1000, 2),
        "p99_ms": round(report.percentile(values, 99) * 1000, 2),
        "max_ms": round(max(values) * 1000, 2) if values else float("nan"),
    }


async def answer_seeds(mcp: Mcp, firsts: list[dict[str, Any]]) -> list[float]:
    """Answer real paused calls, each the answer-round of a call that waited among the others."""
    times = []
    for first in firsts:
        t0 = time.perf_counter()
        final = await mcp.call(TOOL, {}, inputResponses=answers_for(first, ANSWER), requestState=first["requestState"])
        times.append(time.perf_counter() - t0)
        assert not final.get("isError") and final.get("structuredContent", {}).get("region") == ANSWER, final
    return times


def scrape_metrics(url: str, requests: int) -> dict[str, Any]:
    import httpx

    times = []
    with httpx.Client(timeout=120) as http:
        http.get(f"{url}/metrics").raise_for_status()
        for _ in range(requests):
            t0 = time.perf_counter()
            r = http.get(f"{url}/metrics")
            times.append(time.perf_counter() - t0)
            r.raise_for_status()
    return {**report.summary_ms(times), "bytes": len(r.content)}


def storage(dsn: str) -> dict[str, Any]:
    """pg_total_relation_size (rows, indexes, TOAST) of each table a paused call uses, and per call."""
    import psycopg

    counts = clone.table_counts(dsn)
    with psycopg.connect(dsn) as conn:
        sizes = {table: conn.execute("SELECT pg_total_relation_size(%s)", (table,)).fetchone()[0] for table in counts}
    calls = max(counts["mcp_gateway_toolcall"], 1)
    return {
        "calls": counts["mcp_gateway_toolcall"],
        "rows": counts,
        "table_bytes": sizes,
        "bytes_per_call": round(sum(sizes.values()) / calls),
        "bytes_per_call_by_table": {t: round(b / calls) for t, b in sizes.items()},
        "database_mib": clone.database_size_mib(dsn),
    }


async def measure_size(bench: run.Bench, mcp: Mcp, firsts: list[dict[str, Any]], size: int) -> dict[str, Any]:
    args = bench.args
    assert bench.web is not None
    log(f"{size:,}: {args.rounds} rounds of fresh calls")
    times = [await pause_and_resume(mcp, TOOL) for _ in range(args.rounds)]
    log(f"{size:,}: answering {len(firsts)} real paused calls")
    answered = await answer_seeds(mcp, firsts)
    log(f"{size:,}: the admin lists and /metrics")
    pages = await asyncio.to_thread(paused.measure_admin_pages, bench.web.url, admin_pages(), args.page_requests)
    metrics = await asyncio.to_thread(scrape_metrics, bench.web.url, args.page_requests)
    stored = await asyncio.to_thread(storage, bench.dsn)
    out = {
        "size": size,
        "round": _ms([t.total for t in times]),
        "first_call": _ms([t.pause for t in times]),
        "answer_round": _ms(answered),
        "admin_pages": pages,
        "metrics": metrics,
        "storage": stored,
    }
    slowest = max(pages, key=lambda p: p["p50_ms"])
    log(
        f"{size:,}: round p50/p99 {out['round']['p50_ms']:.1f}/{out['round']['p99_ms']:.1f} ms, answer "
        f"p50/p99 {out['answer_round']['p50_ms']:.1f}/{out['answer_round']['p99_ms']:.1f} ms, first call p50 "
        f"{out['first_call']['p50_ms']:.1f} ms, slowest admin list {slowest['p50_ms']:.0f} ms ({slowest['path']}), "
        f"/metrics {metrics['p50_ms']:.0f} ms, {stored['bytes_per_call']:,} bytes per call"
    )
    return out


# --- memory under steady load ----------------------------------------------------------------------------


async def _keep_rounding(mcp: Mcp, stop: asyncio.Event, times: list[float], errors: list[str]) -> None:
    while not stop.is_set():
        try:
            times.append((await pause_and_resume(mcp, TOOL)).total)
        except Exception as exc:  # counted, the load goes on
            errors.append(repr(exc)[:200])


async def measure_memory(bench: run.Bench, minutes: float, clients: int) -> dict[str, Any]:
    """RSS and PSS of the web and worker groups, sampled while `clients` make rounds back to back;
    growth from the end of the warm-up (the first fifth, at least 30 s) to the end."""
    assert bench.web is not None and bench.worker is not None
    seconds = minutes * 60
    warm_up = max(seconds / 5, 30.0) if seconds > 60 else seconds / 3
    interval = max(seconds / 60, 2.0)
    log(f"memory: {clients} clients for {minutes:g} min, sampled every {interval:.0f} s, warm-up {warm_up:.0f} s")
    conns = [Mcp(bench.mcp_url, bench.token) for _ in range(clients)]
    stop, times, errors = asyncio.Event(), [], []
    tasks = [asyncio.create_task(_keep_rounding(c, stop, times, errors)) for c in conns]
    samples = []
    t0 = time.monotonic()
    while (elapsed := time.monotonic() - t0) < seconds:
        samples.append(
            {"seconds": round(elapsed, 1), "web": stack.memory(bench.web), "worker": stack.memory(bench.worker)}
        )
        await asyncio.sleep(interval)
    samples.append(
        {
            "seconds": round(time.monotonic() - t0, 1),
            "web": stack.memory(bench.web),
            "worker": stack.memory(bench.worker),
        }
    )
    stop.set()
    await asyncio.gather(*tasks)
    for c in conns:
        await c.close()
    start = next(s for s in samples if s["seconds"] >= warm_up)
    end = samples[-1]
    growth = {}
    for group in ("web", "worker"):
        for key in ("rss_total_mib", "pss_total_mib"):
            before, after = start[group][key], end[group][key]
            growth[f"{group}_{key}"] = {
                "after_warm_up": before,
                "end": after,
                "max": max(s[group][key] for s in samples),
                "growth_mib": round(after - before, 1),
                "growth_percent": round(100 * (after - before) / before, 2) if before else None,
            }
    out = {
        "minutes": minutes,
        "clients": clients,
        "warm_up_seconds": round(warm_up),
        "rounds": len(times),
        "rounds_per_second": round(len(times) / seconds, 1),
        "round": _ms(times),
        "errors": len(errors),
        "first_errors": errors[:3],
        "growth": growth,
        "samples": samples,
    }
    web, worker = growth["web_pss_total_mib"], growth["worker_pss_total_mib"]
    log(
        f"memory: PSS growth after warm-up web {web['growth_percent']:+.2f}%, worker {worker['growth_percent']:+.2f}% "
        f"({len(times):,} rounds, {len(errors)} errors)"
    )
    return out


# --- the sweep -------------------------------------------------------------------------------------------


async def measure_sweep(bench: run.Bench, mcp: Mcp, round_p99_without: float) -> dict[str, Any]:
    """Every call expires; the sweep removes them in a process of its own while one client keeps
    making whole rounds of fresh calls (which are not expired)."""
    t0 = time.perf_counter()
    expired = await asyncio.to_thread(paused.expire_everything)
    expire_seconds = time.perf_counter() - t0
    before = await asyncio.to_thread(clone.table_counts, bench.dsn)
    log(f"sweep: {expired:,} calls expired in {expire_seconds:.1f} s; sweeping while a client makes rounds")
    proc = subprocess.Popen(
        [sys.executable, "-c", SWEEP],
        cwd=ROOT,
        env=bench.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    times = []
    try:
        while proc.poll() is None:
            times.append((await pause_and_resume(mcp, TOOL)).total)
        out, err = proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
    if proc.returncode != 0:
        raise RuntimeError(f"the sweep failed:\n{err}")
    done = json.loads(out.strip().splitlines()[-1])
    left = await asyncio.to_thread(clone.table_counts, bench.dsn)
    during = _ms(times)
    figures = paused.sweep_figures(done["removed"], done["seconds"], before, left)
    log(
        f"sweep: {done['removed']:,} calls in {done['seconds']:.1f} s ({figures['batches']:,} batches); round p99 "
        f"{during['p99_ms']:.1f} ms during it, {round_p99_without:.1f} ms without"
    )
    return {
        "expired": expired,
        "expire_seconds": round(expire_seconds, 1),
        **figures,
        "round_during": during,
        "round_p99_without_ms": round_p99_without,
        "p99_ratio": round(during["p99_ms"] / round_p99_without, 2) if round_p99_without else None,
    }


# --- the whole run ---------------------------------------------------------------------------------------


async def measure(bench: run.Bench, results: dict[str, Any]) -> None:
    args = bench.args
    assert bench.web is not None
    # The admin's code and templates load on first use, in every web process.
    pages = admin_pages()
    for _ in range(2 * args.web_workers + 2):
        await asyncio.to_thread(paused.measure_admin_pages, bench.web.url, pages, 1)
    mcp = Mcp(bench.mcp_url, bench.token)
    log(f"seeds: {args.seeds} paused to copy, {args.staff_seeds} waiting for staff, {args.answers} a size to answer")
    seeds = await paused.make_seeds(mcp, args.seeds, args.staff_seeds, args.answers * len(args.sizes))
    results["sizes"] = []
    for i, size in enumerate(args.sizes):
        log(f"{size:,}: copying the seeds")
        cloned = await asyncio.to_thread(paused.grow, bench.dsn, seeds, size, args.staff_share)
        log(f"{size:,}: copied in {cloned['seconds']:.1f} s, VACUUM ANALYZE {cloned['analyze_seconds']:.1f} s")
        firsts = seeds.to_answer[i * args.answers : (i + 1) * args.answers]
        figures = await measure_size(bench, mcp, firsts, size)
        figures["clone"] = cloned
        results["sizes"].append(figures)
        save_partial(args.out, results)
    if args.memory_minutes > 0:
        results["memory"] = await measure_memory(bench, args.memory_minutes, args.memory_clients)
        save_partial(args.out, results)
    if not args.no_sweep:
        results["sweep"] = await measure_sweep(bench, mcp, results["sizes"][-1]["round"]["p99_ms"])
    await mcp.close()


def save_partial(out: Path, results: dict[str, Any]) -> None:
    """What is measured so far, in case a long run is stopped before its end (scale.partial.json)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "scale.partial.json").write_text(json.dumps(results, indent=2, default=str) + "\n")


# --- goals and the report --------------------------------------------------------------------------------


def goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    out = []

    def add(goal: str, met: bool | None, value: str, full_size: bool) -> None:
        out.append(
            {"goal": goal, "met": met, "full_size": full_size, "verdict": run._verdict(met, full_size), "value": value}
        )

    sizes = results.get("sizes") or []
    if len(sizes) >= 2:
        small, big = sizes[0], sizes[-1]
        ratio = big["round"]["p99_ms"] / small["round"]["p99_ms"]
        add(
            "round p99 at 1,000,000 calls ≤ 1.25× at 1,000",
            ratio <= 1.25,
            f"{ratio:.2f}× ({big['round']['p99_ms']:.1f} ms at {big['size']:,}, {small['round']['p99_ms']:.1f} ms at "
            f"{small['size']:,})",
            big["size"] >= 1_000_000 and small["size"] <= 1000,
        )
    if sizes:
        big = sizes[-1]
        slowest = max(big["admin_pages"], key=lambda p: p["p50_ms"])
        over = [p for p in big["admin_pages"] if p["p50_ms"] >= 200]
        add(
            "admin lists p50 < 200 ms at 1,000,000 calls",
            not over,
            f"slowest {slowest['p50_ms']:.0f} ms ({slowest['note']}) at {big['size']:,}; {len(over)} of "
            f"{len(big['admin_pages'])} lists at 200 ms or more",
            big["size"] >= 1_000_000,
        )
    s = results.get("sweep")
    if s:
        per_million = s["seconds"] * 1_000_000 / max(s["removed"], 1)
        add(
            "sweep of 1,000,000 expired calls ≤ 10 minutes, in batches",
            per_million <= 600,
            f"{s['seconds']:.0f} s for {s['removed']:,} in {s['batches']:,} batches of {s['batch']}"
            + ("" if s["removed"] >= 1_000_000 else f" (≈{per_million:.0f} s per 1,000,000)"),
            s["removed"] >= 1_000_000,
        )
        add(
            "round p99 during the sweep ≤ 2× without",
            s["p99_ratio"] is not None and s["p99_ratio"] <= 2,
            f"{s['p99_ratio']:.2f}× ({s['round_during']['p99_ms']:.1f} ms during, n={s['round_during']['n']}; "
            f"{s['round_p99_without_ms']:.1f} ms without)",
            s["removed"] >= 1_000_000,
        )
    m = results.get("memory")
    if m:
        web, worker = m["growth"]["web_pss_total_mib"], m["growth"]["worker_pss_total_mib"]
        worst = max(web["growth_percent"] or 0, worker["growth_percent"] or 0)
        add(
            "memory flat: ≤ 5% growth after warm-up",
            worst <= 5,
            f"PSS web {web['growth_percent']:+.2f}% ({web['growth_mib']:+.1f} MiB), "
            f"worker {worker['growth_percent']:+.2f}% ({worker['growth_mib']:+.1f} MiB) "
            f"over {m['minutes']:g} min, {m['rounds']:,} rounds",
            m["minutes"] >= 30 and bool(sizes) and sizes[-1]["size"] >= 1_000_000,
        )
    return out


def markdown(results: dict[str, Any]) -> str:
    sizes = results.get("sizes") or []
    head = "| | " + " | ".join(f"{s['size']:,} calls" for s in sizes) + " |"
    rule = "|---|" + "---|" * len(sizes)

    def row(label: str, cell) -> str:
        return f"| {label} | " + " | ".join(cell(s) for s in sizes) + " |"

    lines = ["## Capacity", "", head, rule]
    lines.append(
        row(
            "answer-round p50 / p99 (a real paused call)",
            lambda s: f"{s['answer_round']['p50_ms']:.1f} / {s['answer_round']['p99_ms']:.1f} ms",
        )
    )
    lines.append(
        row(
            "whole round p50 / p99 (a fresh call)",
            lambda s: f"{s['round']['p50_ms']:.1f} / {s['round']['p99_ms']:.1f} ms",
        )
    )
    lines.append(row("first call p50", lambda s: f"{s['first_call']['p50_ms']:.1f} ms"))
    if sizes:
        for i, page in enumerate(sizes[0]["admin_pages"]):
            lines.append(
                row(
                    f"admin: {page['note']} (`{page['path']}`), p50",
                    lambda s, i=i: f"{s['admin_pages'][i]['p50_ms']:.0f} ms",
                )
            )
    lines.append(row("/metrics scrape p50", lambda s: f"{s['metrics']['p50_ms']:.0f} ms"))
    lines.append(
        row(
            "bytes stored per paused call (rows, indexes, checkpoints)", lambda s: f"{s['storage']['bytes_per_call']:,}"
        )
    )
    if sizes:
        for table in sizes[0]["storage"]["bytes_per_call_by_table"]:
            lines.append(
                row(f"… of which `{table}`", lambda s, t=table: f"{s['storage']['bytes_per_call_by_table'][t]:,}")
            )
    lines.append(row("database size", lambda s: f"{s['storage']['database_mib']:,.0f} MiB"))
    lines.append(
        row(
            "bulk copy to this size (+ VACUUM ANALYZE)",
            lambda s: f"{s['clone']['seconds']:.0f} s + {s['clone']['analyze_seconds']:.0f} s",
        )
    )
    lines.append("")
    s = results.get("sweep")
    if s:
        lines += [
            f"The sweep removed {s['removed']:,} expired calls in {s['seconds']:.0f} s ({s['calls_per_second']:,.0f} "
            f"calls/s, {s['batches']:,} batches of {s['batch']}), while one client's whole rounds took p99 "
            f"{s['round_during']['p99_ms']:.1f} ms (n={s['round_during']['n']:,}; {s['round_p99_without_ms']:.1f} ms "
            f"without the sweep). Expiring them all at once took {s['expire_seconds']:.0f} s.",
            "",
        ]
    m = results.get("memory")
    if m:
        g = m["growth"]
        cells = "; ".join(
            f"{k.replace('_total_mib', '').replace('_', ' ')} {v['after_warm_up']:.0f} → {v['end']:.0f} MiB "
            f"({v['growth_percent']:+.2f}%)"
            for k, v in g.items()
        )
        lines += [
            f"Memory under steady load ({m['clients']} clients, {m['minutes']:g} min, {m['rounds']:,} rounds at "
            f"{m['rounds_per_second']} rounds/s, round p99 {m['round']['p99_ms']:.0f} ms, {m['errors']} errors), from "
            f"the end of a {m['warm_up_seconds']} s warm-up to the end: {cells}.",
            "",
        ]
    lines += ["| goal | | measured |", "|---|---|---|"]
    lines += [f"| {g['goal']} | {g['verdict']} | {g['value']} |" for g in results.get("goals", [])]
    mach, cfg = results["machine"], results["config"]
    lines += [
        "",
        f"Measured on {mach['cpus']} cores ({mach['cpu_model']}), {mach['memory_gib']} GiB, {mach['os']}, "
        f"{mach['postgres']}, {mach['redis']}; load average at start "
        f"{', '.join(f'{x:.2f}' for x in mach['loadavg_at_start'])}, at end "
        f"{', '.join(f'{x:.2f}' for x in mach['loadavg_at_end'])}. One uvicorn process group with "
        f"{cfg['web_workers']} workers, one Celery worker ({cfg['worker_pool']}, concurrency "
        f"{cfg['worker_concurrency']}); {cfg['staff_share']:.0%} of the calls wait for staff.",
        "",
        'Reproduce: `make bench-scale` (`BENCH_ARGS="--quick"` for small sizes; `.venv/bin/python '
        "bench/scale.py --help` for every flag).",
        "",
    ]
    return "\n".join(lines)


# --- main ------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = sizes.parser(
        __doc__,
        FULL,
        QUICK,
        {
            "--sizes": (str, "comma-separated numbers of paused calls, measured in turn"),
            "--rounds": (int, "whole rounds of fresh calls timed at each size"),
            "--answers": (int, "real paused calls answered at each size"),
            "--page-requests": (int, "loads of each admin list and of /metrics at each size"),
            "--memory-minutes": (
                float,
                "minutes of steady load while memory is sampled, at the largest size (0: none)",
            ),
            "--seeds": (int, "real paused calls made through HTTP and copied"),
            "--staff-seeds": (int, "real calls waiting for staff (digital_twin), copied"),
        },
        "small sizes (each size flag says which)",
    )
    p.add_argument("--memory-clients", type=int, default=4, help="clients of the steady load (default 4)")
    p.add_argument("--staff-share", type=float, default=0.1, help="share of the calls waiting for staff (default 0.1)")
    p.add_argument("--no-sweep", action="store_true", help="leave the sweep out")
    p.add_argument("--web-workers", type=int, default=2, help="uvicorn workers (Procfile: 2)")
    p.add_argument(
        "--worker-concurrency", type=int, default=None, help="Celery worker concurrency (default: the settings')"
    )
    p.add_argument("--worker-pool", default=None, help="Celery pool (default: the settings')")
    p.add_argument("--database", default="hitl_bench_scale", help="the bench database (dropped and created)")
    p.add_argument("--keep-db", action="store_true", help="leave the bench database in place at the end")
    p.add_argument("--out", type=Path, default=None, help="where scale.json and scale.md go (default bench/)")
    args = p.parse_args(argv)
    sizes.fill_sizes(args, FULL, QUICK)
    args.sizes = sorted(int(s.replace("_", "")) for s in str(args.sizes).split(",") if s.strip())
    args.out = args.out or ROOT / "bench"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, run._raise_on_signal)
    signal.signal(signal.SIGHUP, run._raise_on_signal)
    results: dict[str, Any] = {"machine": report.machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    metrics_dir = tempfile.mkdtemp(prefix="hitl-bench-metrics-")
    bench = run.setup(args, METRICS_ENABLED="true", METRICS_DIR=metrics_dir)
    results["config"] = {
        "web_workers": args.web_workers,
        "worker_concurrency": args.worker_concurrency,
        "worker_pool": args.worker_pool,
        "staff_share": args.staff_share,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
    }
    results["postgres_connections"] = run.postgres_headroom(bench)
    try:
        run.start_services(bench)
        asyncio.run(run.warm_up(bench, 40))
        asyncio.run(measure(bench, results))
    finally:
        bench.procs.stop_all()
        run._close(bench)
    results["goals"] = goals(results)
    results["machine"]["loadavg_at_end"] = os.getloadavg()
    results["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scale.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    (args.out / "scale.md").write_text(markdown(results))
    print(markdown(results))
    print(f"wrote {args.out / 'scale.json'} and scale.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
