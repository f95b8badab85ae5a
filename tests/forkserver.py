"""A fork server for the processes the tests start: `python -m uvicorn`, `python -m celery`,
`python manage.py ...`, each a real OS process running its real entry point, forked from a Python
that has already imported the service's heavy dependencies.

Why: a test run starts over a hundred of these processes, and each fresh interpreter spent about
1.5 s of CPU importing LangGraph, LangChain, the MCP SDK, pydantic, Celery and uvicorn before
running a line of the service, and more in its collector scanning what they made: `manage.py
check` takes 2.8 s fresh and 0.8 s forked. A fork shares the imported modules. Everything of the
service itself (settings, apps, graphs, the Celery app) is imported after the fork, from the
child's own environment, as in a fresh interpreter.

What stays as it was: each process has its own PID and process group (SIGKILL of the group is a
crash), its own environment, working directory and output, and exits through the interpreter's
normal shutdown (atexit handlers, such as the span exporter's flush, run). Two differences: the
children share the server's string hash seed, where fresh interpreters draw one each, and every
child's output is unbuffered. A child whose environment differs from the server's in a variable
that the imports done here read (an imported module that decided something from it), or that the
interpreter read as it started (PYTHON*, LANG, LC_*), is started from a fresh interpreter instead,
and so is any command line not of the form `-m MODULE ...` or `SCRIPT.py ...`.
TEST_FRESH_INTERPRETERS=1 starts every process from a fresh interpreter.

Protocol: the client sends each request (JSON: argv, env, cwd) on a SOCK_SEQPACKET socket with
four file descriptors: one end of a socket pair for the child's status, and its stdin, stdout and
stderr. The server forks; the child writes its PID to the status socket once it leads its own
process group; the server reaps it when it exits and writes its return code there (Popen's sign
convention: -N for signal N)."""

from __future__ import annotations

import gc
import io
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The service's heavy third-party imports (the names `python -X importtime manage.py check` shows
# at the top), none of which reads, at import, a variable the tests vary per process.
PREIMPORTED = (
    "django.db.models",
    "celery",
    "kombu",
    "redis",
    "psycopg",
    "psycopg_pool",
    "pydantic",
    "jsonschema",
    "httpx",
    "uvicorn",
    "mcp",
    "mcp.types",
    "mcp.server",
    "mcp.client",
    "langchain_core.messages",
    "langchain_core.tools",
    "langchain.agents",
    "langchain_openai",
    "langgraph.graph",
    "langgraph.types",
    "langgraph.pregel",
    "langgraph.checkpoint.postgres",
    "langgraph.checkpoint.sqlite",
)


# --- the server ------------------------------------------------------------------------------


def _import_recording_environment_reads() -> dict[str, str | None]:
    """Import PREIMPORTED; the variables read meanwhile, with their values then."""
    import importlib

    environ_class = type(os.environ)
    getitem, contains = environ_class.__getitem__, environ_class.__contains__
    read: set[str] = set()

    def recording_getitem(self, key):
        read.add(key)
        return getitem(self, key)

    def recording_contains(self, key):
        read.add(key)
        return contains(self, key)

    environ_class.__getitem__, environ_class.__contains__ = recording_getitem, recording_contains
    try:
        for module in PREIMPORTED:
            importlib.import_module(module)
    finally:
        environ_class.__getitem__, environ_class.__contains__ = getitem, contains
    return {key: os.environ.get(key) for key in sorted(read)}


def _read_at_startup(key: str) -> bool:
    """A variable the interpreter itself read as it started (paths, warnings, encodings, locale).
    PYTHONUNBUFFERED aside: every child is unbuffered, as the service's processes run under the
    tests (service_env); buffering changes when output appears, not what it is."""
    return (key.startswith(("PYTHON", "LC_")) or key == "LANG") and key != "PYTHONUNBUFFERED"


def _serve(control: socket.socket) -> Callable[[], None] | None:
    """Fork a child for each request until the client goes away (None); in a child, returns what
    the child runs, to be called outside every frame of the server."""
    decided_by = _import_recording_environment_reads()
    decided_by.update({key: value for key, value in os.environ.items() if _read_at_startup(key)})
    control.sendall(json.dumps(decided_by).encode())
    # The imported objects move out of the collector's sight: a child's collections would touch
    # every one of them, copying the pages they share with this process.
    gc.freeze()
    if threading.active_count() != 1:
        raise RuntimeError("an import started a thread: forking would copy a process mid-work")
    children: dict[int, socket.socket] = {}
    while True:
        ready, _, _ = select.select([control], [], [], 0.05)
        _reap(children)
        if not ready:
            continue
        message, fds, _, _ = socket.recv_fds(control, 1 << 20, 4)
        if not message:
            return None
        status = socket.socket(fileno=fds[0])
        pid = os.fork()
        if pid == 0:
            for other in (control, *children.values()):
                other.close()
            return lambda: _run_child(json.loads(message), status, fds[1:])
        for fd in fds[1:]:
            os.close(fd)
        children[pid] = status


def _reap(children: dict[int, socket.socket]) -> None:
    while children:
        pid, wait_status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        status = children.pop(pid, None)
        if status is not None:
            try:
                status.sendall(json.dumps({"returncode": os.waitstatus_to_exitcode(wait_status)}).encode() + b"\n")
            except OSError:
                pass  # the client closed its end: nobody waits for this one
            status.close()


