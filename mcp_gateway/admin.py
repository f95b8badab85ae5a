from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.db.models import Case, CharField, OuterRef, Subquery, Value, When
from django.db.models.functions import Cast, Concat
from django.utils.html import format_html_join

from graph_runtime.admin_paginator import EstimatedCountPaginator
from graph_runtime.registry import registry
from mcp_gateway.models import ExactJSONField, MCPToken, Round, ToolCall
from mcp_gateway.wires.mcp_tasks import mcp_task_methods


@admin.register(MCPToken)
class MCPTokenAdmin(admin.ModelAdmin):
    list_display = ["hint", "user", "name", "created_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["user__username", "name", "hint"]
    readonly_fields = ["user", "hint", "created_at", "revoked_at"]
    fields = ["user", "name", "hint", "created_at", "revoked_at"]
    actions = ["revoke"]

    def has_add_permission(self, request):
        # The raw token is shown once, by `manage.py mcp_token`; the admin never sees it.
        return False

    @admin.action(description="Revoke selected tokens", permissions=["change"])
    def revoke(self, request, queryset):
        count = MCPToken.revoke(queryset)
        self.message_user(request, f"Revoked {count} token(s).", messages.SUCCESS)


class RoundInline(admin.TabularInline):
    model = Round
    fields = readonly_fields = ("number", "state", "created_at", "finished_at")
    extra = 0
    can_delete = False
    show_change_link = False


class ToolNameFilter(admin.SimpleListFilter):
    """The calls of one tool. Its choices are the tools this process serves, not the names stored:
    listing those would read every call on each load of the list (SELECT DISTINCT over a table of a
    million rows). A tool no longer served still filters by its name in the address."""

    title = "tool name"
    parameter_name = "tool_name"

    def lookups(self, request, model_admin):
        return [(name, name) for name in sorted(registry())]

    def queryset(self, request, queryset):
        return queryset if self.value() is None else queryset.filter(tool_name=self.value())


@admin.register(ToolCall)
class ToolCallAdmin(admin.ModelAdmin):
    list_display = ["tool_name", "status", "task", "caller_name", "created_at", "expires_at"]
    list_filter = ["status", ToolNameFilter, ("task_hash", admin.EmptyFieldListFilter)]
    # A list of a million calls is not counted on each load (graph_runtime/admin_paginator.py).
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    search_fields = ["thread_id", "caller"]
    ordering = ["-created_at"]
    readonly_fields = [
        "task",
        "caller_name",
        "waiting_on",
        *(f.name for f in ToolCall._meta.fields if f.name != "task_hash"),
    ]
    exclude = ["task_hash"]
    inlines = [RoundInline]

    def delete_model(self, request, obj: ToolCall) -> None:
        # A call goes with its LangGraph thread, as the sweep removes it: the rows alone would leave
        # the thread behind for good (threads are found through the rows).
        obj.discard()

    def delete_queryset(self, request, queryset) -> None:
        for call in queryset:
            call.discard()

    def get_queryset(self, request):
        # A bearer token's caller is "user:<id>": the username comes with the row, in the same query.
        identity = Concat(Value("user:"), Cast("pk", output_field=CharField()))
        users = get_user_model().objects.annotate(identity=identity).filter(identity=OuterRef("caller"))
        # A task's status is read from its latest round: that round comes with the row too, for
        # tasks only, so the list costs the same queries however many tasks it shows.
        latest = Round.objects.filter(call=OuterRef("pk")).order_by("-number")
        return (
            super()
            .get_queryset(request)
            .annotate(
                username=Subquery(users.values("username")[:1]),
                latest_state=Case(When(task_hash__isnull=False, then=Subquery(latest.values("state")[:1]))),
                latest_outcome=Case(
                    When(task_hash__isnull=False, then=Subquery(latest.values("outcome")[:1])),
                    output_field=ExactJSONField(),
                ),
            )
        )

    @admin.display(description="caller", ordering="username")
    def caller_name(self, call: ToolCall) -> str:
        # Another MCP_AUTH_HANDLER's identities are shown as they are.
        return getattr(call, "username", None) or call.caller

    @admin.display(description="waiting on")
    def waiting_on(self, call: ToolCall) -> str:
        """The questions a paused call's client has been asked and not answered yet."""
        if call.status != ToolCall.Status.PAUSED:
            return "—"
        asking = call.rounds.filter(state=Round.State.ASKING).order_by("-number").first()
        requests = ((asking.outcome or {}).get("requests") or {}) if asking else {}
        if not requests:
            return "—"
        return format_html_join(
            "\n", "<p>{}</p>", ((r.get("params", {}).get("message") or "?",) for r in requests.values())
        )

    @admin.display(description="MCP task")
    def task(self, obj: ToolCall) -> str:
        """Whether the client holds the call as a task, and the status tasks/get reads for it."""
        if not obj.is_task:
            return "—"
        state = getattr(obj, "latest_state", None)
        latest = Round(call=obj, state=state, outcome=getattr(obj, "latest_outcome", None)) if state else None
        return mcp_task_methods.status_of(obj, latest)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
