"""The staff queue in the Django admin.

The change page of an approval is read-only for everyone; deciding goes through its own POST view
(`<id>/decide/`, CSRF-protected by admin_view) that needs approvals.decide_approval, records who
decided, and only enqueues the resume: the page never waits for the model. It goes through the same
service as the REST API, so the same rules hold (a thread that is not paused cannot be approved).
While the resumed run is going, the page reloads itself until the answer lands.
"""

from __future__ import annotations

import json

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponseRedirect
from django.template.defaultfilters import linebreaksbr
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.text import Truncator
from django.utils.timesince import timesince, timeuntil
from django.views.decorators.http import require_POST

from . import selectors, services
from .forms import DecisionForm
from .models import ApprovalRequest, ContactMessage, DecidedVia

DECIDE_PERMISSION = "approvals.decide_approval"
NOT_PAUSED = (
    "Nothing was decided: the run is no longer paused on this request, so there is nothing to approve or reject."
)


def _pretty(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


class QueueFilter(admin.SimpleListFilter):
    """Pending first: the changelist opens on the queue, the rest is one click away."""

    title = "queue"
    parameter_name = "queue"

    def lookups(self, request, model_admin):
        return [("decided", "Decided"), ("expired", "Expired"), ("withdrawn", "Withdrawn"), ("all", "All")]

    def choices(self, changelist):
        yield {
            "selected": self.value() is None,
            "query_string": changelist.get_query_string(remove=[self.parameter_name]),
            "display": "Pending",
        }
        for lookup, title in self.lookup_choices:
            yield {
                "selected": self.value() == lookup,
                "query_string": changelist.get_query_string({self.parameter_name: lookup}),
                "display": title,
            }

    def queryset(self, request, queryset):
        Status = ApprovalRequest.Status
        match self.value():
            case "decided":
                return queryset.filter(status__in=[Status.APPROVED, Status.REJECTED])
            case "expired":
                # Swept or not yet: past its deadline an approval can no longer be decided.
                return queryset.filter(Q(status=Status.EXPIRED) | (Q(status=Status.PENDING) & ~selectors.waiting()))
            case "withdrawn":
                return queryset.filter(status=Status.WITHDRAWN)
            case "all":
                return queryset
            case _:
                # The same queue as the REST API's list (selectors.waiting).
                return queryset.filter(selectors.waiting())


class ContactMessageInline(admin.TabularInline):
    model = ContactMessage
    fields = readonly_fields = ("tool", "input", "created_at")
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(admin.ModelAdmin):
    list_display = ["tool", "arguments", "message", "age", "time_left", "status"]
    list_filter = [QueueFilter]
    search_fields = ["thread_id", "visitor_message"]
    ordering = ["-created_at"]
    fieldsets = [
        ("Request", {"fields": ["status", "tool_calls_pretty", "visitor_message", "created_at", "time_left"]}),
        ("Decision", {"fields": ["decided", "decided_at", "note"]}),
        ("Resumed run", {"fields": ["final_answer", "answered_at", "error"]}),
        ("Thread", {"fields": ["thread_id", "graph", "interrupt_id", "call"], "classes": ["collapse"]}),
    ]
    readonly_fields = [
        "status", "tool_calls_pretty", "visitor_message", "created_at", "time_left", "decided", "decided_at",
        "note", "final_answer", "answered_at", "error", "thread_id", "graph", "interrupt_id", "call",
    ]  # fmt: skip
    inlines = [ContactMessageInline]

    # --- columns --------------------------------------------------------------------------------

    @admin.display(description="tool")
    def tool(self, obj: ApprovalRequest) -> str:
        return obj.tool_names

    @admin.display(description="arguments")
    def arguments(self, obj: ApprovalRequest) -> str:
        inputs = [call.get("input") for call in obj.tool_calls]
        return Truncator(json.dumps(inputs[0] if len(inputs) == 1 else inputs, ensure_ascii=False)).chars(100)

    @admin.display(description="visitor message")
    def message(self, obj: ApprovalRequest) -> str:
        return Truncator(obj.visitor_message).chars(100)

    @admin.display(description="age")
    def age(self, obj: ApprovalRequest) -> str:
        return timesince(obj.created_at)

    @admin.display(description="time left")
    def time_left(self, obj: ApprovalRequest) -> str:
        if obj.status != ApprovalRequest.Status.PENDING:
            return "—"
        return "expired" if obj.is_expired else timeuntil(obj.expires_at)

    @admin.display(description="tool calls")
    def tool_calls_pretty(self, obj: ApprovalRequest) -> str:
        return format_html('<pre style="white-space: pre-wrap">{}</pre>', _pretty(obj.tool_calls))

    @admin.display(description="decided by")
    def decided(self, obj: ApprovalRequest) -> str:
        return obj.decider

    @admin.display(description="answer")
    def final_answer(self, obj: ApprovalRequest) -> str | None:
        if obj.answered_at is not None:
            return format_html('<div id="final-answer">{}</div>', linebreaksbr(obj.answer))
        if obj.decided_at is not None:
            return "The resumed run is working; its answer appears here when it lands."
        return None

    # --- permissions: everyone looks, only deciders decide, nobody edits ------------------------

    def has_decide_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(DECIDE_PERMISSION)

    def has_view_permission(self, request, obj=None) -> bool:
        return super().has_view_permission(request, obj) or self.has_decide_permission(request)

    def has_add_permission(self, request) -> bool:
        return False  # approvals come from paused runs only

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # the record of a decision is not editable; deciding is its own view

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    # --- the decision ---------------------------------------------------------------------------

    def get_urls(self):
        decide = self.admin_site.admin_view(require_POST(self.decide_view))
        return [path("<path:object_id>/decide/", decide, name="approvals_approvalrequest_decide"), *super().get_urls()]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        approval = self.get_object(request, object_id)
        extra_context = dict(extra_context or {})
        if approval is not None:
            extra_context.update(
                can_decide=approval.is_decidable and self.has_decide_permission(request),
                decision_form=DecisionForm(),
                decide_url=reverse("admin:approvals_approvalrequest_decide", args=[approval.pk]),
                # Decided, answer not in yet: reload until it lands.
                awaiting_answer=approval.decided_at is not None and approval.answered_at is None,
            )
        return super().change_view(request, object_id, form_url, extra_context)

    def decide_view(self, request: HttpRequest, object_id: str):
        if not self.has_decide_permission(request):
            raise PermissionDenied
        approval = self.get_object(request, object_id)
        if approval is None:
            raise Http404
        change_url = reverse("admin:approvals_approvalrequest_change", args=[approval.pk])
        form = DecisionForm(request.POST)
        if not form.is_valid():
            messages.error(request, "Choose Approve or Reject.")
            return HttpResponseRedirect(change_url)
        try:
            services.approval_decide(
                approval=approval,
                approved=form.cleaned_data["decision"] == "approve",
                note=form.cleaned_data["note"],
                via=DecidedVia.ADMIN,
                user=request.user,
            )
        except services.ApprovalConflict as conflict:
            messages.error(request, str(conflict))
        except services.NothingPending:
            messages.error(request, NOT_PAUSED)
        else:
            verb = "Approved" if form.cleaned_data["decision"] == "approve" else "Rejected"
            messages.success(request, f"{verb}. The run resumes in the background; its answer appears below.")
        return HttpResponseRedirect(change_url)


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
        return format_html('<pre style="white-space: pre-wrap">{}</pre>', _pretty(obj.input))

    def has_add_permission(self, request) -> bool:
        return False  # archived by the resumed run only

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
