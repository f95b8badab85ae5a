"""Tell staff that a call waits for them: one e-mail per approval, through Django's mail framework.

Called after the pause has committed (services.approval_request_create), so nobody is told
about an approval that a rolled-back transaction never created.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.template.loader import render_to_string
from django.urls import reverse


def approval_requested(*, approval_id: Any) -> None:
    from .models import ApprovalRequest

    if not settings.APPROVAL_NOTIFY_EMAIL:
        return
    approval = ApprovalRequest.objects.get(pk=approval_id)
    context = {
        "approval": approval,
        "tool_calls": [
            {"name": call.get("name"), "input": json.dumps(call.get("input"), indent=2, ensure_ascii=False)}
            for call in approval.tool_calls
        ],
        "admin_url": settings.SITE_URL + reverse("admin:approvals_approvalrequest_change", args=[approval.pk]),
    }
    send_mail(
        subject=f"Approval needed: {approval.tool_names or 'a paused tool call'}",
        message=render_to_string("approvals/approval_requested.txt", context),
        from_email=None,  # DEFAULT_FROM_EMAIL
        recipient_list=[settings.APPROVAL_NOTIFY_EMAIL],
    )
