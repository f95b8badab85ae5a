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
    proc: subprocess.Popen | None, name: str, timeout: float = 60, *, stop: bool = False, under: str | None = None
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
    summary = summarize(raw, under=under)
    (PROFILES / f"{name}.txt").write_text(render(summary))
    return summary


_BORING = re.compile(r"^(process \d+|<module>|_run_code|_run_module_as_main|Thread\.|_worker |_bootstrap)")


def summarize(raw: Path, top: int = 40, *, under: str | None = None) -> dict:
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
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
    else:
        what = "py-spy --gil: CPU in Python"
    lines = [f"{summary['samples']} samples ({what})", "", "inclusive:"]
    lines += [f"  {pct:5.1f}%  {frame}" for frame, pct in summary["inclusive"]]
    lines += ["", "self:"]
    lines += [f"  {pct:5.1f}%  {frame}" for frame, pct in summary["self"]]
    return "\n".join(lines) + "\n"
