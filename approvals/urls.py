from django.contrib import admin
from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from . import api, email_confirm, passkeys, slack, step_up, tokens

urlpatterns = [
    path("api/admin/approvals", api.ApprovalQueue.as_view(), name="approval-queue"),
    # <ref>: an approval_id, or the article's thread_id.
    path("api/admin/approvals/<str:ref>", api.ApprovalDetail.as_view(), name="approval-detail"),
    path("api/admin/audit", api.AuditExport.as_view(), name="audit-export"),
    # Each member of staff's own API tokens: an admin page, behind the admin's login.
    path("admin/api-tokens/", admin.site.admin_view(tokens.tokens_view), name="staff-api-tokens"),
    # Each member of staff's own passkeys, to confirm decisions with (approvals/passkeys.py).
    path("admin/passkeys/", admin.site.admin_view(passkeys.passkeys_view), name="staff-passkeys"),
    path(
        "admin/passkeys/options/",
        admin.site.admin_view(passkeys.registration_options_view),
        name="staff-passkey-options",
    ),
    # Step-up before deciding approvals whose policy requires it (approvals/step_up.py).
    path("admin/step-up/", admin.site.admin_view(step_up.step_up_view), name="staff-step-up"),
    # An e-mail's Approve or Reject link: a confirmation page behind the admin's login; its POST decides.
    path(
        "admin/email-decisions/<str:token>/",
        admin.site.admin_view(email_confirm.email_decision),
        name="approval-email-decision",
    ),
    # The Slack app's Interactivity Request URL: its button presses, signed by Slack.
    path("slack/interactions", slack.interactions, name="slack-interactions"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # Browsable docs, served from drf-spectacular-sidecar's static files (no CDN).
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
    # Last: every path under the API that matched nothing above.
    re_path(r"^api/admin/", api.not_found),
]
