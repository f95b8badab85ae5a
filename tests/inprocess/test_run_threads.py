"""Runs take their threads from one pool of the process (graph_runtime/executor.py): LangGraph would
start a pool's threads for every run, and a thread start holds a lock every pool's submit waits for."""

from __future__ import annotations

import operator
import threading
import uuid
from typing import Annotated

import pytest
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

from graph_runtime import executor, runner
from graph_runtime.registry import RegisteredGraph


class _Fan(TypedDict, total=False):
    seen: Annotated[list, operator.add]


def _branch(name: str):
    def node(state: _Fan) -> _Fan:
        return {"seen": [(name, threading.current_thread().name)]}

    return node


# Three nodes in one step: LangGraph runs all but one of them on its pool's threads.
_fan = StateGraph(_Fan)
for _name in ("a", "b", "c"):
    _fan = _fan.add_node(_name, _branch(_name)).add_edge(START, _name)
FAN = RegisteredGraph(name="fan", graph=_fan.compile(), description="", input_schema={})


@pytest.fixture
def threads():
    """Thread ids for runs of their own, deleted with their checkpoints after the test."""
    made: list[str] = []

    def new() -> str:
        made.append(f"threads-{uuid.uuid4()}")
        return made[-1]

    yield new
    for thread_id in made:
        runner.delete_thread(thread_id)


def _pool_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("graph-task")}


def test_a_runs_parallel_tasks_run_on_the_processs_pool(threads, db):
    run = runner.run(FAN, threads(), arguments={})

    assert sorted(name for name, _ in run.values["seen"]) == ["a", "b", "c"]
    assert any(thread.startswith("graph-task") for _, thread in run.values["seen"])


def test_the_threads_a_run_took_outlive_it_and_serve_the_next_runs(threads, db):
    ran_on: set[str] = set()
    for _ in range(10):
        run = runner.run(FAN, threads(), arguments={})
        ran_on |= {thread for _, thread in run.values["seen"] if thread != threading.current_thread().name}

    alive = {thread.name for thread in _pool_threads()}
    # Every task off the run's own thread ran on a thread of the pool that is still there: none was
    # started for one run and ended with it, and ten runs needed no more threads than run at once.
    assert ran_on and ran_on <= alive
    assert len(alive) < 10


def test_a_run_that_bounds_its_concurrency_gets_a_pool_of_its_own():
    with executor.executor_for_config({"max_concurrency": 2}) as own:
        assert own is not executor.shared_pool() and own._max_workers == 2  # type: ignore[attr-defined]
    with executor.executor_for_config({}) as shared:
        assert shared is executor.shared_pool()
