"""The staff queue in the Django admin.

The change page of an approval is read-only for everyone; deciding goes through its own POST view
(`<id>/decide/`, CSRF-protected by admin_view) that needs approvals.decide_approval, records who
decided, and only enqueues the resume: the page never waits for the model. It goes through the same
service as the REST API, so the same rules hold (a thread that is not paused cannot be approved).
While the resumed run is going, the page reloads itself until the answer lands.

The list's filters are in admin_filters.py, the dashboard's figures in dashboard.py.
"""

from __future__ import annotations

import json
from datetime import timedelta

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import models
from django.http import Http404, HttpRequest, HttpResponseRedirect
from django.http.response import HttpResponseBase
from django.template.defaultfilters import linebreaksbr
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator
from django.utils.timesince import timesince, timeuntil
from django.views.decorators.http import require_POST
from knox.models import AuthToken

from graph_runtime.admin_paginator import EstimatedCountPaginator

from . import audit, dashboard, deciders, services, step_up, tokens
from .admin_filters import AgeFilter, PolicyFilter, QueueFilter, ToolFilter
from .forms import DecisionForm, JSONValueField
from .models import (
    DECIDE_PERMISSION,
    ApprovalPolicy,
    ApprovalRequest,
    AuditEvent,
    ContactMessage,
    DecidedVia,
    Delegation,
    PolicyApproverGroup,
    StaffIdentity,
)

SOON = timedelta(days=1)
SECOND_NEEDED = "another member of staff must approve it too before it runs."
STEP_UP_FIRST = (
    "nothing was decided: its policy requires step-up. Decide it on its own page, or confirm it’s you "
    "at /admin/step-up/ first."
)
NOT_PAUSED = (
    "Nothing was decided: the run is no longer paused on this request, so there is nothing to approve or reject."
)


