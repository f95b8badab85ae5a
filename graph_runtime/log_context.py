"""What the work in hand is about (a call, its round, the tool, the caller, the graph), for every
log line written meanwhile: the log configuration's filter (hitl_project/logs.py) adds it to each
record, so a line from LangGraph or psycopg inside a run names its call as the gateway's own do.

A context variable, so it follows the work: from the MCP view into its database threads and back
(asgiref copies context variables both ways), into a Celery task's body, and into the embedded
default's run threads (work.enqueue runs each task in a copy of the enqueuing context).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

_about: ContextVar[dict[str, Any] | None] = ContextVar("hitl_about", default=None)


def about(**fields: Any) -> None:
    """Say (more) about the work in hand; None leaves a field as it was."""
    current = _about.get() or {}
    _about.set({**current, **{k: v for k, v in fields.items() if v is not None}})


def current() -> dict[str, Any]:
    return _about.get() or {}


def clear() -> None:
    """A new piece of work begins (a task on a thread that ran another before)."""
    _about.set(None)
