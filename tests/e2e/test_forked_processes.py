"""The fork server the end-to-end tests start the service's processes from (tests/forkserver.py):
a forked process is what the tests rely on a fresh `python` being."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from tests import forkserver

CHILD = """
import atexit, os, sys
atexit.register(lambda: print("atexit ran", flush=True))
print(os.getpid(), os.getpgid(0), os.environ.get("GREETING"), os.getcwd(), sys.argv[1:], flush=True)
if sys.argv[1:] == ["hang"]:
    import time
    time.sleep(60)
sys.exit(int(sys.argv[1]) if sys.argv[1:] and sys.argv[1].isdigit() else 0)
"""


@pytest.fixture(autouse=True)
def forking(monkeypatch):
    """These tests are of the fork server itself, also in a run that has the others start fresh."""
    monkeypatch.delenv("TEST_FRESH_INTERPRETERS", raising=False)


def _script(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    return str(script)


def test_a_forked_process_has_its_own_group_environment_arguments_and_exit_code(tmp_path):
    env = dict(os.environ, GREETING="hello")

    done = forkserver.run([_script(tmp_path), "3"], env, None, timeout=30)

    pid, group, greeting, cwd, argv = done.stdout.splitlines()[0].split(" ", 4)
    assert (group, greeting, cwd, argv) == (pid, "hello", str(forkserver.ROOT), "['3']")
    assert done.returncode == 3
    assert done.stdout.splitlines()[1] == "atexit ran"


def test_a_module_forked_with_m_reads_what_is_typed_on_its_standard_input():
    done = forkserver.run(["-m", "json.tool"], dict(os.environ), '{"typed": [1, 2]}', timeout=30)

    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        '{\n    "typed": [\n        1,\n        2\n    ]\n}\n',
        "",
    )


def test_a_forked_process_killed_with_its_group_reports_the_signal_as_popen_does(tmp_path):
    log = tmp_path / "child.log"
    child = forkserver.start([_script(tmp_path), "hang"], dict(os.environ), log)
    assert isinstance(child, forkserver.Forked)
    deadline = time.monotonic() + 30
    while not log.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert child.poll() is None

    os.killpg(child.pid, signal.SIGKILL)

    assert child.wait(10) == -signal.SIGKILL
    assert "atexit ran" not in log.read_text()


def test_a_process_whose_environment_changes_what_the_preloaded_imports_read_starts_fresh(tmp_path):
    forkserver.SERVER.may_fork(["-m", "json.tool"], dict(os.environ))  # the server, and what it read
    key, value = next(iter(forkserver.SERVER._decided_by.items()))
    env = dict(os.environ, **{key: f"{value}-other"})

    child = forkserver.start([_script(tmp_path)], env, tmp_path / "fresh.log")

    assert isinstance(child, subprocess.Popen) and child.wait(30) == 0
