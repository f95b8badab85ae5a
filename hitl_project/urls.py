from django.contrib import admin
from django.urls import include, path

from hitl_project.views import home

urlpatterns = [
    path("", home, name="home"),
    path("", include("mcp_gateway.urls")),
    path("", include("approvals.urls")),
    path("admin/", admin.site.urls),
]

# Django's answer to a request it refuses before any view runs (a Host outside ALLOWED_HOSTS):
# a JSON-RPC error on /mcp/, Django's own page elsewhere.
handler400 = "mcp_gateway.views.bad_request"
