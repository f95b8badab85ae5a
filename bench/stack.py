"""The production setup for the bench: its own PostgreSQL database, a uvicorn web process and
Celery worker processes (each its own process group, always stopped), and memory readings."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

# Imported here, not where a worker starts: bench/faults.py starts its hosts' workers on threads of
# their own, and two threads importing celery for the first time at once can each see it half made
# ("cannot import name 'Celery'").
from celery import Celery
from kombu.exceptions import OperationalError

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
LOGS = BENCH / "logs"
GRAPHS_CONFIG = BENCH / "langgraph.json"


# --- database -------------------------------------------------------------------------------------


def bench_database_url(base_url: str, name: str) -> str:
    """`base_url` with its database name replaced by `name` (user, host and port are kept)."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("postgres", "postgresql", "pgsql"):
        raise SystemExit(f"the bench needs PostgreSQL: DATABASE_URL is {base_url!r}")
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))


def recreate_database(url: str) -> None:
    """DROP and CREATE the bench database (connected to the server's `postgres` database)."""
    import psycopg
    from psycopg import sql

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = urlunsplit((parts.scheme, parts.netloc, "/postgres", parts.query, ""))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def manage(env: dict[str, str], *args: str, timeout: float = 300) -> str:
    out = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    if out.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
    return out.stdout


def migrate(env: dict[str, str]) -> None:
    manage(env, "migrate", "--noinput", "-v", "0")


def mcp_token(env: dict[str, str], username: str = "bench") -> str:
    """A fresh MCP token from `manage.py mcp_token` (the raw token is its last line)."""
    return manage(env, "mcp_token", username, "--name", "bench").strip().splitlines()[-1]


POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")


