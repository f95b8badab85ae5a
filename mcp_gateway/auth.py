"""Who is calling. The default handler reads `Authorization: Bearer <token>`; MCP_AUTH_HANDLER
can name any callable(request) -> Caller | None in its place."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.utils.module_loading import import_string

from mcp_gateway.models import MCPToken

# Permissions a custom handler may withhold (docs/rules.md, "Read as the caller": the paused thread
# is read and updated as the caller). Without all three a call can run, but a pause cannot be kept
# for later ("this call can't be resumed"); later, without update an answer cannot resume it, and
# without read a requestState fails as one from another user would.
CREATE_THREADS = "threads:create"
READ_THREADS = "threads:read"
UPDATE_THREADS = "threads:update"
ALL_PERMISSIONS = frozenset({CREATE_THREADS, READ_THREADS, UPDATE_THREADS})


@dataclass(frozen=True)
class Caller:
    identity: str
    permissions: frozenset[str] = field(default=ALL_PERMISSIONS)
    # For a custom handler's own use; nothing here reads it, and the default handler leaves it unset.
    user: Any = None

    @property
    def can_keep_threads(self) -> bool:
        # Reading too: a pause kept for a caller who may not read it could never be answered.
        return {CREATE_THREADS, READ_THREADS, UPDATE_THREADS} <= self.permissions

    @property
    def can_read_threads(self) -> bool:
        return READ_THREADS in self.permissions

    @property
    def can_update_threads(self) -> bool:
        return UPDATE_THREADS in self.permissions


def bearer_token_caller(request: HttpRequest) -> Caller | None:
    scheme, _, raw = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        return None
    user_id = MCPToken.user_id_of(raw.strip())
    if user_id is None:
        return None
    return Caller(identity=user_identity(user_id))


USER_PREFIX = "user:"


def user_identity(user_id: int) -> str:
    """The identity of a caller who is a Django user: the default handler's, and one a custom handler
    should give its users too, so that the staff side knows them (they may not approve their own call)."""
    return f"{USER_PREFIX}{user_id}"


def user_id_of(identity: str) -> int | None:
    """The user behind a caller identity made by user_identity, else None."""
    prefix, _, rest = identity.partition(":")
    # ASCII digits that fit a database's bigint: anything else names no user.
    if f"{prefix}:" != USER_PREFIX or not (rest.isascii() and rest.isdigit() and len(rest) <= 18):
        return None
    return int(rest)


@cache
def _handler():
    return import_string(settings.MCP_AUTH_HANDLER)


def authenticate(request: HttpRequest) -> Caller | None:
    return _handler()(request)
