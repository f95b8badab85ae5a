from django.urls import path
from drf_spectacular.views import SpectacularAPIView

from . import api

urlpatterns = [
    path("api/admin/approvals", api.ApprovalQueue.as_view(), name="approval-queue"),
    path("api/admin/approvals/<str:thread_id>", api.ApprovalDecision.as_view(), name="approval-decision"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
]
