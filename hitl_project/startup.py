"""What every process checks before it serves (web, worker, `make run`): the graphs load.

A graph that cannot be loaded would otherwise surface only at request time, as an error for every
call to it; a process refuses to start instead, with one message per graph naming the fix.
`manage.py check` reports the same problems (mcp_gateway/checks.py)."""

from __future__ import annotations

import sys

from graph_runtime.registry import GraphsUnavailable, Loaded, verify


def graphs_or_exit() -> Loaded:
    try:
        loaded = verify()
    except GraphsUnavailable as problems:
        # One message, no traceback: the problem is in the user's graphs file or graph, not here.
        sys.stderr.write(f"Cannot start: the graphs cannot be served.\n{problems}\n")
        sys.stderr.flush()
        raise SystemExit(1) from None
    from mcp_gateway import metrics

    metrics.served(loaded.graphs)
    return loaded
