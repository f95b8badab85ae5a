"""The staff side of the gateway's hand-over point (mcp_gateway.handover): a run that pauses on a
staff_approval interrupt is queued for staff, and the MCP tool call ends at once with a normal
result saying so.

Registered in ApprovalsConfig.ready(); the gateway calls it in the worker, inside the transaction
that records the round, so the approval rows and the call's new status commit together. When the
client cancels the task that waits for staff, the gateway calls `withdraw`.
"""

from __future__ import annotations

import logging

from django.conf import settings

from mcp_gateway.handover import HandoverResult, PausedCall

from .lifecycle import approval_request_create, approval_withdraw, is_staff_approval, model_text

logger = logging.getLogger(__name__)

# The article's notice, appended to whatever the model had already said to the visitor.
APPROVAL_NOTICE = "\n\nThis request needs the owner's personal approval — it has been queued for review."


def hand_over(paused: PausedCall) -> HandoverResult:
    said = model_text(paused.state)
    approvals = [
        approval_request_create(
            call_id=paused.call_id,
            thread_id=paused.thread_id,
            graph=paused.graph,
            interrupt=i,
            caller=paused.caller,
            agent_message=said,
            requested_by_id=paused.caller_user_id,
        )
        for i in paused.interrupts
        if is_staff_approval(i)
    ]
    logger.info("call %s on thread %s is pending staff approval %s", paused.call_id, paused.thread_id, approvals[0].pk)
    text = (said + APPROVAL_NOTICE).strip()
    return HandoverResult(
        text=text,
        structured={"approval_id": str(approvals[0].pk), "status": "pending"},
        keep_for=settings.APPROVAL_TTL,
    )


def withdraw(call_id) -> bool:
    return approval_withdraw(call_id=call_id)