def _run_child(request: dict, status: socket.socket, stdio: list[int]) -> None:
    """What `python ARGV` does, in this already-started interpreter."""
    import runpy

    os.setsid()
    # Told by the child once it leads its group, so that the client's killpg finds the group.
    status.sendall(json.dumps({"pid": os.getpid()}).encode() + b"\n")
    status.close()
    for target, fd in enumerate(stdio):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    argv = request["argv"]
    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        sys.path[0] = str(Path(argv[0]).resolve().parent)
        runpy.run_path(argv[0], run_name="__main__")


# --- the client ------------------------------------------------------------------------------


class Forked:
    """A forked child as the tests use a Popen: pid, poll(), wait(timeout), returncode."""

    def __init__(self, args: list[str], status: socket.socket):
        self.args, self._status = args, status
        self._lines = status.makefile("rb")
        self.pid: int = json.loads(self._lines.readline())["pid"]
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._status], [], [], 0)[0]:
            self._read_returncode()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._status], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._read_returncode()
        return self.returncode

    def _read_returncode(self) -> None:
        line = self._lines.readline()
        if not line:
            raise RuntimeError(f"the fork server went away before process {self.pid} ended")
        self.returncode = json.loads(line)["returncode"]
        self._lines.close()
        self._status.close()


class ForkServer:
    """One per test process, started at its first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._control: socket.socket | None = None
        self._server: subprocess.Popen | None = None
        self._decided_by: dict[str, str | None] = {}

    def may_fork(self, args: list[str], env: dict[str, str]) -> bool:
        if os.environ.get("TEST_FRESH_INTERPRETERS") == "1" or not args:
            return False
        if not (args[0] == "-m" and len(args) > 1 or args[0].endswith(".py")):
            return False
        self._start()
        compared = self._decided_by.keys() | {key for key in env if _read_at_startup(key)}
        return all(env.get(key) == self._decided_by.get(key) for key in compared)

    def spawn(self, args: list[str], env: dict[str, str], stdin: int, stdout: int, stderr: int) -> Forked:
        """`python ARGS` forked, in `env` from the checkout, with these descriptors as its stdio."""
        self._start()
        ours, theirs = socket.socketpair()
        request = json.dumps({"argv": args, "env": env, "cwd": str(ROOT)}).encode()
        try:
            with self._lock:
                socket.send_fds(self._control, [request], [theirs.fileno(), stdin, stdout, stderr])
            return Forked(args, ours)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()

    def _start(self) -> None:
        """Start the server, once. It ends when this process closes its end of the control
        socket, at the latest as this process exits; the children it started go on, as the
        children of a Popen with start_new_session do."""
        with self._lock:
            if self._server is None:
                self._server, self._control, self._decided_by = self._started()

    @staticmethod
    def _started() -> tuple[subprocess.Popen, socket.socket, dict[str, str | None]]:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # Unbuffered, as the service's processes run under the tests (service_env): a test reads
        # a process's log while it runs.
        server = subprocess.Popen(
            [sys.executable, "-u", "-m", "tests.forkserver", str(theirs.fileno())],
            cwd=ROOT,
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            # Not the test process's stdout: pytest-xdist's workers talk to their controller on it.
            stdout=subprocess.DEVNULL,
            # Not in the terminal's foreground group: a Ctrl-C for pytest must not end it while
            # pytest stops the processes it started.
            start_new_session=True,
        )
        theirs.close()
        return server, ours, json.loads(ours.recv(1 << 20))


SERVER = ForkServer()


def start(args: list[str], env: dict[str, str], log: Path) -> Forked | subprocess.Popen:
    """`python ARGS` in `env`, in a process group of its own, its output appended to `log`."""
    with log.open("ab") as out:
        if not SERVER.may_fork(args, env):
            return subprocess.Popen(
                [sys.executable, *args], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        with open(os.devnull, "rb") as nothing:
            return SERVER.spawn(args, env, nothing.fileno(), out.fileno(), out.fileno())


def run(args: list[str], env: dict[str, str], typed: str | None, timeout: float) -> subprocess.CompletedProcess:
    """As subprocess.run([python, *ARGS], input=typed, capture_output=True, text=True, timeout=...)."""
    if not SERVER.may_fork(args, env):
        return subprocess.run(
            [sys.executable, *args], cwd=ROOT, env=env, input=typed, capture_output=True, text=True, timeout=timeout
        )
    deadline = time.monotonic() + timeout
    (stdin, to_stdin), (from_stdout, stdout), (from_stderr, stderr) = (os.pipe() for _ in range(3))
    try:
        child = SERVER.spawn(args, env, stdin, stdout, stderr)
    except BaseException:
        for fd in (to_stdin, from_stdout, from_stderr):
            os.close(fd)
        raise
    finally:
        for fd in (stdin, stdout, stderr):
            os.close(fd)
    said: dict[int, bytes] = {}

    def read(fd: int) -> None:
        with open(fd, "rb") as output:
            said[fd] = output.read()

    def write() -> None:
        try:
            with open(to_stdin, "wb") as given:
                given.write((typed or "").encode())
        except BrokenPipeError:
            pass  # the child did not read it all, as with subprocess.run

    threads = [
        threading.Thread(target=f, args=a, daemon=True)
        for f, a in ((read, (from_stdout,)), (read, (from_stderr,)), (write, ()))
    ]
    for thread in threads:
        thread.start()
    try:
        child.wait(timeout)
        # A process the child started may still hold its output open.
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                raise subprocess.TimeoutExpired(args, timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        child.wait()
        raise
    out, err = (io.TextIOWrapper(io.BytesIO(said[fd])).read() for fd in (from_stdout, from_stderr))
    return subprocess.CompletedProcess([sys.executable, *args], child.returncode, out, err)


if __name__ == "__main__":
    child = _serve(socket.socket(fileno=int(sys.argv[1])))
    if child is not None:
        child()
