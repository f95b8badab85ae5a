"""Celery tasks: thin shells around the services.

resume_approval is acknowledged late (a worker killed mid-run leaves it on the queue); a second
delivery finds the answer recorded and does nothing, finds another copy holding the resume's lease
and leaves it to that copy, or finds the thread already resumed and only records what the
checkpoint holds (resumes.approval_resume).
"""

from celery import shared_task

from graph_runtime.work import RETRY_ON_INFRASTRUCTURE

from . import notifications, resumes, services, slack


@shared_task(name=services.RESUME_APPROVAL, acks_late=True, **RETRY_ON_INFRASTRUCTURE)
def resume_approval(approval_id: str) -> None:
    resumes.approval_resume(approval_id=approval_id)


@shared_task(name="approvals.tasks.sweep_approvals")
def sweep_approvals() -> dict[str, int]:
    """Celery beat's "sweep-approvals": decline the approvals nobody decided in time (their resumes
    are enqueued; lost ones are beat's "nudge-stalled-resumes")."""
    return {"approvals_expired": services.approvals_expire()}


@shared_task(name="approvals.tasks.nudge_stalled_resumes", ignore_result=True)
def nudge_stalled_resumes() -> dict[str, int]:
    """Celery beat's "nudge-stalled-resumes": enqueue again the resumes whose worker died."""
    return {"resumes_nudged": resumes.approval_resumes_nudge()}


@shared_task(name="approvals.tasks.escalate_approvals")
def escalate_approvals() -> dict[str, int]:
    """Celery beat's "escalate-approvals": tell staff again of approvals pending too long."""
    return {"approvals_escalated": services.approvals_escalate()}


@shared_task(
    name=notifications.SEND_WEBHOOK,
    autoretry_for=(notifications.WebhookRefused,),
    retry_backoff=5,
    retry_backoff_max=600,
    max_retries=8,
)
def send_webhook(url: str, body: str) -> None:
    """Post a notification; a receiver that is down is tried again with backoff, for about an hour."""
    notifications.post_webhook(url, body)


@shared_task(
    name=slack.RESPOND,
    autoretry_for=(notifications.WebhookRefused,),
    retry_backoff=2,
    retry_backoff_max=60,
    max_retries=5,
)
def slack_respond(url: str, body: str) -> None:
    """Update the Slack message a button was pressed on (its response_url takes five posts in
    thirty minutes): a Slack that is briefly down is tried again."""
    slack.respond(url, body)
