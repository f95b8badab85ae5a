"""The calls' part of the periodic sweep (Celery beat's "sweep-calls", tasks.py): remove expired calls
together with their LangGraph threads. (The rounds whose worker died are
round_queue.py's, which beat runs on its own, every STALLED_CHECK_SECONDS.) And, for a process that
runs every round itself, taking over what a previous process left running.

Safe on several processes at once: each batch of expired calls is claimed with SELECT ... FOR
UPDATE SKIP LOCKED (where the database has it), so two sweeps never take the same call, and no
lock is held longer than one batch.
"""

from __future__ import annotations

import logging

from django.db import connection, transaction
from django.utils import timezone

from graph_runtime import runner
from mcp_gateway import metrics
from mcp_gateway.calls.round_queue import enqueue_round
from mcp_gateway.models import Round, ToolCall

logger = logging.getLogger(__name__)

BATCH = 500


def remove_expired_calls(*, batch: int = BATCH, limit: int | None = None) -> dict[str, int]:
    removed = 0
    while limit is None or removed < limit:
        with transaction.atomic():
            now = timezone.now()
            expired = (
                ToolCall.objects.filter(expires_at__lte=now)
                .exclude(status=ToolCall.Status.AWAITING_STAFF)
                # A call whose round runs now (or is about to) goes when the run has ended, with
                # a new lifetime; a round whose worker died (lease run out) does not hold it.
                .exclude(pk__in=Round.objects.filter(Round.live(now)).values("call_id"))
            )
            if connection.features.has_select_for_update_skip_locked:
                expired = expired.select_for_update(skip_locked=True)
            taken = list(expired.order_by("expires_at").values_list("pk", "thread_id", "tool_name", "status")[:batch])
            if not taken:
                break
            runner.delete_threads([thread_id for _, thread_id, _, _ in taken])
            ToolCall.remove([pk for pk, _, _, _ in taken])
            metrics.calls_removed([(tool, status != ToolCall.Status.FINISHED) for _, _, tool, status in taken])
        removed += len(taken)
    if removed:
        logger.info("removed %d expired tool calls with their threads", removed)
    return {"calls_removed": removed}


def take_over_running_rounds() -> int:
    """For a process that runs every round itself (the embedded default), as it starts: no round can
    be running yet, so a RUNNING round was left by a process stopped mid-run or before the round's
    turn. Its lease ends now and it is enqueued again, so it carries on from its last checkpoint
    instead of waiting out RUN_LEASE_SECONDS before anyone finds it stalled."""
    Round.end_leases_left_running(timezone.now())
    round_ids = list(Round.objects.filter(state=Round.State.RUNNING).values_list("pk", flat=True))
    for round_id in round_ids:
        enqueue_round(round_id)
    return len(round_ids)
