"""Staff approvals: high-risk tool calls wait for a staff decision in the Django admin."""

from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Staff approvals"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The gateway does not import this app: it finds the handler through its hand-over point.
        from mcp_gateway import handover as gateway

        from . import tasks  # noqa: F401  (enqueued by name: graph_runtime.work)
        from .handover import hand_over, withdraw
        from .interrupts import STAFF_APPROVAL

        gateway.register(STAFF_APPROVAL, hand_over, withdraw=withdraw)
