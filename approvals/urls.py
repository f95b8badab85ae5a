from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView

from . import api

urlpatterns = [
    path("api/admin/approvals", api.ApprovalQueue.as_view(), name="approval-queue"),
    path("api/admin/approvals/<str:thread_id>", api.ApprovalDecision.as_view(), name="approval-decision"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # Last: every path under the API that matched nothing above.
    re_path(r"^api/admin/", api.not_found),
]
