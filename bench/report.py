"""Percentiles, the printed table, bench/results.json, bench/results.md and bench/results.png."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def summary_ms(values: list[float]) -> dict[str, float]:
    """p50/p95/max of seconds, in milliseconds."""
    return {
        "n": len(values),
        "p50_ms": round(percentile(values, 50) * 1000, 2),
        "p95_ms": round(percentile(values, 95) * 1000, 2),
        "max_ms": round(max(values) * 1000, 2) if values else float("nan"),
    }


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = 0.0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass

    def version(*cmd: str) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "unknown"

    os_name = "unknown"
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                os_name = line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": cpu,
        "memory_gib": mem_gib,
        "os": os_name,
        "python": platform.python_version(),
        "postgres": version("psql", "--version"),
        "redis": " ".join(version("redis-server", "--version").split()[:3]),
        "loadavg_at_start": os.getloadavg(),
    }


# --- the printed table and the Markdown for docs ----------------------------------------------------


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.1f}{unit}" if abs(value) >= 10 else f"{value:.2f}{unit}"
    return f"{value:,}{unit}" if isinstance(value, int) else f"{value}{unit}"


def _ms3(d: dict[str, Any], q: str) -> str:
    return f"{d['pause'][q]:.1f} / {d['resume'][q]:.1f} / {d['total'][q]:.1f} ms"


def _cleanup_row(label: str, c: dict[str, Any]) -> tuple[str, str, str]:
    return (
        label,
        f"{c['seconds']:.1f} s",
        f"{c['calls_per_second']:.0f} calls/s; ≈{c['seconds_per_100k']:.0f} s per 100,000",
    )


def _load_row(label: str, level: dict[str, Any]) -> tuple[str, str, str]:
    cpu = level["cpu_percent"]
    per = level.get("cpu_ms_per_round")
    service = level.get("service_cpu_ms")
    return (
        f"{label}, {level['clients']} concurrent clients",
        f"{level['rounds_per_second']:.1f} rounds/s",
        f"round p50 {level['round']['p50_ms']:.0f} ms, p95 {level['round']['p95_ms']:.0f} ms; "
        f"errors {level['errors']}; CPU (% of one core) "
        + ", ".join(f"{name} {value:.0f}%" for name, value in cpu.items())
        + ("; CPU per round " + ", ".join(f"{n} {v:.1f} ms" for n, v in per.items() if n != "machine") if per else "")
        + (
            f"; the service's CPU per round {service:.1f} ms, at most "
            f"{level['cpu_bound_rounds_per_second']:.0f} rounds/s on these cores"
            if service
            else ""
        ),
    )


def rows(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(measurement, value, note) rows, in the order of the measurements."""
    out: list[tuple[str, str, str]] = []
    lat = results.get("latency")
    if lat:
        n = lat["floor"]["total"]["n"]
        for label, key in (
            ("in-process floor", "floor"),
            ("worker path (runner.run)", "runner"),
            ("full stack over HTTP", "full_stack"),
            ("older client (2025-11-25: the call's stream, the answer POSTed)", "older_client"),
            ("full stack asking for progress (a progressToken; the graph reports none)", "with_progress"),
        ):
            if key not in lat:
                continue
            out.append(
                (
                    f"{label}: pause / resume / round p50",
                    _ms3(lat[key], "p50_ms"),
                    f"p95 {_ms3(lat[key], 'p95_ms')}; n={n}",
                )
            )
        out.append(("full stack / floor, whole round", f"{lat['ratio_p50']:.2f}× p50", f"{lat['ratio_p95']:.2f}× p95"))
        if "ratio_older_p50" in lat:
            out.append(("older client's round / 2026-07-28 round", f"{lat['ratio_older_p50']:.2f}× p50", ""))
        if "ratio_progress_p50" in lat:
            out.append(("round asking for progress / round without", f"{lat['ratio_progress_p50']:.2f}× p50", ""))
        if "floor_cpu_ms" in lat:
            out.append(
                (
                    "in-process floor: CPU per round (p50)",
                    f"{lat['floor_cpu_ms']['p50_ms']:.1f} ms",
                    "this process only (LangGraph + PostgresSaver), not PostgreSQL's",
                )
            )
        if "bare_request" in lat:
            bare = lat["bare_request"]
            out.append(
                (
                    "bare MCP request (tools/list), p50",
                    f"{bare['p50_ms']:.1f} ms",
                    f"p95 {bare['p95_ms']:.1f} ms; HTTP, Django, the token, the protocol checks, no call state; "
                    "a round makes two requests",
                )
            )
        if "stack_floor" in lat:
            handoff, sf = lat["handoff"], lat["stack_floor"]
            out.append(
                (
                    "no-op Celery hand-off and back, p50",
                    f"{handoff['p50_ms']:.1f} ms",
                    f"p95 {handoff['p95_ms']:.1f} ms; enqueue, the worker takes and acknowledges it, a Redis "
                    "publish back; a round makes two",
                )
            )
            out.append(
                (
                    "stack floor: floor + 2 bare requests + 2 hand-offs (p50)",
                    f"{sf['total_ms']:.1f} ms",
                    f"{sf['floor_ms']:.1f} + {sf['two_requests_ms']:.1f} + {sf['two_handoffs_ms']:.1f} ms",
                )
            )
            out.append(("full stack / stack floor, whole round", f"{sf['ratio_p50']:.2f}× p50", "goal ≤ 1.3×"))
            if "statements_ms" in sf:
                each = "; ".join(f"{name} {s['p50_ms']:.2f}" for name, s in lat["statements"].items())
                out.append(
                    (
                        "the round's statements alone, summed (p50 each)",
                        f"{sf['statements_ms']:.1f} ms",
                        f"each timed alone in the bench's process: {each} ms",
                    )
                )
                out.append(
                    (
                        "stack floor + the round's statements",
                        f"{sf['with_statements_ms']:.1f} ms",
                        f"{sf['ratio_with_statements']:.2f}× the stack floor: the least a round that stores what "
                        "it stores costs",
                    )
                )
            if "graph_in_worker_ms" in sf:
                wf = lat["worker_floor"]["total"]
                out.append(
                    (
                        "stack floor with the graph run in the worker (p50)",
                        f"{sf['graph_in_worker_ms']:.1f} ms",
                        f"the floor's two runs as two hand-offs to the worker ({wf['p50_ms']:.1f} ms, p95 "
                        f"{wf['p95_ms']:.1f}) + 2 bare requests; the round is "
                        f"{sf['ratio_graph_in_worker_p50']:.2f}× it",
                    )
                )
        b = lat.get("full_stack_breakdown")
        if b:
            for part in ("pause", "resume"):
                parts = [b[f"{part}_{k}"]["p50_ms"] for k in ("web_in", "queue_and_run", "back")]
                out.append(
                    (
                        f"full stack {part}: web in / queue + worker / back (p50)",
                        " / ".join(f"{x:.1f}" for x in parts) + " ms",
                        "from the Round rows' timestamps: request → row created → run recorded → response",
                    )
                )
    ap = results.get("answer_page")
    if ap:
        for label, key, note in (
            (
                "round answered on its answer page, p50",
                "page",
                "the form's POST until the client's retry gets the resumed call's result",
            ),
            (
                "  of which the form's POST (its checks and claim, 303), p50",
                "page_post",
                "through Django's whole stack: sessions, CSRF, the link's HMAC, the round's read and claim",
            ),
            (
                "the same round answered with inputResponses, p50",
                "input_responses",
                "the answering tools/call until its result",
            ),
        ):
            out.append(
                (label, f"{ap[key]['p50_ms']:.1f} ms", f"p95 {ap[key]['p95_ms']:.1f} ms; n={ap[key]['n']}; {note}")
            )
        out.append(("answer page's round / inputResponses' round", f"{ap['ratio_p50']:.2f}× p50", ""))
    load = results.get("load", {})
    for label, levels in (("load", load.get("levels", [])), ("stack floor's load", load.get("floor_levels", []))):
        for level in levels:
            out.append(_load_row(label, level))
    for level in results.get("embedded", {}).get("levels", []):
        out.append(
            (
                f"embedded default (make run), {level['clients']} client(s)",
                f"{level['rounds_per_second']} rounds/s, p95 {level['round']['p95_ms']:.0f} ms",
                f"errors {level['errors']}, unanswered after the load {level['unanswered']}, "
                f"'database is locked' {level['database_is_locked']}, enqueued again {level['enqueued_again']}; "
                f"web CPU {level['web_cpu_ms_per_round']} ms per round",
            )
        )
    w = results.get("waiting")
    if w:
        rss = f"{w['rss_baseline_mib']:.0f} → {w['rss_held_mib']:.0f} MiB"
        threads = w.get("threads", {})
        out.append(
            (
                "waiting calls held by one web process",
                f"{w['held']:,} of {w['requested']:,}",
                f"{w['rss_per_call_kib']:.0f} KiB RSS per call ({rss}); threads {threads.get('before')} → "
                f"{threads.get('holding')}; web CPU while holding {w['web_cpu_percent_holding']:.0f}%; "
                f"{w['completed_ok']:,} completed after release",
            )
        )
    p = results.get("paused")
    if p:
        before, after = p["memory_before"], p["memory_after"]

        def mem(kind: str, key: str) -> str:
            return f"{before[kind][key]:.0f} → {after[kind][key]:.0f}"

        out.append(
            (
                f"{p['paused_calls']:,} paused calls: web / worker RSS",
                f"{mem('web', 'rss_total_mib')} / {mem('worker', 'rss_total_mib')} MiB",
                f"PSS {mem('web', 'pss_total_mib')} / {mem('worker', 'pss_total_mib')} MiB; cloned in "
                f"{p['clone']['seconds']:.0f} s from {p['seeds']} real calls; database {p['database_mib']:.0f} MiB",
            )
        )
        out.append(
            (
                f"round at {p['paused_calls']:,} paused calls (p50)",
                f"{p['round']['p50_ms']:.1f} ms",
                f"p95 {p['round']['p95_ms']:.1f} ms; answering a seed call p50 {p['answer_seed']['p50_ms']:.1f} ms",
            )
        )
        for page in p["admin_pages"]:
            out.append(
                (
                    f"admin page {page['path']}",
                    f"{page['p50_ms']:.0f} ms p50",
                    f"p95 {page['p95_ms']:.0f} ms; {page.get('count_shown')} rows; {page['note']}",
                )
            )
    c = results.get("cleanup")
    if c:
        out.append(_cleanup_row(f"cleanup of {c['removed']:,} expired calls", c))
    return out


