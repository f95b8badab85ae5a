"""The MCP bearer tokens that callers of the endpoint present (MCPToken, stored as digests), and
every change of their rows. auth.py turns one into a Caller; models.py exports the model with the
call's rows."""

from __future__ import annotations

import hashlib
import secrets
from functools import cache
from typing import Any

from django.conf import settings
from django.db import connection, models
from django.utils import timezone


class MCPToken(models.Model):
    """A bearer token for the MCP endpoint. Only its SHA-256 digest is stored."""

    PREFIX = "hitl_"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mcp_tokens")
    name = models.CharField(max_length=100, blank=True)
    # The first characters of the raw token, so staff can tell tokens apart in the admin.
    hint = models.CharField(max_length=16, editable=False)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "MCP token"

    def __str__(self) -> str:
        return f"{self.hint}… ({self.user})"

    @staticmethod
    def digest_of(raw: str) -> str:
        # Tokens are 256 random bits, so an unsalted hash is enough to make the column useless.
        return hashlib.sha256(raw.encode()).hexdigest()

    @classmethod
    def issue(cls, user, name: str = "") -> tuple[MCPToken, str]:
        raw = cls.PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(user=user, name=name, hint=raw[:12], digest=cls.digest_of(raw))
        return token, raw

    @classmethod
    def usable(cls, raw: str) -> models.QuerySet[MCPToken]:
        """The token with this raw value while it still authenticates: not revoked, its user active."""
        return cls.objects.filter(digest=cls.digest_of(raw), revoked_at__isnull=True, user__is_active=True)

    @classmethod
    def user_id_of(cls, raw: str) -> Any:
        """Every request's read: the user of a bearer token while it authenticates (the conditions
        of `usable`), in one plain statement. Building the token and user models costs CPU on
        every request (docs/performance.md, "Measured choices"), and nothing reads them. Digests
        are unique, so one row at most."""
        with connection.cursor() as cursor:
            cursor.execute(_token_user_sql(), {"digest": cls.digest_of(raw)})
            row = cursor.fetchone()
        return None if row is None else row[0]

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @staticmethod
    def revoke(tokens: models.QuerySet[MCPToken]) -> int:
        """Staff revoke these tokens (the admin's action): from now on they authenticate nobody.
        How many were not revoked already."""
        return tokens.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())


@cache
def _token_user_sql() -> str:
    from django.contrib.auth import get_user_model

    return (
        f"SELECT t.user_id FROM {MCPToken._meta.db_table} t JOIN {get_user_model()._meta.db_table} u"
        " ON u.id = t.user_id WHERE t.digest = %(digest)s AND t.revoked_at IS NULL AND u.is_active"
    )
