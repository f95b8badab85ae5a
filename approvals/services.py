"""Every state change of an approval on the staff side, by job, under the names the rest of the
project calls them by (the gateway's hand-over, the Celery tasks, management commands, tests):

- decisions.py, the staff decision and every rule of it under the approval's row lock:
  `approval_decide`, `approval_request_changes` (and `approval_for_thread`, `paused_on`);
- lifecycle.py, the approval's life around it: `approval_request_create` (the pause),
  `approval_withdraw`, `approvals_escalate`, `approvals_expire`;
- refusals.py, why a decision was refused, each refusal with its one HTTP status.
"""

from __future__ import annotations

from .decisions import approval_decide, approval_for_thread, approval_request_changes, paused_on
from .lifecycle import (
    EXPIRED_NOTE,
    RESUME_APPROVAL,
    RESUMING,
    approval_request_create,
    approval_withdraw,
    approvals_escalate,
    approvals_expire,
    bound_policy,
    is_staff_approval,
    model_text,
    requested_digest,
)
from .refusals import (
    AlreadyDecided,
    ChangesNotGiven,
    InvalidEdit,
    NotAllowed,
    NothingPending,
    PolicyChanged,
    Refusal,
    SameApprover,
    StepUpProofInvalid,
    StepUpRequired,
)
from .step_up import StepUpProof

__all__ = [
    "EXPIRED_NOTE",
    "RESUME_APPROVAL",
    "RESUMING",
    "AlreadyDecided",
    "ChangesNotGiven",
    "InvalidEdit",
    "NotAllowed",
    "NothingPending",
    "PolicyChanged",
    "Refusal",
    "SameApprover",
    "StepUpProof",
    "StepUpProofInvalid",
    "StepUpRequired",
    "approval_decide",
    "approval_for_thread",
    "approval_request_changes",
    "approval_request_create",
    "approval_withdraw",
    "approvals_escalate",
    "approvals_expire",
    "bound_policy",
    "is_staff_approval",
    "model_text",
    "paused_on",
    "requested_digest",
]
