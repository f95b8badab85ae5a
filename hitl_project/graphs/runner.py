"""Run or resume one graph on one thread, and report where it stopped.

What is pending is always read back from the checkpoint after the run (`get_state().interrupts`),
never from stream order, which LangGraph does not keep stable between runs. A run whose last
checkpoint has nothing left to run ended, with nothing pending: its output is its state, and the
thread is not read back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphDrained
from langgraph.pregel import Pregel
from langgraph.runtime import RunControl
from langgraph.types import Command, Interrupt, StateSnapshot

from .checkpointer import checkpointer
from .registry import RegisteredGraph

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunResult:
    values: dict[str, Any]
    interrupts: tuple[Interrupt, ...]
    # Stopped at interrupt_before/interrupt_after: paused with nothing to ask.
    at_breakpoint: bool = False
    # Stopped between two steps because `stop` said so (a cancelled task).
    stopped: bool = False


def bound(graph: Pregel) -> Pregel[Any, Any, Any, Any]:
    return graph.copy(update={"checkpointer": checkpointer()})


def _config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def run(
    registered: RegisteredGraph,
    thread_id: str,
    *,
    arguments: dict[str, Any] | None = None,
    resume: dict[str, Any] | None = None,
    context: dict[str, Any] | None = None,
    carry_on: bool = False,
    progress: Callable[[str, bool], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> RunResult:
    """Start the graph with `arguments`, resume it with `{interrupt_id: value}`, or (`carry_on`)
    go on from the thread's last checkpoint, as LangGraph does when invoked with no input.

    `progress` hears, as the run goes, which step it is on (False) and what the graph reports
    through LangGraph's custom stream writer (True: a string, or a dict's "message"). `stop` is asked as each
    task of a step ends: once it says True, the run stops before its next step, through LangGraph's own
    cooperative drain (RunControl.request_drain: the step that ran is checkpointed, the next one
    never starts).

    Raises whatever the graph raises; the caller decides what an error means for its call.
    """
    graph = bound(registered.graph)
    # The name the graph is served under, where LangGraph's platform puts it: a graph registered
    # twice (or a node shared by graphs) can tell which one runs, as a policy's graph pattern needs.
    config: RunnableConfig = {**_config(thread_id), "metadata": {"graph_id": registered.name}}
    # Resume by interrupt id only: a bare value is ambiguous with several interrupts pending,
    # and an empty map silently answers nothing.
    graph_input: Any
    if resume is not None:
        graph_input = Command(resume=resume)
    elif carry_on:
        graph_input = None
    else:
        graph_input = registered.graph_input(arguments or {})
    control = RunControl()
    output: Any = None
    # A step in which a task was interrupted is the run's last: the graph pauses once that step ends,
    # so there is no next step to stop before and `stop` need not be asked again.
    interrupted = False
    # What the run's last checkpoint says it would run next: [] once the graph has ended.
    next_nodes: list[str] | None = None
    # The stream is what invoke() runs too; read here, it lets the caller follow the run and stop
    # it between steps. "values" parts come once per step, with the output after it; "checkpoints"
    # parts as each step's checkpoint is made, with the nodes it would run next.
    parts = graph.stream(
        graph_input,
        config,
        context=context,
        stream_mode=["values", "tasks", "custom", "checkpoints"],
        control=control,
        version="v2",
    )
    try:
        for part in parts:
            if part["type"] == "checkpoints":
                next_nodes = part["data"]["next"]
                continue
            if part["type"] == "values":
                output = part["data"]
            elif progress is not None and (message := _progress_message(part)) is not None:
                progress(message, part["type"] == "custom")
            # Asked as each of a step's tasks ends, before LangGraph starts the next step (by the
            # step's "values" part it may have started it already).
            data = part["data"]
            ended = part["type"] == "tasks" and isinstance(data, dict) and "input" not in data
            interrupted = interrupted or (ended and isinstance(data, dict) and bool(data.get("interrupts")))
            if ended and not interrupted and stop is not None and not control.drain_requested and stop():
                control.request_drain("cancelled")
    except GraphDrained:
        pass  # stopped as asked: the checkpoint says where
    values = output if isinstance(output, dict) else {"output": output}
    if next_nodes == [] and not interrupted and not control.drain_requested:
        # Ended: no breakpoint, question or drain stopped it (each leaves a node to run next).
        return RunResult(values=values, interrupts=())
    snapshot = graph.get_state(config)
    stopped = control.drain_requested and bool(snapshot.next) and not snapshot.interrupts
    return RunResult(
        values=values if snapshot.next == () else dict(snapshot.values),
        interrupts=tuple(snapshot.interrupts),
        at_breakpoint=bool(snapshot.next) and not snapshot.interrupts and not stopped,
        stopped=stopped,
    )


def _progress_message(part: Any) -> str | None:
    data = part["data"]
    if part["type"] == "tasks":
        # A step's task starting (its result has "result" or "error" instead of "input").
        return f"Running {data['name']}" if isinstance(data, dict) and "input" in data else None
    if isinstance(data, str):
        return data
    if isinstance(data, dict) and isinstance(data.get("message"), str):
        return data["message"]
    return None


# Errors of our own database, not the agent's: a run that raises one is retried by its task (LangGraph
# goes on from the last checkpoint), never recorded as the agent's failure. A PostgreSQL restart
# leaves the checkpointer's pooled connections dead, and each one fails its next use once.
INFRASTRUCTURE_ERRORS = (psycopg.OperationalError,)


def has_checkpoint(thread_id: str) -> bool:
    return checkpointer().get_tuple(_config(thread_id)) is not None


def state(registered: RegisteredGraph, thread_id: str) -> StateSnapshot:
    return bound(registered.graph).get_state(_config(thread_id))


def pending_interrupts(registered: RegisteredGraph, thread_id: str) -> tuple[Interrupt, ...]:
    return tuple(state(registered, thread_id).interrupts)


def stopped_mid_run(snapshot: StateSnapshot) -> bool:
    """Whether the thread's last run stopped before its end with nothing pending: its process died
    between two checkpoints (or it stopped at a breakpoint). `tasks`, not `next`: a step whose
    nodes all finished but whose checkpoint was not saved yet has no `next`, only their writes."""
    return bool(snapshot.tasks) and not snapshot.interrupts


def delete_thread(thread_id: str) -> None:
    checkpointer().delete_thread(thread_id)


def delete_threads(thread_ids: list[str]) -> None:
    """Delete many threads with the checkpointer's own API: PostgresSaver.prune(strategy="delete")
    removes a whole batch in one transaction (delete_thread commits three DELETEs per thread, 77%
    of the sweep's time at 100,000 calls); savers without prune fall back to delete_thread."""
    saver = checkpointer()
    try:
        saver.prune(thread_ids, strategy="delete")
    except NotImplementedError:
        for thread_id in thread_ids:
            saver.delete_thread(thread_id)
