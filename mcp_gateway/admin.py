from django.contrib import admin, messages
from django.utils import timezone

from . import tasks_extension
from .models import MCPToken, Round, ToolCall


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
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {count} token(s).", messages.SUCCESS)


class RoundInline(admin.TabularInline):
    model = Round
    fields = readonly_fields = ("number", "state", "created_at", "finished_at")
    extra = 0
    can_delete = False
    show_change_link = False


@admin.register(ToolCall)
class ToolCallAdmin(admin.ModelAdmin):
    list_display = ["tool_name", "status", "task", "caller", "created_at", "expires_at"]
    list_filter = ["status", "tool_name", ("task_hash", admin.EmptyFieldListFilter)]
    search_fields = ["thread_id", "caller"]
    readonly_fields = ["task", *(f.name for f in ToolCall._meta.fields if f.name != "task_hash")]
    exclude = ["task_hash"]
    inlines = [RoundInline]

    @admin.display(description="MCP task")
    def task(self, obj: ToolCall) -> str:
        """Whether the client holds the call as a task, and the status tasks/get reads for it."""
        return tasks_extension.status_of(obj) if obj.is_task else "—"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
