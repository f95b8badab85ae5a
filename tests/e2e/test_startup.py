"""Each process of a deployment refuses to start when a graph of its graphs file cannot be served,
with one message naming the graph and the fix, rather than answering every call with -32603."""

from __future__ import annotations

import subprocess
import sys

from tests.processes import ROOT, free_port, service_env
from tests.test_startup_checks import TYPING_TYPEDDICT, graphs_file

FIX = "On Python 3.11 import TypedDict from typing_extensions, not from typing."


def test_the_web_asgi_or_wsgi_and_the_worker_refuse_to_start_with_a_graph_that_cannot_be_served(tmp_path, fake_model):
    config = graphs_file(
        tmp_path,
        {"greeter": "example_agents.greeter:graph", "mine": "./mine.py:graph"},
        **{"mine.py": TYPING_TYPEDDICT},
    )
    env = service_env("refused", fake_model, GRAPHS_CONFIG=str(config))
    commands = {
        "web": ["-m", "uvicorn", "hitl_project.asgi:application", "--port", str(free_port())],
        "worker": ["-m", "celery", "-A", "hitl_project", "worker", "-Q", "refused", "--pool", "solo"],
        # A server that speaks only WSGI loads this module as it starts.
        "wsgi": ["-c", "import hitl_project.wsgi"],
    }
    # Both at once: each spends most of its start importing.
    started = {
        name: subprocess.Popen(
            [sys.executable, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for name, args in commands.items()
    }

    for name, proc in started.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, (name, out, err)
        assert f"Cannot start: the graphs cannot be served.\nGraph 'mine' in {config}: " in err, (name, err)
        assert FIX in err
        assert "Traceback" not in err, (name, err)
