"""Middleware of our own: one, for what Django leaves to the database."""

from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest, HttpResponseBadRequest
from django.utils.decorators import sync_and_async_middleware


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
