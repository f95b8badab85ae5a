"""One thread pool for the runs of a process.

LangGraph runs a run's parallel tasks and its checkpoint writes on a thread pool that it makes for
that run (langchain_core's `get_executor_for_config`, which its `BackgroundExecutor` enters) and
shuts down at the run's end, so every run starts its threads anew. Python starts a pool's thread
while it holds a lock that every pool's `submit` takes (`concurrent.futures.thread`'s
`_global_shutdown_lock`), and a thread takes the GIL before its start returns: with a worker's
eight runs going at once, their submits queued behind each other's thread starts
(docs/performance.md, "Measured choices").

The pool here lives as long as its process. A run's task takes an idle thread, and a thread starts
only when none is idle, so once a process has run as many tasks at once as it will, no run starts a
thread. A pool made for one run waits for nothing but its own tasks at the run's end
(`BackgroundExecutor.__exit__`), and that is still what a run waits for here. A run whose config
sets `max_concurrency` gets a pool of its own of that size, as LangGraph would make it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from concurrent.futures import Executor
from contextlib import contextmanager

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ContextThreadPoolExecutor, get_executor_for_config
from langgraph.pregel import _executor

# More threads than a process ever runs tasks at once: a run's task may wait for another task of
# the pool (a step's writes for the step before), so a pool that could be full would deadlock.
MAX_THREADS = 1024

_lock = threading.Lock()
_pool: ContextThreadPoolExecutor | None = None


def shared_pool() -> ContextThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ContextThreadPoolExecutor(max_workers=MAX_THREADS, thread_name_prefix="graph-task")
        return _pool


def _forget_in_child() -> None:
    # A forked child (Celery's prefork pool) has none of its parent's threads: it makes its own pool.
    global _lock, _pool
    _lock, _pool = threading.Lock(), None


os.register_at_fork(after_in_child=_forget_in_child)


@contextmanager
def executor_for_config(config: RunnableConfig | None) -> Iterator[Executor]:
    """LangGraph's `get_executor_for_config`, with the process's pool unless the run bounds its
    own concurrency."""
    if (config or {}).get("max_concurrency"):
        with get_executor_for_config(config) as own:
            yield own
    else:
        yield shared_pool()


def install() -> None:
    """Have LangGraph's sync runs take their threads from the process's pool."""
    _executor.get_executor_for_config = executor_for_config  # type: ignore[assignment]
