from django.contrib import admin
from django.urls import include, path

from .metrics import metrics_view
from .views import home

urlpatterns = [
    path("", home, name="home"),
    path("", include("mcp_gateway.urls")),
    # The hosted answer pages (MCP_ANSWER_PAGES): 404 while off.
    path("", include("mcp_gateway.wires.pages.urls")),
    path("", include("approvals.urls")),
    path("admin/", admin.site.urls),
    # Reads both apps' tables, so it belongs to the project rather than to either app.
    path("metrics", metrics_view, name="metrics"),
]

# Django's answer to a request it refuses before any view runs (a Host outside ALLOWED_HOSTS):
# a JSON-RPC error on /mcp/, Django's own page elsewhere.
handler400 = "mcp_gateway.http.views.bad_request"
