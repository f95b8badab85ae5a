"""The rules staff keep in the admin: approval policies (which calls wait for whom) and delegations
(who acts for whom while away)."""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.db import models

from ..forms import JSONValueField
from ..models import DECIDE_PERMISSION, ApprovalPolicy, Delegation, PolicyApproverGroup


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
        (None, {"fields": ["position", "name", "enabled", "outcome", "requires_step_up", "requires_passkey"]}),
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
