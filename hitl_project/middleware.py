"""Middleware of our own, for what Django leaves to the database."""

import logging

from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.utils.decorators import sync_and_async_middleware
from django.utils.deprecation import MiddlewareMixin

from mcp_gateway.calls import overload

logger = logging.getLogger(__name__)


def _has_nul(request: HttpRequest) -> bool:
    return any("\x00" in key or any("\x00" in value for value in values) for key, values in request.GET.lists())


@sync_and_async_middleware
def refuse_nul_in_the_query(get_response):
    """400 for a query string with U+0000 in it. PostgreSQL cannot store or compare text with that
    character, and the admin hands list-filter values (`?status__exact=`) to the database as they
    are: a 500 otherwise. (/mcp/ checks its own input: it runs without middleware.)"""
    refused = "Bad Request: the query string contains the character U+0000."

    if iscoroutinefunction(get_response):

        async def async_middleware(request):
            return HttpResponseBadRequest(refused) if _has_nul(request) else await get_response(request)

        return async_middleware

    def middleware(request):
        return HttpResponseBadRequest(refused) if _has_nul(request) else get_response(request)

    return middleware


class LockedDatabaseMiddleware(MiddlewareMixin):
    """503 with Retry-After, not a 500, for a staff page or an API request whose database (SQLite,
    the embedded default) another process held locked past the busy timeout: the transaction
    rolled back, nothing is broken, the same request later succeeds (mcp_gateway/calls/overload.py).
    The API answers in JSON, as its other errors. (/mcp/ answers its own: it runs without middleware.)"""

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not overload.database_locked(exception):
            return None
        logger.warning("%s %s answered 503: %s", request.method, request.path, exception)
        text = "The database is locked by another writer; try again later."
        response: HttpResponse
        if request.path.startswith("/api/"):
            response = JsonResponse({"detail": text}, status=503)
        else:
            response = HttpResponse(text, status=503, content_type="text/plain; charset=utf-8")
        response["Retry-After"] = str(overload.RETRY_AFTER_SECONDS)
        # Logged once, above: Django's request logger would log the 503 again, as an error.
        response._has_been_logged = True  # type: ignore[attr-defined]
        return response
