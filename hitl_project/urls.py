from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("", include("mcp_gateway.urls")),
    path("", include("approvals.urls")),
    path("admin/", admin.site.urls),
]
