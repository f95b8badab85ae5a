"""The staff queue in the Django admin: the list of approvals (its filters in admin_filters.py),
the dashboard (its figures in dashboard.py), and each approval's decision page.

The decision page is read-only for everyone; deciding goes through its own POST view and the bulk
actions (deciding.py), which hand the decision to the same service as every other door, so the same
rules hold. While the resumed run is going, the page reloads itself until the answer lands.
"""

from __future__ import annotations

import json
from datetime import timedelta

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponseRedirect, JsonResponse
from django.http.response import HttpResponseBase
from django.template.defaultfilters import linebreaksbr
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator
from django.utils.timesince import timesince, timeuntil
from django.views.decorators.http import require_POST

from graph_runtime.admin_paginator import EstimatedCountPaginator

from .. import audit, dashboard, evidence, passkeys, step_up
from ..admin_filters import AgeFilter, PolicyFilter, QueueFilter, ToolFilter
from ..forms import DecisionForm
from ..models import ApprovalRequest, AuditEvent, ContactMessage, Delegation
from .deciding import DecidingAdmin
from .display import pretty, readable, readable_answer

SOON = timedelta(days=1)


class ContactMessageInline(admin.TabularInline):
    model = ContactMessage
    fields = readonly_fields = ("tool", "input", "created_at")
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(DecidingAdmin):
    list_display = ["tool", "arguments", "message", "age", "time_left", "escalated", "state", "required_by"]
    list_filter = [QueueFilter, ToolFilter, AgeFilter, PolicyFilter]
    # A list of a hundred thousand approvals is not counted on each load (graph_runtime/admin_paginator.py).
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    search_fields = ["thread_id", "visitor_message"]
    ordering = ["-created_at"]
    list_select_related = ["policy"]
    # The decision page (templates/admin/approvals/approvalrequest/change_form.html) puts what is
    # asked and the decision first; these are the record's details, shown collapsed below it.
    readonly_fields = [
        "status", "tool_calls_pretty", "edited_pretty", "visitor_message", "agent_message", "created_at",
        "time_left", "decided", "decided_at", "note", "final_answer", "answered_at", "error", "thread_id", "graph",
        "interrupt_id", "call", "required_by", "policy", "signoffs_given", "digest", "approved_digest", "audit_trail",
        "approver_group", "requested_by", "revision_of",
    ]  # fmt: skip
    inlines = [ContactMessageInline]

    def get_fieldsets(self, request, obj=None):
        # Only what this approval has: no empty "Decision" or "Resumed run" while it is pending.
        request_fields = [
            "status", "tool_calls_pretty", "visitor_message", "agent_message", "created_at", "time_left", "required_by",
        ]  # fmt: skip
        if obj is None or not obj.agent_message:
            request_fields.remove("agent_message")
        if obj is not None and obj.policy_id is not None:
            request_fields.append("policy")
        if obj is not None and obj.approver_group_id is not None:
            request_fields.append("approver_group")
        if obj is not None and obj.requested_by_id is not None:
            request_fields.append("requested_by")
        if obj is not None and obj.revision_of_id is not None:
            request_fields.append("revision_of")
        fieldsets = [("Request", {"fields": request_fields})]
        if obj is not None and obj.approvals_required > 1:
            fieldsets.append(("Approvals", {"fields": ["signoffs_given"]}))
        if obj is not None and obj.decided_at is not None:
            decision = ["decided", "decided_at", "note", *(["edited_pretty"] if obj.edited_tool_calls else [])]
            fieldsets.append(("Decision", {"fields": decision}))
        if obj is not None and obj.answered_at is not None:
            fieldsets.append(
                ("Resumed run", {"fields": ["final_answer", "answered_at", *(["error"] if obj.error else [])]})
            )
        fieldsets.append(("Thread", {"fields": ["thread_id", "graph", "interrupt_id", "call"]}))
        audit_fields = [
            "digest",
            *(["approved_digest"] if obj is not None and obj.approved_digest else []),
            "audit_trail",
        ]
        fieldsets.append(("Audit", {"fields": audit_fields}))
        return fieldsets

    def changelist_view(self, request, extra_context=None):
        # Without the admin's navigation beside it, the queue's columns fit a laptop's 1366 px
        # screen without scrolling sideways; the breadcrumbs lead everywhere the sidebar did.
        return super().changelist_view(request, {"is_nav_sidebar_enabled": False, **(extra_context or {})})

    def get_queryset(self, request):
        # The queue's "1 of 2" counts each row's approvals: one query for the page, not one a row.
        return super().get_queryset(request).prefetch_related("signoffs")

    def get_inlines(self, request, obj):
        # The archived messages, once there are any.
        return self.inlines if obj is not None and obj.contact_messages.exists() else []

    # --- columns --------------------------------------------------------------------------------

    @admin.display(description="tool")
    def tool(self, obj: ApprovalRequest) -> str:
        return obj.tool_names

    @admin.display(description="arguments")
    def arguments(self, obj: ApprovalRequest) -> str:
        # "name: Ada · email: ada@example.com · message: …", not JSON: it reads, and wraps in a
        # column narrow enough for the queue to fit a laptop's screen.
        shown = [
            f"{key}: {value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}"
            for call in obj.tool_calls
            for key, value in (call.get("input") if isinstance(call.get("input"), dict) else {}).items()
        ]
        return Truncator(" · ".join(shown)).chars(90)

    @admin.display(description="visitor message")
    def message(self, obj: ApprovalRequest) -> str:
        return Truncator(obj.visitor_message).chars(80)

    # Sortable both ways: newest or oldest first, soonest or latest deadline first.
    @admin.display(description="age", ordering="created_at")
    def age(self, obj: ApprovalRequest) -> str:
        return timesince(obj.created_at)

    @admin.display(description="time left", ordering="expires_at")
    def time_left(self, obj: ApprovalRequest) -> str:
        if obj.status != ApprovalRequest.Status.PENDING:
            return "—"
        if obj.is_expired:
            return "expired"
        if obj.expires_at - timezone.now() < SOON:
            # Within a day of its deadline: in a warning colour.
            return format_html(
                '<strong class="expires-soon" style="color: #b02a37">{}</strong>', timeuntil(obj.expires_at)
            )
        return timeuntil(obj.expires_at)

    @admin.display(description="status", ordering="status")
    def state(self, obj: ApprovalRequest) -> str:
        if obj.progress:
            return format_html('{} <strong class="progress">{}</strong>', obj.get_status_display(), obj.progress)
        return obj.get_status_display()

    @admin.display(description="required by", ordering="policy_name")
    def required_by(self, obj: ApprovalRequest) -> str:
        return obj.required_by

    @admin.display(description="approved by")
    def signoffs_given(self, obj: ApprovalRequest) -> str:
        """Each approval of a request that needs several: who, through which door, when, the note."""
        given = [
            format_html(
                "<li>{} ({}), {}{}</li>",
                signoff.who,
                signoff.get_via_display(),
                f"{timezone.localtime(signoff.created_at):%Y-%m-%d %H:%M}",
                f": “{signoff.note}”" if signoff.note else "",
            )
            for signoff in obj.signoffs.all()
        ]
        return format_html(
            "<ul>{}</ul>{} of {} approvals", format_html_join("", "{}", ((item,) for item in given)), len(given),
            obj.approvals_required,
        )  # fmt: skip

    # Marked only where it happened: a red ✗ on every other row read as an error.
    @admin.display(description="escalated", ordering="escalated_at", empty_value="")
    def escalated(self, obj: ApprovalRequest) -> str:
        if obj.escalated_at is None:
            return ""
        return format_html('<strong class="escalated" style="color: #b02a37">escalated</strong>')

    @admin.display(description="tool calls")
    def tool_calls_pretty(self, obj: ApprovalRequest) -> str:
        return format_html('<pre style="white-space: pre-wrap">{}</pre>', pretty(obj.tool_calls))

    @admin.display(description="arguments approved instead")
    def edited_pretty(self, obj: ApprovalRequest) -> str:
        return format_html('<pre style="white-space: pre-wrap">{}</pre>', pretty(obj.edited_tool_calls))

    @admin.display(description="audit trail")
    def audit_trail(self, obj: ApprovalRequest) -> str:
        """This approval's links of the audit chain, in order."""
        rows = [
            (
                event.seq,
                f"{timezone.localtime(event.at):%Y-%m-%d %H:%M:%S}",
                event.kind,
                event.actor or "—",
                event.data.get("digest") or "",
                event.hash[:16],
            )
            for event in AuditEvent.objects.filter(approval_id=obj.pk)
        ]
        return format_html(
            '<table id="audit-trail"><tr><th>#</th><th>when</th><th>event</th><th>by</th><th>digest</th>'
            "<th>hash</th></tr>{}</table>",
            format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td>"
                             "<td><code>{}…</code></td></tr>", rows),
        )  # fmt: skip

    @admin.display(description="decided by")
    def decided(self, obj: ApprovalRequest) -> str:
        return obj.decider

    @admin.display(description="answer")
    def final_answer(self, obj: ApprovalRequest) -> str | None:
        if obj.answered_at is not None:
            return format_html("<div>{}</div>", linebreaksbr(obj.answer))
        if obj.decided_at is not None:
            return "The resumed run is working; its answer appears here when it lands."
        return None

    # --- permissions: everyone looks, only deciders decide, nobody edits ------------------------

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
        passkey = self.admin_site.admin_view(require_POST(self.passkey_options_view))
        dashboard = self.admin_site.admin_view(self.dashboard_view)
        evidence_view = self.admin_site.admin_view(self.evidence_view)
        return [
            path("dashboard/", dashboard, name="approvals_dashboard"),
            path("evidence/", evidence_view, name="approvals_approvalrequest_evidence_period"),
            path("<path:object_id>/evidence/", evidence_view, name="approvals_approvalrequest_evidence"),
            path("<path:object_id>/decide/passkey/", passkey, name="approvals_approvalrequest_decide_passkey"),
            path("<path:object_id>/decide/", decide, name="approvals_approvalrequest_decide"),
            *super().get_urls(),
        ]

    def evidence_view(self, request: HttpRequest, object_id: str | None = None) -> HttpResponseBase:
        """The evidence (approvals/evidence.py) for one approval, or for those requested between
        `since` and `until`: a printable page, or JSON with `?format=json`. `expect_head`
        (<seq>:<hash>) verifies the chain against a head recorded elsewhere too."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        back = reverse("admin:approvals_approvalrequest_changelist")
        try:
            expected = audit.parse_head(request.GET["expect_head"]) if request.GET.get("expect_head") else None
            if object_id is not None:
                approval = self.get_object(request, object_id)
                if approval is None:
                    raise Http404("No such approval.")
                approvals, period = [approval], None
            else:
                since = audit.bound(request.GET.get("since"))
                until = audit.bound(request.GET.get("until"), end=True)
                approvals, period = (
                    evidence.for_period(since, until),
                    (request.GET.get("since"), request.GET.get("until")),
                )
        except (audit.BadBound, audit.BadHead) as bad:
            messages.error(request, f"No evidence was exported: {bad}")
            return HttpResponseRedirect(back)
        gathered = evidence.evidence(approvals, expected_head=expected)
        name = f"approval-{approvals[0].pk}" if object_id is not None else "approvals"
        if request.GET.get("format") == "json":
            response = JsonResponse(gathered, json_dumps_params={"ensure_ascii": False, "indent": 2})
            response["Content-Disposition"] = f'attachment; filename="{name}-evidence.json"'
            return response
        context = {
            **self.admin_site.each_context(request),
            "title": "Evidence" if object_id is None else f"Evidence: {approvals[0]}",
            "opts": self.model._meta,
            "evidence": gathered,
            "period": period,
            "truncated": object_id is None and len(approvals) == evidence.MAX_APPROVALS,
            "max_approvals": evidence.MAX_APPROVALS,
            "json_url": f"{request.path}?{_with(request, format='json')}",
        }
        return TemplateResponse(request, "admin/approvals/evidence.html", context)

    def dashboard_view(self, request: HttpRequest):
        """The queue at a glance: what waits, since when, and the last weeks' decisions, drawn."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            "title": "Approvals dashboard",
            "opts": self.model._meta,
            **dashboard.figures(),
        }
        return TemplateResponse(request, "admin/approvals/dashboard.html", context)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        approval = self.get_object(request, object_id)
        extra_context = dict(extra_context or {})
        if approval is not None:
            signoffs = list(approval.signoffs.all())
            # Whom this user may act for, as their delegate (the period is checked on deciding).
            delegators = sorted(
                Delegation.objects.filter(delegate=request.user.pk)
                .values_list("delegator__username", flat=True)
                .distinct()
            )
            # Who may decide is checked when deciding (deciders.py); the page only leaves out the
            # buttons that could not work, and says why.
            in_group = approval.approver_group_id is None or (
                request.user.groups.filter(pk=approval.approver_group_id).exists()
            )
            extra_context.update(
                can_decide=approval.is_decidable and self.has_decide_permission(request) and (in_group or delegators),
                not_in_group=not in_group and not delegators,
                own_call=approval.requested_by_id is not None and approval.requested_by_id == request.user.pk,
                # M of N: who approved so far, and whether this user may approve again.
                signoffs=signoffs,
                approved_already=any(request.user.pk in (s.user_id, s.on_behalf_of_id) for s in signoffs),
                delegators=delegators,
                decision_form=DecisionForm(),
                decide_url=reverse("admin:approvals_approvalrequest_decide", args=[approval.pk]),
                change_url=reverse("admin:approvals_approvalrequest_change", args=[approval.pk]),
                # Decided, answer not in yet: reload until it lands.
                awaiting_answer=approval.decided_at is not None and approval.answered_at is None,
                asked=[readable(call) for call in approval.approved_tool_calls],
                answer=readable_answer(approval.answer) if approval.answered_at else None,
                time_left=self.time_left(approval),
                # Every attempt at this call, when staff sent one back for changes.
                attempts=attempts if len(attempts := approval.attempts()) > 1 else [],
                # Within a day of its deadline: the time left is shown in a warning colour.
                soon=approval.is_decidable and approval.expires_at - timezone.now() < SOON,
                policy_url=approval.policy_id
                and reverse("admin:approvals_approvalpolicy_change", args=[approval.policy_id]),
                step_up_required=step_up.required_for(approval),
                passkey_only=step_up.passkey_only(approval),
                has_passkey=passkeys.has_passkey(request.user),
                passkey_url=reverse("admin:approvals_approvalrequest_decide_passkey", args=[approval.pk]),
                step_up_until=step_up.fresh_until(request),
                step_up_minutes=f"{settings.STEP_UP_MINUTES:g}",
            )
        return super().change_view(request, object_id, form_url, extra_context)


def _with(request: HttpRequest, **changed: str) -> str:
    query = request.GET.copy()
    for key, value in changed.items():
        query[key] = value
    return query.urlencode()
