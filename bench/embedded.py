"""The embedded default under load (bench/run.py's "embedded"): `make run`'s command (SQLite, rounds
on the web process's own threads) on a data directory of its own, and the same whole rounds as the
production shape's load levels, at the same client counts.

Besides rounds per second and p95 it counts what went wrong: errors, calls still unanswered
GRACE seconds after the load stopped, and the server log's "database is locked" and "looks stalled"
lines (a round enqueued a second time)."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench import report
from bench.client import Mcp, pause_and_resume
from bench.stack import cpu_seconds

ROOT = Path(__file__).resolve().parent.parent
GRACE = 10.0


def _env(home: Path) -> dict[str, str]:
    """What `make run` gives its commands: no DATABASE_URL or REDIS_URL, the data in `home`."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "GRAPHS_CONFIG")}
    env.update(HITL_VAR_DIR=str(home), PYTHONUNBUFFERED="1", DJANGO_SETTINGS_MODULE="hitl_project.settings")
    return env


class Embedded:
    """`make run`'s two commands, on a free port and a data directory of their own."""

    def __init__(self, port: int):
        self.home = Path(tempfile.mkdtemp(prefix="hitl-bench-embedded-"))
        self.url = f"http://127.0.0.1:{port}"
        env = _env(self.home)
        done = subprocess.run(
            [sys.executable, "manage.py", "demo_setup", "--migrate", "--url", self.url],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode:
            raise RuntimeError(f"demo_setup failed: {done.stderr[-2000:]}")
        self.token = re.search(r"^export MCP_TOKEN=(\S+)$", done.stdout, re.M).group(1)  # type: ignore[union-attr]
        self.log = self.home / "web.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "hitl_project.asgi:application"]
            + ["--http", "hitl_project.http:NoDelayHttpToolsProtocol", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT,
            env={**env, "SITE_URL": self.url},
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.pid = self.proc.pid
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{self.url}/health/", timeout=1)
                return
            except httpx.HTTPError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the embedded server did not start: see {self.log}")

    def said(self, text: str) -> int:
        return self.log.read_text(errors="replace").count(text)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


async def level(server: Embedded, clients: int, seconds: float, warmup: float, tool: str) -> dict[str, Any]:
    """`clients` clients doing whole rounds back to back; rounds that end inside the window count."""
    start = time.monotonic()
    window = (start + warmup, start + warmup + seconds)
    done: list[tuple[float, float]] = []
    errors: list[str] = []
    busy: set[int] = set()
    said = {text: server.said(text) for text in ("database is locked", "looks stalled")}

    async def client(i: int) -> None:
        mcp = Mcp(f"{server.url}/mcp/", server.token)
        try:
            while time.monotonic() < window[1]:
                busy.add(i)
                try:
                    done.append((time.monotonic(), (await pause_and_resume(mcp, tool)).total))
                except Exception as exc:  # counted, and the client carries on
                    errors.append(repr(exc)[:300])
                    await mcp.close()
                    mcp = Mcp(f"{server.url}/mcp/", server.token)
                    await asyncio.sleep(0.1)
                finally:
                    busy.discard(i)
        finally:
            await mcp.close()

    tasks = [asyncio.create_task(client(i)) for i in range(clients)]
    await asyncio.sleep(max(0.0, window[0] - time.monotonic()))
    cpu0 = cpu_seconds(server)
    await asyncio.sleep(max(0.0, window[1] - time.monotonic()))
    cpu1 = cpu_seconds(server)
    await asyncio.sleep(GRACE)
    unanswered = len(busy)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    inside = [t for end, t in done if window[0] <= end <= window[1]]
    return {
        "clients": clients,
        "rounds": len(inside),
        "rounds_per_second": round(len(inside) / seconds, 1),
        "round": report.summary_ms(inside),
        "errors": len(errors),
        "first_errors": errors[:3],
        "unanswered": unanswered,
        "database_is_locked": server.said("database is locked") - said["database is locked"],
        "enqueued_again": server.said("looks stalled") - said["looks stalled"],
        "web_cpu_ms_per_round": round(1000 * (cpu1 - cpu0) / max(len(inside), 1), 1),
    }