def goal_rows(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(g["goal"], g["verdict"], g["value"]) for g in results.get("goals", [])]


def print_table(results: dict[str, Any]) -> None:
    table = rows(results)
    goals = goal_rows(results)
    w0 = max((len(r[0]) for r in table + goals), default=10)
    w1 = max((len(r[1]) for r in table + goals), default=10)
    print()
    print(f"{'measurement':<{w0}}  {'value':<{w1}}  note")
    print("-" * (w0 + w1 + 40))
    for a, b, c in table:
        print(f"{a:<{w0}}  {b:<{w1}}  {c}")
    if goals:
        print()
        print(f"{'goal':<{w0}}  {'':<{w1}}  measured")
        print("-" * (w0 + w1 + 40))
        for a, b, c in goals:
            print(f"{a:<{w0}}  {b:<{w1}}  {c}")
    print()


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    cfg = results["config"]
    lines = [
        "## Performance",
        "",
        "| measurement | value | note |",
        "|---|---|---|",
        *[f"| {a} | {b} | {c} |" for a, b, c in rows(results)],
        "",
        "| goal | | measured |",
        "|---|---|---|",
        *[f"| {a} | {b} | {c} |" for a, b, c in goal_rows(results)],
        "",
        f"Measured on {m['cpus']} cores ({m['cpu_model']}), {m['memory_gib']} GiB, {m['os']}, Python {m['python']}, "
        f"{m['postgres']}, {m['redis']}; load average at start {', '.join(f'{x:.2f}' for x in m['loadavg_at_start'])}. "
        f"One uvicorn process group with {cfg['web_workers']} worker(s), one Celery worker "
        f"({cfg['worker_pool']}, concurrency {cfg['worker_concurrency']}), PostgreSQL and Redis on 127.0.0.1; "
        "the load generator runs on the same machine.",
        "",
        "Reproduce: `make bench` (PostgreSQL and Redis on 127.0.0.1; it creates and migrates its own database "
        "`hitl_bench`, writes `bench/results.json`, `bench/results.md` and `bench/results.png`). "
        "Smaller runs: `.venv/bin/python bench/run.py --help`.",
        "",
        "![latency against concurrent clients, and the full stack against the in-process floor](bench/results.png)",
        "",
    ]
    return "\n".join(lines)


