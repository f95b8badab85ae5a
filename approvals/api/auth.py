"""Who is calling the staff API: two kinds of token, sent as `Authorization: Bearer <token>` or
knox's usual `Token <token>`, and the permission each view needs. A staff member's own API token
(django-rest-knox: created and revoked on the admin's API tokens page, approvals/tokens.py, stored
only as a digest) acts as that person; the shared ADMIN_TOKEN acts as nobody in particular. Each
refusal says what was wrong: no header, another scheme, no token, a token that is neither (401), an
account that is not staff or lacks the permission (403). Also the API's body parser and its
exception handler (settings' REST_FRAMEWORK), which keep every answer JSON.
"""

from __future__ import annotations

import hmac
import io

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from knox.auth import TokenAuthentication
from rest_framework import exceptions, status, views
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.parsers import JSONParser
from rest_framework.permissions import BasePermission

VIEW_PERMISSION = "approvals.view_approvalrequest"
AUDIT_PERMISSION = "approvals.view_auditevent"

# Both kinds of token come as `Authorization: Bearer <token>`, or with knox's usual `Token` scheme.
SCHEMES = (b"bearer", b"token")
TOKENS_PAGE = "/admin/api-tokens/"
HOW_TO_SEND = (
    f"Send Authorization: Bearer <token>, with your staff API token (create one at {TOKENS_PAGE}) or the ADMIN_TOKEN."
)


def _given_token(request) -> bytes | None:
    """The token of the Authorization header; None without the header. A header that cannot hold a
    token is refused here, saying what is wrong with it."""
    header = get_authorization_header(request)
    if not header:
        return None
    scheme, _, given = header.strip().partition(b" ")
    if scheme.lower() not in SCHEMES:
        shown = scheme.decode("latin-1")[:20]
        raise exceptions.AuthenticationFailed(f"The Authorization header's scheme is {shown!r}. {HOW_TO_SEND}")
    given = given.strip()
    if not given:
        raise exceptions.AuthenticationFailed(f"The Authorization header has no token after its scheme. {HOW_TO_SEND}")
    if b" " in given:
        raise exceptions.AuthenticationFailed("The token in the Authorization header contains a space: send it alone.")
    return given


class StaffTokenAuthentication(TokenAuthentication):
    """`Authorization: Bearer <a staff member's API token>` (or `Token <...>`): request.user is that
    member. Tried after the admin token, so a token that is neither is refused here."""

    def authenticate(self, request):
        given = _given_token(request)
        if given is None:
            return None
        try:
            return self.authenticate_credentials(given)
        except UnicodeDecodeError:  # knox decodes the token as UTF-8
            raise exceptions.AuthenticationFailed(self.unknown()) from None
        except exceptions.AuthenticationFailed as refused:
            if refused.detail == self.INACTIVE:
                raise
            raise exceptions.AuthenticationFailed(self.unknown()) from None

    INACTIVE = "This staff API token's account is deactivated."

    def validate_user(self, auth_token):
        if not auth_token.user.is_active:
            raise exceptions.AuthenticationFailed(self.INACTIVE)
        return (auth_token.user, auth_token)

    @staticmethod
    def unknown() -> str:
        admin_token = "" if settings.ADMIN_TOKEN else " (no ADMIN_TOKEN is configured here)"
        return (
            "This token is not a valid staff API token: it was revoked, it expired or it never existed; nor is it "
            f"the ADMIN_TOKEN{admin_token}. Create a staff API token at {TOKENS_PAGE}."
        )


class AdminTokenAuthentication(BaseAuthentication):
    """`Authorization: Bearer <ADMIN_TOKEN>` (or `Token <...>`). There is no user behind it:
    request.auth is the token. Tried first: a constant-time comparison, with no database query."""

    def authenticate(self, request):
        expected = settings.ADMIN_TOKEN
        given = _given_token(request)
        if not expected or given is None:
            return None
        # Constant time, so the response time tells nothing about how much of the token matched.
        if not hmac.compare_digest(given, expected.encode()):
            return None  # perhaps a staff token: StaffTokenAuthentication's turn
        return (None, "admin-token")

    def authenticate_header(self, request) -> str:
        # Present, so DRF answers NotAuthenticated with 401 and this challenge rather than 403.
        return 'Bearer realm="admin"'


class ApiTokenRequired(BasePermission):
    """A staff token with the view's permission, or the admin token."""

    def has_permission(self, request, view) -> bool:
        user = request.user
        if user is not None:
            needed = getattr(view, "permission_for", {}).get(request.method, VIEW_PERMISSION)
            if not user.is_staff:
                raise exceptions.PermissionDenied(
                    f"This staff API token belongs to {user.get_username()}, who is not a member of staff."
                )
            if not user.has_perm(needed):
                raise exceptions.PermissionDenied(
                    f"This staff API token's account, {user.get_username()}, lacks the permission {needed}."
                )
            return True
        if request.auth is not None:
            return True  # the admin token
        raise exceptions.NotAuthenticated(f"No Authorization header. {HOW_TO_SEND}")


class StaffTokenScheme(OpenApiAuthenticationExtension):
    target_class = StaffTokenAuthentication
    name = "staffToken"

    def get_security_definition(self, auto_schema):
        return {
            **build_bearer_security_scheme_object(header_name="Authorization", token_prefix="Bearer"),
            "description": f"A staff member's own API token (staff_…), created at {TOKENS_PAGE} and shown once. "
            "It acts with its owner's permissions. Send `Authorization: Bearer <token>` (`Token <token>` works too).",
        }


class AdminTokenScheme(OpenApiAuthenticationExtension):
    target_class = AdminTokenAuthentication
    name = "adminToken"

    def get_security_definition(self, auto_schema):
        return {
            **build_bearer_security_scheme_object(header_name="Authorization", token_prefix="Bearer"),
            "description": "The shared ADMIN_TOKEN of the server's configuration, when one is set: it may do "
            "everything, and the audit names no person. Send `Authorization: Bearer <ADMIN_TOKEN>`.",
        }


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser, for UTF-8 only, with JSON nested past Python's recursion limit a 400 like
    any other parse error."""

    def parse(self, stream, media_type=None, parser_context=None):
        # JSON over HTTP is UTF-8 without a byte-order mark (RFC 8259, section 8.1). DRF decodes the
        # body with the Content-Type's charset, so "charset=utf-16" would be taken, and a UTF-8 BOM
        # is skipped by nothing but it must be refused the same way.
        try:
            text = stream.read().decode("utf-8")
        except UnicodeDecodeError:
            raise exceptions.ParseError("JSON parse error - the body is not UTF-8") from None
        if text.startswith("\ufeff"):
            raise exceptions.ParseError("JSON parse error - the body starts with a byte-order mark")
        try:
            return super().parse(io.BytesIO(text.encode()), media_type, {**(parser_context or {}), "encoding": "utf-8"})
        except RecursionError:
            raise exceptions.ParseError("JSON parse error - nested too deeply") from None


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "Request body too large."


def exception_handler(exc, context):
    """DRF's handler, and a JSON 413 for a body past DATA_UPLOAD_MAX_MEMORY_SIZE: Django raises
    RequestDataTooBig while DRF reads request.data, and would answer with its HTML 400 page."""
    if isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge()
    return views.exception_handler(exc, context)