class PrivatePostgres:
    """A PostgreSQL 15 cluster of the bench's own (initdb in a temporary directory, run as the
    `postgres` OS user, its own port and socket directory, fsync on), so that restarting it
    disturbs nothing else on the machine."""

    def __init__(self, *settings: str) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="hitl-bench-pg-"))
        self.settings = settings  # more `name=value` server settings
        owner = pwd.getpwnam("postgres")
        os.chown(self.root, owner.pw_uid, owner.pw_gid)
        self.data, self.log = self.root / "data", self.root / "postgres.log"
        self.port = free_port()

    def _pg(self, *args: str, timeout: float = 120) -> None:
        command = ["runuser", "-u", "postgres", "--", str(POSTGRES_BIN / args[0]), *args[1:]]
        out = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if out.returncode != 0:
            raise RuntimeError(f"{args[0]} failed:\n{out.stdout}\n{out.stderr}\n(see {self.log})")

    def start(self) -> PrivatePostgres:
        if not self.data.exists():
            self._pg("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=200"
        options += "".join(f" -c {setting}" for setting in self.settings)
        self._pg("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "60", "start")
        return self

    def restart(self) -> None:
        self._pg("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-m", "fast", "-w", "-t", "60", "restart")

    def url(self, name: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def remove(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._pg("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


def service_env(database_url: str, redis_url: str, queue: str, **extra: str) -> dict[str, str]:
    """The environment of a production process, pointed at the bench database and queue."""
    env = dict(os.environ)
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "DEBUG"):
        env.pop(key, None)  # the example agents use their scripted model; DEBUG would keep every query
    env.update(
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        CELERY_QUEUE=queue,
        GRAPHS_CONFIG=str(GRAPHS_CONFIG),
        DJANGO_SETTINGS_MODULE="hitl_project.settings",
        # Fixed, so the bench process, the web and the worker mint and check the same tokens.
        SECRET_KEY=env.get("BENCH_SECRET_KEY", "bench-" + "k" * 50),
        LOG_LEVEL="WARNING",
        PYTHONUNBUFFERED="1",
        **extra,
    )
    return env


# --- processes ------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Process:
    """One service process started in its own process group; `stop()` ends the whole group."""

    name = "process"

    def __init__(self, env: dict[str, str]):
        self.env = env
        self.proc: subprocess.Popen | None = None
        LOGS.mkdir(parents=True, exist_ok=True)
        self.log = LOGS / f"{self.name}-{uuid.uuid4().hex[:6]}.log"

    def _spawn(self, args: list[str]) -> None:
        self.proc = subprocess.Popen(
            args, cwd=ROOT, env=self.env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True
        )

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _wait_until(self, ready: Callable[[], bool], what: str, timeout: float) -> None:
        """Until `ready()` (which paces itself), failing as soon as the process has exited."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"{what} exited: see {self.log}")
            if ready():
                return
        raise RuntimeError(f"{what} did not start: see {self.log}")

    def stop(self, timeout: float = 20) -> None:
        if not self.alive():
            return
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        except ProcessLookupError:
            pass
        # Prefork children that outlived their parent are in the same group: end them too.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Web(Process):
    """uvicorn serving the ASGI app on 127.0.0.1, as the Procfile does."""

    name = "web"

    def __init__(self, env: dict[str, str], workers: int = 1, port: int | None = None):
        super().__init__(env)
        self.workers = workers
        # A host restarted after a crash serves on its port again (its load balancer knows it so).
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90) -> Web:
        app = ["hitl_project.asgi:application"]
        # As the Procfile does (hitl_project/http.py says why).
        app += ["--http", "hitl_project.http:NoDelayHttpToolsProtocol"]
        self._spawn(
            [
                sys.executable,
                "-m",
                "uvicorn",
                *app,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--workers",
                str(self.workers),
                "--no-access-log",
                "--backlog",
                "4096",
                "--timeout-keep-alive",
                "300",
            ]
        )
        self._wait_until(self._healthy, "the web server", timeout)
        return self

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health/?format=json", timeout=5) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            time.sleep(0.25)
            return False


class Worker(Process):
    """A Celery worker consuming the bench queue, named `node` (Celery's -n: the host it runs on)."""

    name = "worker"

    def __init__(self, env: dict[str, str], concurrency: int, pool: str, node: str | None = None):
        super().__init__(env)
        self.concurrency, self.pool = concurrency, pool
        self.node = node or f"bench-{uuid.uuid4().hex[:8]}@127.0.0.1"

    def start(self, timeout: float = 90) -> Worker:
        # Asked over the worker's own broker, which need not be this process's. Not made the current
        # app: a test process that starts a bench worker goes on enqueueing its own tasks through its
        # own app (graph_runtime.work.enqueue reads celery's current_app).
        app = Celery(broker=self.env.get("CELERY_BROKER_URL") or self.env["REDIS_URL"], set_as_current=False)
        entry = ["-m", "celery", "-A", "hitl_project", "worker"]
        self._spawn(
            [
                sys.executable,
                *entry,
                "-Q",
                self.env["CELERY_QUEUE"],
                "-n",
                self.node,
                "-c",
                str(self.concurrency),
                f"--pool={self.pool}",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-l",
                "WARNING",
                # The benchmark's own hand-offs, which the service's workers do not have.
                "--include",
                "bench.tasks",
            ]
        )

        def answers() -> bool:
            try:
                return bool(app.control.ping(destination=[self.node], timeout=0.5))
            except (OSError, OperationalError):  # the broker restarting (bench/faults.py): not yet
                time.sleep(0.5)
                return False

        try:
            self._wait_until(answers, "the celery worker", timeout)
        finally:
            app.close()
        return self


class Stack:
    """Every process the bench started, so one `finally` stops them all."""

    def __init__(self) -> None:
        self.processes: list[Process] = []

    def start(self, process: Process) -> Process:
        self.processes.append(process)
        return process.start()

    def stop(self, process: Process) -> None:
        process.stop()
        if process in self.processes:
            self.processes.remove(process)

    def stop_all(self) -> None:
        for process in reversed(self.processes):
            try:
                process.stop()
            except Exception as exc:  # keep stopping the others
                print(f"could not stop {process.name} {process.pid}: {exc}", file=sys.stderr)
        self.processes.clear()


# --- memory and CPU from /proc ----------------------------------------------------------------------


def _status_kb(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name may contain spaces: fields start after its closing parenthesis.
    return raw[raw.rindex(")") + 2 :].split()


def group_pids(pgid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None and int(fields[2]) == pgid:
                pids.append(int(entry.name))
    return sorted(pids)


def rss_mib(pid: int) -> float:
    return _status_kb(pid, "VmRSS") / 1024


def pss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return 0.0


def memory(process: Process) -> dict[str, float]:
    """RSS of the group's processes (sum and largest) and their PSS sum, in MiB."""
    pids = group_pids(process.pid)
    rss = [rss_mib(p) for p in pids]
    return {
        "processes": len(pids),
        "threads": sum(_status_kb(p, "Threads") for p in pids),
        "rss_total_mib": round(sum(rss), 1),
        "rss_max_mib": round(max(rss, default=0.0), 1),
        "pss_total_mib": round(sum(pss_mib(p) for p in pids), 1),
    }


def cpu_seconds(process: Process) -> float:
    """User + system CPU seconds of the group's live processes."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in group_pids(process.pid):
        fields = _stat_fields(pid)
        if fields is not None:
            total += int(fields[11]) + int(fields[12])
    return total / ticks


def service_cpu_seconds(command: str) -> dict[int, float]:
    """User + system CPU seconds of every live process named `command` (postgres, redis-server),
    by pid: the database's and the broker's share of a load level, with `cpu_spent`. Shared with
    anything else they serve."""
    ticks = os.sysconf("SC_CLK_TCK")
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                name = (entry / "comm").read_text().strip()
            except (FileNotFoundError, ProcessLookupError):
                continue
            fields = _stat_fields(int(entry.name)) if name == command else None
            if fields is not None:
                out[int(entry.name)] = (int(fields[11]) + int(fields[12])) / ticks
    return out


def cpu_spent(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds between two `service_cpu_seconds` readings. By pid, because PostgreSQL backends
    come and go (a connection past CONN_MAX_AGE is replaced): a backend that ended in between is
    left out (an undercount), one that started in between counts from its start."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent on anything but idling and waiting for I/O (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")
