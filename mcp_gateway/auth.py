"""Who is calling. The default handler reads `Authorization: Bearer <token>`; MCP_AUTH_HANDLER
can name any callable(request) -> Caller | None in its place."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.utils.module_loading import import_string

from .models import MCPToken

# Permissions a custom handler may withhold. Without them a call can run, but a pause cannot be
# kept for later ("this call can't be resumed").
CREATE_THREADS = "threads:create"
UPDATE_THREADS = "threads:update"
ALL_PERMISSIONS = frozenset({CREATE_THREADS, UPDATE_THREADS})


@dataclass(frozen=True)
class Caller:
    identity: str
    permissions: frozenset[str] = field(default=ALL_PERMISSIONS)
    user: Any = None

    @property
    def can_keep_threads(self) -> bool:
        return {CREATE_THREADS, UPDATE_THREADS} <= self.permissions


def bearer_token_caller(request: HttpRequest) -> Caller | None:
    scheme, _, raw = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        return None
    token = (
        MCPToken.objects.select_related("user")
        .filter(digest=MCPToken.digest_of(raw.strip()), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    if token is None:
        return None
    return Caller(identity=f"user:{token.user.pk}", user=token.user)


@cache
def _handler():
    return import_string(settings.MCP_AUTH_HANDLER)


def authenticate(request: HttpRequest) -> Caller | None:
    return _handler()(request)
