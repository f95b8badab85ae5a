"""Celery tasks: thin shells around the services.

resume_approval is acknowledged late (a worker killed mid-run leaves it on the queue); a second
delivery finds the answer recorded and does nothing, finds another copy holding the resume's lease
and leaves it to that copy, or finds the thread already resumed and only records what the
checkpoint holds (services.approval_resume).
"""

from celery import shared_task

from hitl_project.celery import RETRY_ON_INFRASTRUCTURE

from . import services


@shared_task(
    name="approvals.tasks.resume_approval",
    acks_late=True,
    **RETRY_ON_INFRASTRUCTURE,
)
def resume_approval(approval_id: str) -> None:
    services.approval_resume(approval_id=approval_id)


@shared_task(name="approvals.tasks.expire_approvals")
def expire_approvals() -> dict[str, int]:
    # The approvals' periodic job (CELERY_BEAT_SCHEDULE "expire-approvals"): it also re-enqueues
    # lost resumes, as the gateway's remove_expired_calls nudges stalled rounds.
    return {
        "approvals_expired": services.approvals_expire(),
        "resumes_nudged": services.approval_resumes_nudge(),
    }
