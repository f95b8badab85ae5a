"""Tell staff that a call waits for them: an e-mail through Django's mail framework and, when
APPROVAL_WEBHOOK_URL is set, a signed JSON POST (a Slack-compatible incoming-webhook body), each
with a link to the decision page. Once when an approval is queued, and again to the escalation
address or webhook when it is still pending after APPROVAL_ESCALATE_AFTER; the members of its
approver group (the one escalation handed it to) are e-mailed each time too.

Called after the pause (or the escalation) has committed, so nobody is told about an approval
that a rolled-back transaction never created. The webhook is a Celery task of its own, retried
with backoff, so a receiver that is down never blocks or undoes the pause.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import urllib.error
import urllib.request
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.template.loader import render_to_string
from django.urls import reverse

from graph_runtime import work

from . import email_links, slack_messages

# The Celery task that posts a webhook (tasks.py), enqueued by name: see work.enqueue.
SEND_WEBHOOK = "approvals.tasks.send_webhook"
SIGNATURE_HEADER = "X-HITL-Signature"
TIMESTAMP_HEADER = "X-HITL-Timestamp"


class WebhookRefused(Exception):
    """The receiver answered with an error, or could not be reached: the task retries."""


def decision_page(approval: Any) -> str:
    """The decision page's address (login required): absolute when SITE_URL is set."""
    return settings.SITE_URL + reverse("admin:approvals_approvalrequest_change", args=[approval.pk])


def approval_requested(*, approval_id: Any) -> None:
    _notify(approval_id, escalated=False)


def approval_escalated(*, approval_id: Any) -> None:
    _notify(approval_id, escalated=True)


def _notify(approval_id: Any, *, escalated: bool) -> None:
    from .models import ApprovalRequest

    approval = ApprovalRequest.objects.get(pk=approval_id)
    # An escalation goes to its own address and webhook, where they are set.
    email, url = settings.APPROVAL_NOTIFY_EMAIL, settings.APPROVAL_WEBHOOK_URL
    if escalated:
        email = settings.APPROVAL_ESCALATION_EMAIL or email
        url = settings.APPROVAL_ESCALATION_WEBHOOK_URL or url
    if email:
        _send_email(approval, [email], escalated=escalated)
    if (group := approval.approver_group) is not None:
        # The group that now decides it is told too, each member who has an address.
        members = group.user_set.filter(is_active=True).exclude(email="")
        if addresses := sorted({member.email for member in members} - {email}):
            _send_email(approval, addresses, escalated=escalated)
    if url:
        work.enqueue(SEND_WEBHOOK, url, json.dumps(webhook_body(approval, escalated=escalated), ensure_ascii=False))


def _send_email(approval: Any, recipients: list[str], *, escalated: bool) -> None:
    context = {
        "approval": approval,
        "escalated": escalated,
        "tool_calls": [
            {"name": call.get("name"), "input": json.dumps(call.get("input"), indent=2, ensure_ascii=False)}
            for call in approval.tool_calls
        ],
        "admin_url": decision_page(approval),
        # Fresh single-use links for this e-mail: each opens a confirmation page, never decides.
        "approve_url": email_links.link(approval, email_links.APPROVE),
        "reject_url": email_links.link(approval, email_links.REJECT),
        "link_hours": f"{settings.APPROVAL_EMAIL_LINK_MAX_AGE.total_seconds() / 3600:g}",
    }
    send_mail(
        subject=headline(approval, escalated=escalated),
        message=render_to_string("approvals/approval_requested.txt", context),
        from_email=None,  # DEFAULT_FROM_EMAIL
        recipient_list=recipients,
    )


def headline(approval: Any, *, escalated: bool = False) -> str:
    what = approval.tool_names or "a paused tool call"
    return f"Still waiting for a decision: {what}" if escalated else f"Approval needed: {what}"


def webhook_body(approval: Any, *, escalated: bool) -> dict[str, Any]:
    """Slack's incoming-webhook body (`text`, and Block Kit `blocks` with Approve and Reject buttons
    once Slack's interactions reach us: SLACK_SIGNING_SECRET), with the approval's fields beside it
    for other receivers."""
    link = decision_page(approval)
    title = headline(approval, escalated=escalated)
    body = {
        "text": f"{title}. The visitor wrote: {approval.visitor_message}\n<{link}|Open the decision page>",
        "event": "approval_escalated" if escalated else "approval_requested",
        "approval_id": str(approval.pk),
        "tool_calls": approval.tool_calls,
        "visitor_message": approval.visitor_message,
        "expires_at": approval.expires_at.isoformat(),
        "url": link,
        "required_by": approval.required_by,
        "approvals_required": approval.approvals_required,
    }
    if settings.SLACK_SIGNING_SECRET:
        body["blocks"] = slack_messages.approval_blocks(approval, headline=title, link=link)
    return body


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """HMAC-SHA256 of "<timestamp>.<body>" with the shared secret, as Slack and Stripe sign: the
    receiver recomputes it, and refuses an old timestamp so a captured request cannot be replayed."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def post_webhook(url: str, body: str) -> None:
    """POST the body, signed when APPROVAL_WEBHOOK_SECRET is set. Raises WebhookRefused on any
    failure, for the task to retry."""
    data = body.encode()
    headers = {}
    if settings.APPROVAL_WEBHOOK_SECRET:
        timestamp = str(int(time.time()))
        headers[TIMESTAMP_HEADER] = timestamp
        headers[SIGNATURE_HEADER] = signature(settings.APPROVAL_WEBHOOK_SECRET, timestamp, data)
    post_json(url, data, headers)


def post_json(url: str, data: bytes, headers: dict[str, str] | None = None) -> None:
    """POST a JSON body; raises WebhookRefused on any failure, for the task to retry."""
    headers = {"Content-Type": "application/json", **(headers or {})}
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=settings.APPROVAL_WEBHOOK_TIMEOUT) as response:
            response.read()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise WebhookRefused(f"{url}: {exc}") from exc
