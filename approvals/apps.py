from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Staff approvals"
    default_auto_field = "django.db.models.BigAutoField"
