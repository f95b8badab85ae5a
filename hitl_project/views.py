"""The front page: what a person who opens the service's address in a browser needs first."""

from django.conf import settings
from django.shortcuts import render
from django.urls import reverse
from django.views import csrf
from django.views.decorators.http import require_safe

from mcp_gateway.wires.pages import views as answer_pages


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


def csrf_failure(request, reason=""):
    """settings.CSRF_FAILURE_VIEW: an answer page's refused POST gets that page's own refusal;
    every other, Django's page."""
    match = getattr(request, "resolver_match", None)
    if match is not None and match.url_name == "answer_page" and settings.MCP_ANSWER_PAGES == "on":
        return answer_pages.refused_by_csrf(request)
    return csrf.csrf_failure(request, reason)
