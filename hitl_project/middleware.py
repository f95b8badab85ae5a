"""Middleware of our own, for what Django leaves to the database."""

import logging

from asgiref.sync import iscoroutinefunction, sync_to_async
from django.core.handlers.asgi import ASGIRequest
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


def streams_synchronous_iterators_chunk_by_chunk(get_response):
    """Under ASGI, a response streamed from a synchronous iterator (WhiteNoise's static files and
    favicon, the admin's exports) is read by Django whole into memory first, with the py.warnings
    line "StreamingHttpResponse must consume synchronous iterators…" for every process. Its iterator
    is read chunk by chunk instead, each on the request's own thread (thread_sensitive, where its
    view ran and its database connection lives), as Django reads it. Under WSGI it stays as it is:
    an asynchronous iterator would be the one Django warns about there."""

    def middleware(request: HttpRequest):
        response = get_response(request)
        if isinstance(request, ASGIRequest) and response.streaming and not response.is_async:
            response.streaming_content = _chunk_by_chunk(iter(response.streaming_content))
        return response

    return middleware


async def _chunk_by_chunk(chunks):
    next_chunk = sync_to_async(_next_or_none, thread_sensitive=True)
    while (chunk := await next_chunk(chunks)) is not None:
        yield chunk


def _next_or_none(chunks):
    return next(chunks, None)
