"""Run or resume one graph on one thread, and report where it stopped.

What is pending is what the thread's checkpoint holds (`get_state().interrupts`, in the order of its
step's tasks), never the order in which the stream reported it, which follows the order the tasks
of a step happened to end in. A run whose last checkpoint has nothing left to run ended, with
nothing pending: its output is its state, and the thread is not read back. A run that paused in a
step it ran whole, from its start or a resume, reports what the checkpoint holds from its own
stream (`_paused_from_stream`); any other stop reads the thread back.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, cast

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import PUSH  # what a task a Send started has for its trigger
from langgraph.errors import GraphDrained
from langgraph.pregel import Pregel
from langgraph.runtime import RunControl
from langgraph.types import Command, Interrupt, StateSnapshot

from . import executor
from .checkpointer import Fence, check_fence, checkpointer
from .registry import RegisteredGraph

executor.install()  # every run of this process takes its threads from one pool (executor.py)

logger = logging.getLogger(__name__)

# Who hears the log lines of the graph that runs in this context (run's `log`): LangGraph runs a
# graph's nodes in threads with a copy of the context that starts them.
_hearing: ContextVar[tuple[str, int, Callable[[logging.LogRecord], None]] | None] = ContextVar(
    "hitl_run_log", default=None
)


class _GraphLog(logging.Handler):
    """Hands a running graph's own log lines (its package's loggers, at the level asked or above)
    to its run's `log`; every other line, the service's and the libraries', stays in the log."""

    def emit(self, record: logging.LogRecord) -> None:
        hearing = _hearing.get()
        if hearing is None:
            return
        package, level, hear = hearing
        if record.levelno >= level and (record.name == package or record.name.startswith(f"{package}.")):
            try:
                hear(record)
            except Exception:  # a line that cannot be told (bad format arguments) fails nothing
                self.handleError(record)


_GRAPH_LOG = _GraphLog()

# The fence of the run whose graph runs in this context (run's `fence`), for require_lease.
_fence: ContextVar[Fence | None] = ContextVar("hitl_run_fence", default=None)


def require_lease() -> None:
    """For a node, right before a side effect it must not make twice: raises leases.LeaseLost
    unless its run still holds its lease (the run then ends as lost: nothing recorded, and the
    worker that took it over runs the node again from the last checkpoint). One query on
    PostgreSQL. Outside a leased run (a test, LangGraph's own server) it does nothing.

    It closes the window between the effect and the run's loss down to the effect itself: a
    process stopped after the check, mid-effect, still finishes it when it goes on."""
    fence = _fence.get()
    if fence is not None:
        check_fence(fence)


@contextmanager
def _heard(registered: RegisteredGraph, log: Callable[[logging.LogRecord], None] | None, level: int) -> Iterator[None]:
    if log is None:
        yield
        return
    root = logging.getLogger()
    if _GRAPH_LOG not in root.handlers:
        # Added when first needed: Django's logging configuration replaces the root's handlers.
        root.addHandler(_GRAPH_LOG)
    token = _hearing.set((registered.module.split(".")[0], level, log))
    try:
        yield
    finally:
        _hearing.reset(token)


@dataclass(frozen=True)
class RunResult:
    values: dict[str, Any]
    interrupts: tuple[Interrupt, ...]
    # Stopped at interrupt_before/interrupt_after: paused with nothing to ask.
    at_breakpoint: bool = False
    # Stopped between two steps because `stop` said so (a cancelled task).
    stopped: bool = False


