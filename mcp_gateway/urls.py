from django.urls import path

from .health import health_view
from .views import mcp_endpoint

urlpatterns = [
    path("mcp/", mcp_endpoint, name="mcp"),
    path("health/", health_view, name="health"),
]
