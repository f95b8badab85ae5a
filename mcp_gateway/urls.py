from django.urls import path

from mcp_gateway.health import health_view
from mcp_gateway.http.views import mcp_endpoint, mcp_without_slash

urlpatterns = [
    path("mcp/", mcp_endpoint, name="mcp"),
    path("mcp", mcp_without_slash),
    path("health/", health_view, name="health"),
]
