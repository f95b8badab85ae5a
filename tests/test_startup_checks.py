"""What a process checks before it serves: every graph of the graphs file loads (web, worker,
`make run` and `manage.py check` all refuse one that does not, with one message naming the graph
and the fix), and an embedded process holds its data directory alone. The processes themselves
are started in tests/e2e/test_startup.py; here the same checks run in this process, and the lock
against a second process that holds it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from graph_runtime.registry import GraphsUnavailable, load_graphs
from hitl_project.embedded import DataDirectoryInUse, lock_data_directory
from tests.processes import ROOT

TYPING_TYPEDDICT = """
from typing import TypedDict

from langgraph.graph import START, StateGraph


class State(TypedDict, total=False):
    answer: str


graph = StateGraph(State).add_node("answer", lambda state: {"answer": "42"}).add_edge(START, "answer").compile()
"""

# A graph LangGraph refuses to compile: no edge from START.
UNCOMPILABLE = """
from langgraph.graph import StateGraph
from typing_extensions import TypedDict


class State(TypedDict, total=False):
    answer: str


graph = StateGraph(State).add_node("answer", lambda state: {"answer": "42"}).compile()
"""


# A float mirrored in a header: clients could not agree on its text (2026-07-28, "Custom Headers").
FLOAT_PARAMETER_HEADER = """
from typing import Annotated

from langgraph.graph import START, StateGraph
from pydantic import Field
from typing_extensions import TypedDict


class State(TypedDict, total=False):
    ratio: Annotated[float, Field(json_schema_extra={"x-mcp-header": "Ratio"})]