# --- the plot -----------------------------------------------------------------------------------------


def plot(results: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)")
        return False
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    levels = results.get("load", {}).get("levels", [])
    if levels:
        clients = [lv["clients"] for lv in levels]
        left.plot(clients, [lv["round"]["p50_ms"] for lv in levels], "o-", label="round p50")
        left.plot(clients, [lv["round"]["p95_ms"] for lv in levels], "s--", label="round p95")
        left.set_xscale("log", base=2)
        left.set_xticks(clients, [str(c) for c in clients])
        left.set_xlabel("concurrent clients")
        left.set_ylabel("pause-and-resume round latency (ms)")
        left.set_title("Latency against concurrent clients")
        twin = left.twinx()
        twin.bar(
            clients,
            [lv["rounds_per_second"] for lv in levels],
            width=[c * 0.25 for c in clients],
            alpha=0.25,
            color="grey",
            label="rounds/s",
        )
        twin.set_ylabel("completed rounds per second (bars)")
        left.set_zorder(twin.get_zorder() + 1)  # the lines over the bars
        left.patch.set_visible(False)
        left.legend(loc="upper left")
        left.grid(alpha=0.3)
    lat = results.get("latency")
    if lat:
        groups = [
            ("floor", "in-process floor"),
            ("runner", "worker path\n(runner.run)"),
            ("full_stack", "full stack\n(HTTP)"),
        ]
        parts = ["pause", "resume", "total"]
        width = 0.25
        for i, (key, _label) in enumerate(groups):
            xs = [j + (i - 1) * width for j in range(len(parts))]
            p50 = [lat[key][p]["p50_ms"] for p in parts]
            p95 = [lat[key][p]["p95_ms"] for p in parts]
            right.bar(xs, p50, width, label=groups[i][1].replace("\n", " "))
            right.errorbar(
                xs,
                p50,
                yerr=[[0] * len(parts), [b - a for a, b in zip(p50, p95, strict=True)]],
                fmt="none",
                ecolor="black",
                capsize=3,
            )
        right.set_xticks(range(len(parts)), ["pause (round 1)", "resume (round 2)", "whole round"])
        right.set_ylabel("ms (bar p50, whisker p95)")
        title = f"Full stack against floor: {lat['ratio_p50']:.2f}× at p50"
        if (sf := lat.get("stack_floor")) is not None:
            right.axhline(sf["total_ms"], color="grey", linestyle=":", label="stack floor (whole round)")
            title += f", {sf['ratio_p50']:.2f}× the stack floor"
        right.set_title(title)
        right.legend()
        right.grid(axis="y", alpha=0.3)
    title = f"hitl-mcp bench ({results['machine']['cpus']} cores; sizes: {results['config']['sizes']})"
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write(results: dict[str, Any], out_dir: Path = BENCH) -> None:
    (out_dir / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    (out_dir / "results.md").write_text(markdown(results))
    plot(results, out_dir / "results.png")
