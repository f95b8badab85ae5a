"""The front page: what a person who opens the service's address in a browser needs first."""

from django.conf import settings
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_safe


@require_safe
def home(request):
    return render(
        request,
        "home.html",
        {
            "mcp_url": request.build_absolute_uri(reverse("mcp")),
            "api_on": bool(settings.ADMIN_TOKEN),
        },
    )
