"""The staff side's Prometheus metrics, counted by the services as decisions commit. The gauges of
what waits now (pending approvals, the oldest one's age) are read from the table by the project's
/metrics (hitl_project/metrics.py)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from .models import ApprovalRequest

APPROVALS = Counter(
    "hitl_approvals",
    "Approvals that left the queue, by outcome: approved, rejected, changes_requested, expired, withdrawn.",
    ["outcome"],
)
DECISION_SECONDS = Histogram(
    "hitl_approval_decision_seconds",
    "From an approval's creation to a staff decision (approved or rejected).",
    buckets=(10, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400, float("inf")),
)

# The audit chain's head as appended, kept outside the database: a head moved back with SQL leaves
# this (the highest any process published) above the table's. "max": each process knows only the
# events it appended itself.
AUDIT_HEAD_SEQ = Gauge(
    "hitl_audit_head_seq",
    "The seq of the audit chain's last event, as published when it was appended.",
    multiprocess_mode="max",
)


# Each outcome's series (every status an approval leaves the queue with) from 0 in every process,
# so that rate() and increase() see its first count.
for _outcome in ApprovalRequest.Status:
    if _outcome != ApprovalRequest.Status.PENDING:
        APPROVALS.labels(_outcome)


def decided(approval: ApprovalRequest) -> None:
    """Staff decided (the decision has committed)."""
    assert approval.decided_at is not None
    APPROVALS.labels(approval.status).inc()
    DECISION_SECONDS.observe(max(0.0, (approval.decided_at - approval.created_at).total_seconds()))
