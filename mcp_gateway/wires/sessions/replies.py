"""The older revisions' rendering of a tool call's outcomes (calls/outcomes.py). A client asked on
its session's stream (MCP_OLDER_CLIENTS=answer) gets the call's event stream for a round of
questions or a run still going (call_streams.py); a 2025-11-25 client that asked for a task gets
the tasks utility's CreateTaskResult (older_tasks.py); every other outcome is the result itself."""

from __future__ import annotations

from typing import Any

from mcp_gateway.auth import Caller
from mcp_gateway.calls import links, waiter, waiting
from mcp_gateway.calls.outcomes import BecameTask, Finished, Outcome
from mcp_gateway.calls.tool_calls import Client, Waiting
from mcp_gateway.models import Round, Session
from mcp_gateway.protocol import Message, invalid_request_state
from mcp_gateway.wires.mcp_tasks import mcp_task_handles
from mcp_gateway.wires.sessions import call_streams, older_tasks, sessions

Reply = dict[str, Any] | call_streams.Streaming


def client(message: Message, session: Session | None) -> Client:
    """What an older client can do: be asked on its session's stream, where it has one that asks
    (its capabilities declared once, in the session's initialize); start a task where its revision
    has the tasks utility."""
    on_stream = sessions.asks_on_stream(session)
    if older_tasks.served(message.version):
        asked = isinstance(message.params.get("task"), dict)
        starts_as_task = older_tasks.starts_as_task(asked)
    else:
        starts_as_task = mcp_task_handles.starts_as_task(declared=False)
    return Client(
        capabilities=session.capabilities if on_stream and session is not None else message.client_capabilities,
        rounds=False,
        on_stream=on_stream,
        starts_as_task=starts_as_task,
        links=links.available(),
        info=session.client_info if session is not None else None,
    )


def reply(message: Message, caller: Caller, session: Session | None, outcome: Outcome) -> Reply:
    """`session`: the one the client is asked on, if it is."""
    if isinstance(outcome, Finished):
        return outcome.result
    if isinstance(outcome, BecameTask):
        created = mcp_task_handles.create(outcome.call)
        if session is not None and (token := message.progress_token) is not None:
            # 2025-11-25: the token stays valid for the task's life; its tasks/result stream uses it.
            older_tasks.keep_progress_token(created["taskId"], token)
        return older_tasks.created(created)
    # A round of questions, or a run still going: the call's stream asks them, or waits for it.
    if session is None or not Round.objects.filter(pk=outcome.round.pk).exists():
        raise invalid_request_state()  # removed meanwhile
    return call_streams.open_stream(session, message.id, caller, outcome.round.call_id)


async def reply_after_run(
    step: Waiting, message: Message, session: Session | None, *, moved: waiter.Moved | None = None
) -> Reply:
    return await waiting.outcome_after_run(
        step, lambda outcome: reply(message, step.req.caller, session, outcome), moved=moved
    )