graph = StateGraph(State).add_node("answer", lambda state: {}).add_edge(START, "answer").compile()
"""


def graphs_file(directory: Path, graphs: dict, **files: str) -> Path:
    """A graphs file in `directory` listing `graphs`, beside the Python `files` (name → source)."""
    for name, source in files.items():
        (directory / name).write_text(textwrap.dedent(source))
    path = directory / "langgraph.json"
    path.write_text(json.dumps({"graphs": graphs}))
    return path


@pytest.mark.parametrize(
    ("entry", "files", "said"),
    [
        (
            "./mine.py:graph",
            {"mine.py": TYPING_TYPEDDICT},
            "its input schema cannot be derived (Please use `typing_extensions.TypedDict` instead of "
            "`typing.TypedDict` on Python < 3.12). On Python 3.11 import TypedDict from typing_extensions, "
            "not from typing.",
        ),
        (
            "my_missing_package.agents:graph",
            {},
            "importing it failed with ModuleNotFoundError: No module named 'my_missing_package'; check that "
            f"my_missing_package.agents can be imported from {Path.cwd()} (is its package installed?)",
        ),
        ("./mine.py:graph", {"mine.py": "raise RuntimeError('no API key')"}, "importing it failed with RuntimeError"),
        (
            "./mine.py:graph",
            {"mine.py": UNCOMPILABLE},
            "importing it failed with ValueError: Graph must have an entrypoint: add at least one edge from START "
            "to another node; check that ./mine.py runs on its own",
        ),
        (
            "./mine.py:build",
            {"mine.py": UNCOMPILABLE.replace("graph = ", "def build():\n    return ")},
            "building it with build() failed with ValueError: Graph must have an entrypoint",
        ),
        ("./absent.py:graph", {}, "absent.py does not exist (a ./file.py target is relative to the graphs file)"),
        ("./mine.py:grpah", {"mine.py": TYPING_TYPEDDICT}, "./mine.py has no attribute 'grpah'"),
        (
            "./mine.py:builder",
            {"mine.py": TYPING_TYPEDDICT + "builder = StateGraph(State)\n"},
            "./mine.py:builder is a StateGraph, not a compiled graph: point it at builder.compile()",
        ),
        ("./mine.py", {}, "its target './mine.py' must look like 'package.module:graph' or './file.py:graph'"),
        ({"description": "no path"}, {}, 'its entry must be "package.module:graph"'),
        (
            "./mine.py:graph",
            {"mine.py": FLOAT_PARAMETER_HEADER},
            "its input schema has an invalid parameter header: property 'ratio': x-mcp-header is only permitted "
            "on integer/string/boolean properties (got 'number').",
        ),
    ],
)
def test_a_graph_that_cannot_be_served_is_named_with_what_is_wrong_and_the_fix(tmp_path, entry, files, said):
    config = graphs_file(tmp_path, {"mine": entry}, **files)

    loaded = load_graphs(config)

    assert loaded.graphs == {}
    assert loaded.problems["mine"].startswith(f"Graph 'mine' in {config}: ")
    assert said in loaded.problems["mine"]


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "does not exist: set GRAPHS_CONFIG to your langgraph.json"),
        ("{not json", "is not valid JSON"),
        ('{"graph": {}}', 'has no "graphs" object: write {"graphs": {"my_tool": "my_package.my_module:graph"}}'),
    ],
)
def test_a_graphs_file_that_cannot_be_read_is_refused_naming_the_file_and_the_fix(tmp_path, content, said):
    config = tmp_path / "langgraph.json"
    if content is not None:
        config.write_text(content)

    assert said in load_graphs(config).problems[None]


def test_a_broken_graph_leaves_the_others_of_its_file_loaded(tmp_path):
    config = graphs_file(
        tmp_path, {"greeter": "example_agents.greeter:graph", "mine": "./mine.py:graph"}, **{"mine.py": "x = ("}
    )

    loaded = load_graphs(config)

    assert list(loaded.graphs) == ["greeter"] and list(loaded.problems) == ["mine"]


def test_a_local_dependency_of_the_graphs_file_is_importable_by_module_name(tmp_path):
    # langgraph.json's "dependencies": ["."] puts the file's directory on the path, as langgraph-cli does.
    (tmp_path / "my_agents").mkdir()
    (tmp_path / "my_agents" / "__init__.py").write_text("")
    (tmp_path / "my_agents" / "answer.py").write_text(
        TYPING_TYPEDDICT.replace("from typing import", "from typing_extensions import")
    )
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"dependencies": ["."], "graphs": {"answer": "my_agents.answer:graph"}}))

    loaded = load_graphs(config)

    assert list(loaded.graphs) == ["answer"], loaded.problems


def test_manage_py_check_reports_each_graph_that_cannot_be_served(tmp_path, settings):
    settings.GRAPHS_CONFIG = graphs_file(
        tmp_path,
        {"greeter": "example_agents.greeter:graph", "mine": "./mine.py:graph"},
        **{"mine.py": TYPING_TYPEDDICT},
    )

    with pytest.raises(SystemCheckError) as refused:
        call_command("check")

    assert "(hitl.E001) Graph 'mine'" in str(refused.value)
    assert "import TypedDict from typing_extensions" in str(refused.value)
    assert "greeter" not in str(refused.value)


@pytest.mark.parametrize("name", ["hitl_call_status", "hitl_answer"])
def test_manage_py_check_refuses_a_graph_named_as_a_built_in_tool_while_answer_pages_are_on(tmp_path, settings, name):
    settings.GRAPHS_CONFIG = graphs_file(tmp_path, {name: "example_agents.greeter:graph"})
    settings.MCP_ANSWER_PAGES = "on"

    with pytest.raises(SystemCheckError) as refused:
        call_command("check")

    assert f"(hitl.E002) A graph is named {name}" in str(refused.value)
    settings.MCP_ANSWER_PAGES = "off"
    call_command("check")


def test_make_runs_set_up_refuses_a_graph_that_cannot_be_served_before_it_changes_anything(tmp_path, settings):
    from django.core.management.base import CommandError

    settings.GRAPHS_CONFIG = graphs_file(tmp_path, {"mine": "./mine.py:graph"}, **{"mine.py": TYPING_TYPEDDICT})

    with pytest.raises(CommandError, match="Graph 'mine' .* import TypedDict from typing_extensions"):
        call_command("demo_setup")


def test_verify_raises_every_problem_in_one_message(tmp_path, settings):
    from graph_runtime.registry import verify

    settings.GRAPHS_CONFIG = graphs_file(tmp_path, {"a": "./a.py:graph", "b": "./b.py:graph"})

    with pytest.raises(GraphsUnavailable) as refused:
        verify()

    assert str(refused.value).count("does not exist") == 2


# --- the data directory's lock ------------------------------------------------------------------

HOLD = """
import sys, time
from pathlib import Path
from hitl_project.embedded import lock_data_directory
lock_data_directory(Path(sys.argv[1]))
print("held", flush=True)
time.sleep(600)
"""


@pytest.fixture
def holder(tmp_path):
    """Another process holding `tmp_path` as its data directory."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_a_data_directory_another_process_holds_is_refused_naming_that_process(tmp_path, holder):
    with pytest.raises(DataDirectoryInUse) as refused:
        lock_data_directory(tmp_path)

    assert f"Another process (PID {holder.pid}) is serving the data directory {tmp_path}" in str(refused.value)
    assert "HITL_VAR_DIR" in str(refused.value)


def test_a_data_directory_whose_process_died_is_free_at_once(tmp_path, holder):
    # SIGKILL: no clean-up of any kind, as in a crash or a power cut of that process.
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()

    fd = lock_data_directory(tmp_path)

    os.close(fd)
    assert (tmp_path / "embedded.pid").read_text() == str(os.getpid())
