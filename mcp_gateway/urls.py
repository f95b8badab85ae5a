from django.urls import path

from .health import health_view
from .views import mcp_endpoint, mcp_without_slash

urlpatterns = [
    path("mcp/", mcp_endpoint, name="mcp"),
    path("mcp", mcp_without_slash),
    path("health/", health_view, name="health"),
]
