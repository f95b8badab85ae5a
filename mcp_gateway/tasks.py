"""Celery tasks: thin shells around the services.

Tasks are acknowledged late, so a worker killed mid-run leaves the round on the queue for the
next worker; run_round ignores a round that is no longer running, and LangGraph resumes from the
last checkpoint, so a redelivered round finishes once.
"""

from celery import shared_task

from . import calls, cleanup


@shared_task(name="mcp_gateway.tasks.run_round", acks_late=True)
def run_round(round_id: str) -> None:
    calls.run_round(round_id)


@shared_task(name="mcp_gateway.tasks.remove_expired_calls")
def remove_expired_calls() -> dict[str, int]:
    return cleanup.remove_expired_calls()
