"""py-spy profiles of the web and worker process groups while the bench loads them.

`bench/run.py --profile` samples both groups (every process, with --subprocesses) during the
load level with the most clients, and writes into bench/profiles/:
  <name>.raw        collapsed stacks ("frame;frame;... count"), for flamegraph.pl or speedscope
  <name>.txt        the functions with the largest share of samples, inclusive and self
Samples are taken with --gil: only threads holding the GIL count, so the shares are CPU spent in
Python, not time spent waiting on PostgreSQL or Redis.
"""

from __future__ import annotations

import collections
import re
import shutil
import subprocess
import sys
from pathlib import Path

PROFILES = Path(__file__).resolve().parent / "profiles"


def py_spy() -> str | None:
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if here.exists() else shutil.which("py-spy")


def start(pid: int, name: str, seconds: float, rate: int = 250) -> subprocess.Popen | None:
    exe = py_spy()
    if exe is None:
        print("py-spy is not installed (pip install py-spy): no profile")
        return None
    PROFILES.mkdir(exist_ok=True)
    return subprocess.Popen(
        [
            exe,
            "record",
            "--pid",
            str(pid),
            "--subprocesses",
            "--gil",
            "--nonblocking",
            "--rate",
            str(rate),
            "--duration",
            str(max(1, int(seconds))),
            "--format",
            "raw",
            "--output",
            str(PROFILES / f"{name}.raw"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def finish(proc: subprocess.Popen | None, name: str, timeout: float = 60) -> dict | None:
    if proc is None:
        return None
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return None
    raw = PROFILES / f"{name}.raw"
    if not raw.exists():
        return None
    summary = summarize(raw)
    (PROFILES / f"{name}.txt").write_text(render(summary))
    return summary


_BORING = re.compile(r"^(process \d+|<module>|_run_code|_run_module_as_main|Thread\.|_worker |_bootstrap)")


def summarize(raw: Path, top: int = 40) -> dict:
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
        for frame in set(frames):
            inclusive[frame] += n
        own[frames[-1]] += n

    def share(counter: collections.Counter[str]) -> list[tuple[str, float]]:
        keep = [(f, c) for f, c in counter.most_common() if not _BORING.match(f)]
        return [(f, round(100 * c / max(total, 1), 1)) for f, c in keep[:top]]

    return {"samples": total, "inclusive": share(inclusive), "self": share(own)}


def render(summary: dict) -> str:
    lines = [f"{summary['samples']} samples (py-spy --gil: CPU in Python)", "", "inclusive:"]
    lines += [f"  {pct:5.1f}%  {frame}" for frame, pct in summary["inclusive"]]
    lines += ["", "self:"]
    lines += [f"  {pct:5.1f}%  {frame}" for frame, pct in summary["self"]]
    return "\n".join(lines) + "\n"
