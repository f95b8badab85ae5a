"""The records kept beside the queue, read-only or nearly: the audit chain (and its export), the
archived contact messages, the staff API tokens, the Slack identities staff decide as, and the
TOTP devices staff step up with."""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseRedirect
from django.http.response import HttpResponseBase
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.text import Truncator
from django_otp.plugins.otp_totp.admin import TOTPDeviceAdmin
from django_otp.plugins.otp_totp.models import TOTPDevice
from knox.models import AuthToken

from .. import audit, tokens
from ..models import AuditEvent, ContactMessage, StaffIdentity
from .display import pretty


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """The audit chain, read-only, and its export as JSON Lines (`export/?since=&until=`). Nobody
    edits or deletes a link: the chain would no longer verify (manage.py verify_audit)."""

    list_display = ["seq", "at", "kind", "approval_id", "actor", "short_hash"]
    list_filter = ["kind"]
    search_fields = ["approval_id", "actor"]
    date_hierarchy = "at"
    fields = readonly_fields = ("seq", "at", "kind", "approval_id", "actor", "data", "prev_hash", "hash")

    @admin.display(description="hash")
    def short_hash(self, obj: AuditEvent) -> str:
        return f"{obj.hash[:16]}…"

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def get_urls(self):
        export = self.admin_site.admin_view(self.export_view)
        return [path("export/", export, name="approvals_auditevent_export"), *super().get_urls()]

    def export_view(self, request: HttpRequest) -> HttpResponseBase:
        """The events between two dates, as JSON Lines, streamed (audit.export_lines)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            since = audit.bound(request.GET.get("since"))
            until = audit.bound(request.GET.get("until"), end=True)
        except audit.BadBound as bad:
            messages.error(request, f"Nothing was exported: {bad}")
            return HttpResponseRedirect(reverse("admin:approvals_auditevent_changelist"))
        return audit.export_response(since, until)


@admin.register(ContactMessage)
class ContactMessageAdmin(admin.ModelAdmin):
    list_display = ["created_at", "tool", "sender", "text", "approval"]
    ordering = ["-created_at"]
    fields = readonly_fields = ("tool", "input_pretty", "approval", "position", "created_at")

    @admin.display(description="from")
    def sender(self, obj: ContactMessage) -> str:
        return " ".join(str(obj.input.get(k)) for k in ("name", "email") if obj.input.get(k))

    @admin.display(description="message")
    def text(self, obj: ContactMessage) -> str:
        return Truncator(str(obj.input.get("message", ""))).chars(120)

    @admin.display(description="input")
    def input_pretty(self, obj: ContactMessage) -> str:
        return format_html('<pre style="white-space: pre-wrap">{}</pre>', pretty(obj.input))

    def has_add_permission(self, request) -> bool:
        return False  # archived by the resumed run only

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


# Knox's own admin makes a token for any user id and shows it in a flash message beside its digest.
# Staff make their own on their API tokens page (tokens.py); here, whoever may manage knox's tokens
# sees everyone's by owner and name, and may revoke them.
admin.site.unregister(AuthToken)


@admin.register(AuthToken)
class StaffTokenAdmin(admin.ModelAdmin):
    list_display = ["user", "name", "created", "expiry"]
    list_select_related = ["user", "staff_name"]
    search_fields = ["user__username", "staff_name__name"]
    fields = readonly_fields = ("user", "name", "created", "expiry")
    ordering = ["-created"]

    @admin.display(description="name")
    def name(self, obj: AuthToken) -> str:
        return tokens.token_name(obj)

    def has_add_permission(self, request) -> bool:
        return False  # on the API tokens page, each for themselves: /admin/api-tokens/

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(StaffIdentity)
class StaffIdentityAdmin(admin.ModelAdmin):
    """Which Slack user decides as which member of staff (approvals/slack.py): Django's own model
    permissions say who may link them."""

    list_display = ["user", "slack_user_id"]
    search_fields = ["user__username", "slack_user_id"]
    autocomplete_fields = ["user"]


# django-otp's admin asks for the device's owner as a raw user id; whoever enrols a device for a
# member of staff picks them by name instead, as for a Slack identity.
admin.site.unregister(TOTPDevice)


@admin.register(TOTPDevice)
class StaffTOTPDeviceAdmin(TOTPDeviceAdmin):
    raw_id_fields: list[str] = []
    autocomplete_fields = ["user"]
