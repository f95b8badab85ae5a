"""The filters of the admin's approvals list: the queue (pending first), the tool asked for, how
long an approval has waited, and the policy that required it."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import admin
from django.core.cache import cache
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from . import selectors
from .models import ApprovalRequest

# The tool and policy filters' choices are names read from every approval (a DISTINCT over the
# table: 0.4 s with 100,000 approvals): each process's list reads them at most this often, so a
# new tool's or policy's name is offered within a minute (docs/performance.md, "Capacity").
CHOICES_SECONDS = 60


def _choices(key: str, read, selected: str | None) -> list[str]:
    names = list(cache.get_or_set(f"approvals:admin-choices:{key}", read, CHOICES_SECONDS) or ())
    # A name chosen from a link (a notification's, another list's) filters at once, though the
    # choices read up to a minute ago do not have it yet: the admin applies only a filter with
    # something to offer, and would otherwise list every approval under that name's heading.
    return names if selected is None or selected in names else [*names, selected]


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
            case "escalated":
                return queryset.filter(selectors.waiting(), escalated_at__isnull=False)
            case "decided":
                return queryset.filter(status__in=[Status.APPROVED, Status.REJECTED, Status.CHANGES_REQUESTED])
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


class ToolFilter(admin.SimpleListFilter):
    """The approvals that ask to run a given tool."""

    title = "tool"
    parameter_name = "tool"

    def lookups(self, request, model_admin):
        return [(name, name) for name in _choices("tools", selectors.tool_names, self.value())]

    def queryset(self, request, queryset):
        if self.value() is None:
            return queryset
        if connection.vendor == "postgresql":
            # jsonb containment: the database reads the rows, not this process one at a time.
            return queryset.filter(tool_calls__contains=[{"name": self.value()}])
        # In Python: SQLite (the embedded default) has no containment lookup on JSON, and its
        # queue is the size staff can read.
        asking = [
            pk
            for pk, calls in queryset.values_list("pk", "tool_calls")
            if any(c.get("name") == self.value() for c in calls)
        ]
        return queryset.filter(pk__in=asking)


class AgeFilter(admin.SimpleListFilter):
    """How long approvals have waited."""

    title = "waiting"
    parameter_name = "waiting"
    AGES = {
        "1h": ("over an hour", timedelta(hours=1)),
        "1d": ("over a day", timedelta(days=1)),
        "3d": ("over three days", timedelta(days=3)),
    }

    def lookups(self, request, model_admin):
        return [(key, label) for key, (label, _) in self.AGES.items()]

    def queryset(self, request, queryset):
        age = self.AGES.get(self.value() or "")
        if age is None:
            return queryset
        return queryset.filter(created_at__lte=timezone.now() - age[1])


class PolicyFilter(admin.SimpleListFilter):
    """The approvals a given policy required, by the name it had then (it outlives the rule)."""

    title = "policy"
    parameter_name = "policy"
    DEFAULT = "-"

    def lookups(self, request, model_admin):
        selected = None if self.value() == self.DEFAULT else self.value()
        names = set(_choices("policies", _policy_names, selected))
        return [(name or self.DEFAULT, name or "the tool's high_risk flag") for name in sorted(names)]

    def queryset(self, request, queryset):
        if self.value() is None:
            return queryset
        return queryset.filter(policy_name="" if self.value() == self.DEFAULT else self.value())


def _policy_names() -> list[str]:
    # order_by(): the model's ordering would add created_at to the DISTINCT, and every row to the read.
    return list(ApprovalRequest.objects.order_by().values_list("policy_name", flat=True).distinct())