def _pretty(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _readable(call: dict) -> dict:
    """A tool call for the decision page: its arguments one per line, and as editable JSON."""
    given = call.get("input")
    arguments: dict = given if isinstance(given, dict) else {}
    return {
        "name": call.get("name") or "a tool",
        "arguments": [(key, value if isinstance(value, str) else _pretty(value)) for key, value in arguments.items()],
        "json": _pretty(arguments),
    }


def _readable_answer(answer: str) -> dict:
    """The agent's answer for people: its words, and each JSON object it quotes (a tool's result,
    say) as a list of fields rather than raw JSON."""
    decoder = json.JSONDecoder()
    words, records, start = [], [], 0
    at = answer.find("{")
    while at != -1:
        try:
            value, end = decoder.raw_decode(answer, at)
        except ValueError:
            at = answer.find("{", at + 1)
            continue
        words.append(answer[start:at])
        records.append([(key, item if isinstance(item, str) else _pretty(item)) for key, item in value.items()])
        start = end
        at = answer.find("{", end)
    words.append(answer[start:])
    # "Your message was recorded: {...}" reads "Your message was recorded", above the fields.
    text = "".join(words).strip().rstrip(":;,").strip()
    return {"text": text, "records": records}


class ContactMessageInline(admin.TabularInline):
    model = ContactMessage
    fields = readonly_fields = ("tool", "input", "created_at")
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(admin.ModelAdmin):
    list_display = ["tool", "arguments", "message", "age", "time_left", "escalated", "state", "required_by"]
    list_filter = [QueueFilter, ToolFilter, AgeFilter, PolicyFilter]
    # A list of a hundred thousand approvals is not counted on each load (graph_runtime/admin_paginator.py).
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    actions = ["approve_selected", "reject_selected"]
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
        return format_html('<pre style="white-space: pre-wrap">{}</pre>', _pretty(obj.tool_calls))

    @admin.display(description="arguments approved instead")
    def edited_pretty(self, obj: ApprovalRequest) -> str:
        return format_html('<pre style="white-space: pre-wrap">{}</pre>', _pretty(obj.edited_tool_calls))

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

    # --- bulk decisions ----------------------------------------------------------------------------

    @admin.action(description="Approve selected approvals", permissions=["decide"])
    def approve_selected(self, request, queryset):
        return self._decide_selected(request, queryset, approved=True)

    @admin.action(description="Reject selected approvals", permissions=["decide"])
    def reject_selected(self, request, queryset):
        return self._decide_selected(request, queryset, approved=False)

    def _decide_selected(self, request, queryset, *, approved: bool):
        """Ask for one note, then decide each approval on its own (its own locked decision, as
        one at a time would be), and report each that could not be decided."""
        if "apply" not in request.POST:
            context = {
                **self.admin_site.each_context(request),
                "title": "Approve these?" if approved else "Reject these?",
                "opts": self.model._meta,
                "approvals": queryset,
                "action": request.POST.get("action"),
                "approved": approved,
                "form": DecisionForm(),
                "selected": request.POST.getlist(ACTION_CHECKBOX_NAME),
            }
            return TemplateResponse(request, "admin/approvals/decide_selected.html", context)
        form = DecisionForm({"decision": "approve" if approved else "reject", "note": request.POST.get("note", "")})
        if not form.is_valid():
            self.message_user(request, f"Nothing was decided: {form.errors.as_text()}", messages.ERROR)
            return None
        note = form.cleaned_data["note"] or None
        decided = 0
        for approval in queryset:
            if step_up.required_for(approval) and not step_up.is_fresh(request):
                self.message_user(request, f"{approval}: {STEP_UP_FIRST}", messages.WARNING)
                continue
            try:
                approval = services.approval_decide(
                    approval=approval, approved=approved, note=note, via=DecidedVia.ADMIN, user=request.user
                )
            except (
                services.ApprovalConflict,
                services.SameApprover,
                services.NotAllowed,
                services.PolicyChanged,
            ) as conflict:
                # A changed policy is confirmed on the approval's own page, where it is shown.
                self.message_user(request, f"{approval}: {conflict}", messages.WARNING)
            except services.NothingPending:
                self.message_user(request, f"{approval}: {NOT_PAUSED}", messages.WARNING)
            else:
                if approval.progress:
                    self.message_user(request, f"{approval}: approved {approval.progress}; {SECOND_NEEDED}")
                else:
                    decided += 1
        verb = "Approved" if approved else "Rejected"
        self.message_user(request, f"{verb} {decided} approval(s); their runs resume in the background.")
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
        dashboard = self.admin_site.admin_view(self.dashboard_view)
        return [
            path("dashboard/", dashboard, name="approvals_dashboard"),
            path("<path:object_id>/decide/", decide, name="approvals_approvalrequest_decide"),
            *super().get_urls(),
        ]

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
                # Decided, answer not in yet: reload until it lands.
                awaiting_answer=approval.decided_at is not None and approval.answered_at is None,
                asked=[_readable(call) for call in approval.approved_tool_calls],
                answer=_readable_answer(approval.answer) if approval.answered_at else None,
                time_left=self.time_left(approval),
                # Every attempt at this call, when staff sent one back for changes.
                attempts=attempts if len(attempts := approval.attempts()) > 1 else [],
                # Within a day of its deadline: the time left is shown in a warning colour.
                soon=approval.is_decidable and approval.expires_at - timezone.now() < SOON,
                policy_url=approval.policy_id
                and reverse("admin:approvals_approvalpolicy_change", args=[approval.policy_id]),
                step_up_required=step_up.required_for(approval),
                step_up_until=step_up.fresh_until(request),
                step_up_minutes=f"{settings.STEP_UP_MINUTES:g}",
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
            if "decision" in form.errors:
                wrong = "Choose Approve, Request changes or Reject."
            elif "note" in form.errors:
                wrong = str(form.errors["note"][0])
            else:
                wrong = form.errors.as_text()
            messages.error(request, f"Nothing was decided: {wrong}")
            return HttpResponseRedirect(change_url)
        decision = form.cleaned_data["decision"]
        approved = decision == "approve"
        try:
            # One text field per tool call, prefilled with its arguments as JSON: what staff
            # approve to run (unchanged, nothing is recorded as edited). A rejection ignores them.
            edits = ([json.loads(text) for text in request.POST.getlist("arguments")] or None) if approved else None
        except (ValueError, RecursionError):
            messages.error(request, "Nothing was decided: the edited arguments are not valid JSON.")
            return HttpResponseRedirect(change_url)
        # Step-up (step_up.py): without a fresh one, the decision waits on the step-up page and
        # comes back here with the proof.
        if step_up.required_for(approval) and not step_up.is_fresh(request):
            proof = step_up.StepUpForm.posted(request)
            if not proof.is_valid():
                return step_up.held_decision(request, proof, approval=approval, action=request.path)
            step_up.record(request, proof, approval=approval)
        try:
            on_behalf_of = deciders.delegator_named(form.cleaned_data["on_behalf_of"])
            if decision == "request_changes":
                approval = services.approval_request_changes(
                    approval=approval,
                    changes=form.cleaned_data["note"],
                    via=DecidedVia.ADMIN,
                    user=request.user,
                    on_behalf_of=on_behalf_of,
                )
            else:
                approval = services.approval_decide(
                    approval=approval,
                    approved=approved,
                    note=form.cleaned_data["note"],
                    via=DecidedVia.ADMIN,
                    user=request.user,
                    edited_arguments=edits,
                    on_behalf_of=on_behalf_of,
                    seen_policy_version=form.cleaned_data["seen_policy_version"],
                )
        except services.PolicyChanged as changed:
            messages.error(request, f"Nothing was decided. {changed}")
        except (services.InvalidEdit, services.ChangesNotGiven, services.NotAllowed) as invalid:
            messages.error(request, f"Nothing was decided: {invalid}")
        except (services.ApprovalConflict, services.SameApprover) as conflict:
            messages.error(request, str(conflict))
        except services.NothingPending:
            messages.error(request, NOT_PAUSED)
        else:
            if approval.progress:
                messages.success(request, f"Approved {approval.progress}: {SECOND_NEEDED}")
            elif decision == "request_changes":
                messages.success(
                    request,
                    "Changes requested. The agent revises its call; the revised one is a new approval, "
                    "linked below once it arrives.",
                )
            else:
                verb = "Approved" if approved else "Rejected"
                messages.success(request, f"{verb}. The run resumes in the background; its answer appears below.")
        return HttpResponseRedirect(change_url)


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


class ApproverGroupInline(admin.TabularInline):
    model = PolicyApproverGroup
    fields = ["position", "group"]
    extra = 0
    verbose_name_plural = "Approver groups, in turn"


@admin.register(ApprovalPolicy)
class ApprovalPolicyAdmin(admin.ModelAdmin):
    """The rules of which tool calls need staff (approvals/policies.py). Each is checked on save
    (ApprovalPolicy.clean): an error is shown beside the field it is about."""

    list_display = [
        "position", "name", "graph_pattern", "tool_pattern", "condition", "outcome", "requires_step_up", "enabled",
    ]  # fmt: skip
    list_display_links = ["name"]
    list_editable = ["position", "enabled"]
    list_filter = ["outcome", "enabled"]
    search_fields = ["name", "graph_pattern", "tool_pattern"]
    formfield_overrides = {
        models.JSONField: {
            "form_class": JSONValueField,
            "widget": forms.TextInput(attrs={"placeholder": '100, "*@example.com" or true', "size": 30}),
        }
    }
    inlines = [ApproverGroupInline]
    fieldsets = [
        (None, {"fields": ["position", "name", "enabled", "outcome", "requires_step_up"]}),
        (
            "Who decides",
            {
                "fields": ["approvals_required"],
                "description": "M of N: how many different staff must approve. Who they are: the members of the "
                "first of the approver groups below; an approval still pending after APPROVAL_ESCALATE_AFTER is "
                "handed to the next group. Without groups, every member of staff who may decide approvals.",
            },
        ),
        ("Which calls", {"fields": ["graph_pattern", "tool_pattern"]}),
        (
            "Only when an argument…",
            {
                "fields": ["argument_path", "operator", "value"],
                "description": "Optional. A condition that cannot hold (no argument at the path, a value of "
                "another type) does not match, and the next rule is tried. Without a rule that matches, "
                "a tool marked high_risk waits for staff approval and any other tool runs.",
            },
        ),
    ]

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        # Saved, but worth knowing: M of N where a group has fewer than M could never be approved.
        policy = form.instance
        for link in policy.group_links.select_related("group"):
            members = link.group.user_set.filter(is_active=True).count()
            if members < policy.required_approvals:
                self.message_user(
                    request,
                    f"The group “{link.group}” has {members} active member(s), fewer than the "
                    f"{policy.required_approvals} approvals this rule needs: while it decides, nothing that this "
                    "rule sends to staff can be approved.",
                    messages.WARNING,
                )

    @admin.display(description="condition")
    def condition(self, obj: ApprovalPolicy) -> str:
        if not obj.argument_path:
            return "—"
        shown = "" if obj.value is None else f" {json.dumps(obj.value, ensure_ascii=False)}"
        return f"{obj.argument_path} {obj.get_operator_display()}{shown}"


@admin.register(Delegation)
class DelegationAdmin(admin.ModelAdmin):
    """Each member of staff who may decide names their own delegates, for a period (while they are
    away); a superuser sees and edits everyone's. A delegate decides on the delegator's behalf
    (their approver groups), and the audit names both."""

    list_display = ["delegator", "delegate", "starts_at", "ends_at"]
    list_select_related = ["delegator", "delegate"]

    def get_queryset(self, request):
        mine = super().get_queryset(request)
        return mine if request.user.is_superuser else mine.filter(delegator=request.user)

    def get_fields(self, request, obj=None):
        fields = ["delegate", "starts_at", "ends_at"]
        return ["delegator", *fields] if request.user.is_superuser else fields

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        # Only active staff can decide, so only they are offered.
        kwargs["queryset"] = get_user_model().objects.filter(is_staff=True, is_active=True).order_by("username")
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change, **kwargs)
        if request.user.is_superuser:
            return form
        delegator = request.user

        class OwnDelegation(form):  # type: ignore[valid-type, misc]
            def __init__(self, *args, **kw):
                super().__init__(*args, **kw)
                # Set before validation: Delegation.clean() refuses naming yourself.
                self.instance.delegator = delegator

        return OwnDelegation

    # Delegating is deciding's to give: whoever may decide manages their own delegations.
    def has_module_permission(self, request) -> bool:
        return request.user.has_perm(DECIDE_PERMISSION)

    def has_view_permission(self, request, obj=None) -> bool:
        return request.user.has_perm(DECIDE_PERMISSION)

    has_add_permission = has_module_permission

    def has_change_permission(self, request, obj=None) -> bool:
        return self.has_view_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        return self.has_view_permission(request, obj)


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