def bound(graph: Pregel, fence: Fence | None = None) -> Pregel[Any, Any, Any, Any]:
    return graph.copy(update={"checkpointer": checkpointer(fence=fence)})


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
    progress: Callable[[str, bool, dict[str, float] | None], None] | None = None,
    stop: Callable[[], bool] | None = None,
    log: Callable[[logging.LogRecord], None] | None = None,
    log_level: int = logging.INFO,
    fence: Fence | None = None,
) -> RunResult:
    """Start the graph with `arguments`, resume it with `{interrupt_id: value}`, or (`carry_on`)
    go on from the thread's last checkpoint, as LangGraph does when invoked with no input.

    `progress` hears, as the run goes, which step it is on (False) and what the graph reports
    through LangGraph's custom stream writer (True: a string, or a dict's "message"), with the
    numbers such a dict gives ({"progress": n} and "total" where it has them, else None). `stop` is asked as each
    task of a step ends: once it says True, the run stops before its next step, through LangGraph's own
    cooperative drain (RunControl.request_drain: the step that ran is checkpointed, the next one
    never starts). `log` hears the log lines of the graph's own package at `log_level` or above.
    `fence` (leases.Held.fenced): every checkpoint is written only while the run holds its lease;
    a write refused raises leases.LeaseLost, and the run stops there.

    Raises whatever the graph raises; the caller decides what an error means for its call.
    """
    graph = bound(registered.graph, fence)
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
    # The run's last checkpoint as streamed (its "next" is [] once the graph has ended), the tasks
    # that ended in this run with the ids of the interrupts each raised, and those interrupts.
    checkpoint: dict[str, Any] | None = None
    ended_tasks: dict[str, list[str]] = {}
    raised: list[Interrupt] = []
    sent: set[str] = set()  # the tasks a Send started (PUSH), not an edge
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
        # Each step's checkpoint is written before the next step starts: with LangGraph's default
        # ("async") a node's side effect could run while the step before it was still being
        # written, and a write that then failed (the database restarted, the lease was lost) had the
        # run retried from before that step, so the effect ran twice.
        durability="sync",
    )
    fenced = _fence.set(fence)
    with _heard(registered, log, log_level):
        try:
            for part in parts:
                kind, data = part["type"], cast(Any, part["data"])
                if kind == "checkpoints":
                    checkpoint = data
                    continue
                if part["type"] == "values":  # not `kind`: this narrows the part's type for "interrupts"
                    output = data
                    raised.extend(part["interrupts"])
                elif progress is not None and (message := _progress_message(part)) is not None:
                    progress(message, kind == "custom", _progress_numbers(part))
                if kind != "tasks" or not isinstance(data, dict):
                    continue
                if "input" in data:  # a task starting; its end has "result" or "error" instead
                    if PUSH in data.get("triggers", ()):
                        sent.add(data["id"])
                    continue
                ended_tasks[data["id"]] = [i["id"] for i in data.get("interrupts") or ()]
                interrupted = interrupted or bool(ended_tasks[data["id"]])
                # Asked as each of a step's tasks ends, before LangGraph starts the next step (by the
                # step's "values" part it may have started it already).
                if not interrupted and stop is not None and not control.drain_requested and stop():
                    control.request_drain("cancelled")
        except GraphDrained:
            pass  # stopped as asked: the checkpoint says where
        finally:
            _fence.reset(fenced)
    values = output if isinstance(output, dict) else {"output": output}
    if checkpoint is not None and checkpoint["next"] == [] and not interrupted and not control.drain_requested:
        # Ended: no breakpoint, question or drain stopped it (each leaves a node to run next).
        return RunResult(values=values, interrupts=())
    if interrupted and not control.drain_requested and not carry_on:
        paused = _paused_from_stream(graph, checkpoint, ended_tasks, sent, raised)
        if paused is not None:
            return paused
    snapshot = graph.get_state(config)
    stopped = control.drain_requested and bool(snapshot.next) and not snapshot.interrupts
    return RunResult(
        values=values if snapshot.next == () else dict(snapshot.values),
        interrupts=tuple(snapshot.interrupts),
        at_breakpoint=bool(snapshot.next) and not snapshot.interrupts and not stopped,
        stopped=stopped,
    )


def _paused_from_stream(
    graph: Pregel,
    checkpoint: dict[str, Any] | None,
    ended_tasks: dict[str, list[str]],
    sent: set[str],
    raised: list[Interrupt],
) -> RunResult | None:
    """What get_state would read back after a run that paused, from what the run streamed; None
    when the stream cannot tell it for certain, and the caller reads the thread back.

    The run's last checkpoint is the one saved before the step that paused (a step that pauses
    saves none), streamed with that step's tasks and its values. Certain only when every one of
    those tasks ended in this run with a question, so the stream saw each one's interrupts and no
    task's writes are pending beside them: a run that started or resumed its step, not one that
    carried on (a task whose writes an earlier attempt saved does not run again), nor a task
    LangGraph streams nothing of (tagged hidden). The interrupts are those the "values" parts
    carried, as LangGraph's own invoke(version="v2") collects them, in get_state's order: the
    tasks a Send started first, as the step lists them, then the others in the order of the
    graph's nodes (the step lists those by name). Saves reading the thread back (a query, and the
    checkpoint's tasks prepared again; docs/performance.md, "Measured choices");
    tests/inprocess/test_runner.py holds both to the same answer."""
    if checkpoint is None or not isinstance(checkpoint["values"], dict):
        return None  # values coerced to the state's class (version="v2"): get_state's are a dict
    tasks = checkpoint["tasks"]
    if not all(ended_tasks.get(task["id"]) for task in tasks):
        # A task that ended without a question saved writes that get_state's values show.
        return None
    node = {name: n for n, name in enumerate(graph.nodes)}
    position = {task["id"]: (0, n) if task["id"] in sent else (1, node[task["name"]]) for n, task in enumerate(tasks)}
    ids = [i for task_id in sorted(position, key=position.__getitem__) for i in ended_tasks[task_id]]
    by_id = {interrupt.id: interrupt for interrupt in raised}
    if not ids or sorted(ids) != sorted(by_id):  # the values parts carried exactly the tasks' interrupts
        return None
    return RunResult(values=dict(checkpoint["values"]), interrupts=tuple(by_id[i] for i in ids))


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


def _progress_numbers(part: Any) -> dict[str, float] | None:
    """The `progress` (and `total`) numbers of a custom report, as MCP's notifications/progress
    carries them; None when it gives no progress number."""
    data = part["data"]
    if part["type"] != "custom" or not isinstance(data, dict):
        return None
    numbers = {k: data[k] for k in ("progress", "total") if _is_number(data.get(k))}
    return numbers if "progress" in numbers else None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


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
    removes a whole batch in one transaction (delete_thread commits three DELETEs per thread, most
    of the sweep's time: docs/performance.md, "Measured choices"); savers without prune fall back to
    delete_thread."""
    saver = checkpointer()
    try:
        saver.prune(thread_ids, strategy="delete")
    except NotImplementedError:
        for thread_id in thread_ids:
            saver.delete_thread(thread_id)
