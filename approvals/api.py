"""The article's admin API, in DRF: list what waits for staff, read one approval, and decide.

    GET  /api/admin/approvals        pending approvals, newest first
    GET  /api/admin/approvals/<id>   one approval, by its approval_id or by its thread_id
    POST /api/admin/approvals/<id>   {"approved": bool, "note": str, "arguments": [{...}, ...],
                                      "seen_policy_version": int}
                                     -> {"status", "approval_id", "thread_id", "answer",
                                         "approvals_given", "approvals_required", "digest"}
    GET  /api/admin/audit?since=&until=   the audit chain as JSON Lines, streamed

Two kinds of token, sent as `Authorization: Bearer <token>` or knox's usual `Token <token>`. A
staff member's own API token (django-rest-knox: created and revoked on the admin's API tokens
page, approvals/tokens.py, stored only as a digest) acts as that person: reading needs the view
permission on approvals, deciding needs approvals.decide_approval, and the audit names who
decided. The article's shared ADMIN_TOKEN acts as nobody in particular: it may do everything, and
the audit says "the REST API (admin token)"; without ADMIN_TOKEN configured, only staff tokens are
taken. Each refusal says what was wrong: no header, another scheme, no token, a token that is
neither (401), an account that is not staff or lacks the permission (403).

A decision on an approval whose policy requires step-up (approvals/step_up.py) also needs an
`X-OTP-Code` header with a current code from the staff member's TOTP device; without one, with a
wrong one, or with the ADMIN_TOKEN, it is refused with 403 and {"error", "required"}.

As in the article, the decision answers with the resumed run's answer, so the view waits for the
worker, up to APPROVAL_WAIT_SECONDS; past that it answers 202 with answer null (also when the
broker refused the resume: the decision is saved, and the periodic job resumes it). The first
approval of a request that needs two (the two-person rule) answers 202 at once, status "pending",
"1 of 2": nothing runs until a second member of staff approves.
"""

from __future__ import annotations

import hmac
import io
import uuid

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from knox.auth import TokenAuthentication
from rest_framework import exceptions, serializers, status, views
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.parsers import JSONParser
from rest_framework.permissions import BasePermission
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from . import audit, deciders, resumes, selectors, services, step_up
from .models import DECIDE_PERMISSION, ApprovalRequest, DecidedVia

VIEW_PERMISSION = "approvals.view_approvalrequest"
AUDIT_PERMISSION = "approvals.view_auditevent"

# --- authentication -------------------------------------------------------------------------

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


# The article's 404, word for word and under its field name: {"error": ...}, not DRF's {"detail": ...}.
NOTHING_PENDING = {"error": "No pending approval for this thread."}
NO_SUCH_APPROVAL = {"error": "No approval with this approval_id or thread_id."}


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


@csrf_exempt
def not_found(request, *args, **kwargs):
    """Any other path under the API: a JSON 404 like the API's others, not Django's HTML page. Exempt
    from CSRF, as the API's views are (DRF's): a POST with a token would otherwise get Django's HTML
    403 "CSRF verification failed" instead."""
    return JsonResponse({"detail": "Not found."}, status=status.HTTP_404_NOT_FOUND)


# --- serializers ----------------------------------------------------------------------------


class PolicyFields(serializers.ModelSerializer):
    required_by = serializers.CharField(
        help_text='The policy that sent the call to staff, or "the tool\'s high_risk flag".'
    )
    approvals_given = serializers.IntegerField(help_text="Staff approvals so far (M of N: approvals_required).")
    approver_group = serializers.StringRelatedField(
        help_text="The group whose members decide it (its policy's; moved on by escalation), or null: any decider."
    )
    digest = serializers.CharField(
        help_text="SHA-256 of the canonical JSON (RFC 8785) of the graph, the tool calls, the caller and the policy "
        "(id and version): the action as requested."
    )
    policy_version = serializers.IntegerField(
        allow_null=True, help_text="The version of the policy when the call was requested (null: no policy)."
    )
    current_policy_version = serializers.IntegerField(
        allow_null=True, help_text="Its version now; 0 once deleted. A decision must confirm it when it differs."
    )
    policy_changed = serializers.BooleanField(
        help_text="The policy changed since the request: send seen_policy_version with the decision."
    )

    class Meta:
        model = ApprovalRequest
        fields = [
            "required_by",
            "approvals_required",
            "approvals_given",
            "approver_group",
            "digest",
            "policy_version",
            "current_policy_version",
            "policy_changed",
        ]


class PendingApprovalSerializer(PolicyFields):
    class Meta:
        model = ApprovalRequest
        fields = [
            "id",
            "thread_id",
            "graph",
            "tool_calls",
            "visitor_message",
            "created_at",
            "expires_at",
            *PolicyFields.Meta.fields,
        ]


class ApprovalSerializer(PolicyFields):
    decided_by = serializers.CharField(source="decider", help_text="Who decided, and through which door.")
    attempts = serializers.SerializerMethodField(
        help_text="Every attempt at this call, oldest first, this one included: each revision the agent made "
        "after staff requested changes is an approval of its own. One id when nobody requested changes."
    )

    def get_attempts(self, approval: ApprovalRequest) -> list[str]:
        return [str(attempt.pk) for attempt in approval.attempts()]

    class Meta:
        model = ApprovalRequest
        fields = [
            "id",
            "thread_id",
            "graph",
            "tool_calls",
            "edited_tool_calls",
            "approved_digest",
            "visitor_message",
            "status",
            *PolicyFields.Meta.fields,
            "note",
            "decided_by",
            "decided_at",
            "answer",
            "answered_at",
            "error",
            "created_at",
            "expires_at",
            "revision_of",
            "attempts",
        ]


class JSONBooleanField(serializers.BooleanField):
    """Only JSON true or false. DRF's BooleanField also takes "yes", "on", 1 and the like, and only an
    explicit approved: true may reach the run (docs/rules.md, "Fail closed")."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class DecisionSerializer(serializers.Serializer):
    approved = JSONBooleanField(required=False, help_text="true approves, false rejects. Or give request_changes.")
    request_changes = serializers.CharField(
        required=False,
        trim_whitespace=False,
        help_text="Instead of approved: what must change. Nothing runs; the agent's run receives "
        '{"approved": false, "changes_requested": true, "note": <this text>}, and its revised call is a new '
        "approval whose revision_of is this one.",
    )
    # Passed to the model verbatim (the article's test checks it word for word), so not trimmed.
    note = serializers.CharField(required=False, allow_null=True, allow_blank=True, trim_whitespace=False, default=None)
    on_behalf_of = serializers.CharField(
        required=False,
        allow_null=True,
        default=None,
        max_length=150,
        help_text="The username of the staff member whose delegate you are, to decide on their behalf (their "
        "approver groups; the audit names you both). Only within the delegation's period.",
    )
    arguments = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        allow_null=True,
        default=None,
        help_text="With approved: true, the arguments each tool call runs with instead of the agent's: one "
        "JSON object per call of tool_calls, in order, checked against the tool's parameters schema. What "
        "runs, is archived and is shown in the audit beside the original. Ignored on a rejection; a second "
        "approval cannot change the arguments the first approved.",
    )
    seen_policy_version = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=0,
        help_text="When the approval's policy changed since the request (policy_changed), the decision is refused "
        "until it names the policy's current version (current_policy_version; 0 when it was deleted).",
    )

    def validate(self, attrs):
        if "approved" not in attrs and "request_changes" not in attrs:
            raise serializers.ValidationError(
                {"approved": ["This field is required: true or false. Or give request_changes: what must change."]}
            )
        if "approved" in attrs and "request_changes" in attrs:
            raise serializers.ValidationError(
                {"request_changes": ["Give either approved (true or false) or request_changes, not both."]}
            )
        if "request_changes" in attrs and not attrs["request_changes"].strip():
            raise serializers.ValidationError({"request_changes": ["Say what must change."]})
        return attrs


class DecisionResultSerializer(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=[
            ApprovalRequest.Status.APPROVED,
            ApprovalRequest.Status.REJECTED,
            ApprovalRequest.Status.CHANGES_REQUESTED,
            ApprovalRequest.Status.PENDING,
        ],
        help_text="pending: an approval is in, and more are needed (M of N; progress says how many). "
        "changes_requested: the agent is revising its call; answer is what it said, and revised_approval_id "
        "the revised call's approval once it asked again.",
    )
    approval_id = serializers.UUIDField()
    thread_id = serializers.CharField()
    answer = serializers.CharField(allow_null=True, help_text="The resumed run's final answer; null while it runs.")
    approvals_given = serializers.IntegerField()
    approvals_required = serializers.IntegerField()
    progress = serializers.CharField(required=False, help_text='"1 of 2" while more approvals are needed.')
    digest = serializers.CharField(help_text="The digest of the action as requested.")
    approved_digest = serializers.CharField(
        help_text="The digest of what was approved to run (another one when the arguments were edited); empty "
        "on a rejection or while approvals are still missing."
    )
    error = serializers.CharField(required=False, help_text="Present when the resumed run failed.")
    revised_approval_id = serializers.UUIDField(
        required=False, help_text="After request_changes: the approval of the agent's revised call."
    )


# --- views ----------------------------------------------------------------------------------

AUTH_ERRORS = {
    401: OpenApiResponse(description="No token, or not a valid token."),
    403: OpenApiResponse(description="The staff token's account lacks the permission, or no ADMIN_TOKEN is set."),
}
NOT_FOUND = OpenApiResponse(
    inline_serializer("NothingPending", {"error": serializers.CharField()}),
    description="No such approval, or the thread's checkpoint has no staff approval pending.",
)


class AdminAPIView(APIView):
    authentication_classes = [AdminTokenAuthentication, StaffTokenAuthentication]
    permission_classes = [ApiTokenRequired]
    parser_classes = [BoundedJSONParser]
    renderer_classes = [JSONRenderer]


class ApprovalQueue(AdminAPIView):
    @extend_schema(
        operation_id="approvals_list",
        summary="Pending approvals, newest first",
        responses={200: PendingApprovalSerializer(many=True), **AUTH_ERRORS},
    )
    def get(self, request):
        return Response(PendingApprovalSerializer(selectors.approvals_pending(), many=True).data)


def _is_uuid(ref: str) -> bool:
    try:
        uuid.UUID(ref)
    except ValueError:
        return False
    return True


class ApprovalDetail(AdminAPIView):
    permission_for = {"GET": VIEW_PERMISSION, "POST": DECIDE_PERMISSION}

    @extend_schema(
        operation_id="approvals_retrieve",
        summary="One approval, by its approval_id (or its thread's latest, by thread_id)",
        responses={200: ApprovalSerializer, 404: NOT_FOUND, **AUTH_ERRORS},
    )
    def get(self, request, ref: str):
        approval = selectors.approval_by_ref(ref) if "\x00" not in ref else None
        if approval is None:
            return Response(NO_SUCH_APPROVAL, status=status.HTTP_404_NOT_FOUND)
        return Response(ApprovalSerializer(approval).data)

    @extend_schema(
        operation_id="approvals_decide",
        summary="Approve, reject or request changes to a paused call, by approval_id or thread_id, and get the "
        "resumed run's answer",
        request=DecisionSerializer,
        parameters=[
            OpenApiParameter(
                step_up.OTP_HEADER,
                str,
                location=OpenApiParameter.HEADER,
                description="A current code from your TOTP device: required when the approval's policy requires "
                "step-up, and taken once.",
            )
        ],
        responses={
            **AUTH_ERRORS,
            200: DecisionResultSerializer,
            202: OpenApiResponse(
                DecisionResultSerializer,
                description="Decided, and the run has not answered yet; or the first of two approvals (pending, "
                '"1 of 2").',
            ),
            400: OpenApiResponse(description="Not a decision, or edited arguments that do not fit the tool calls."),
            404: NOT_FOUND,
            403: OpenApiResponse(
                description="Not allowed to decide this one: not a member of its approver group, a delegate "
                "outside the delegation's period, or the caller approving their own call; or the token's "
                "owner is not staff or lacks the permission. Or the approval's policy requires step-up and the "
                f"request has no valid {step_up.OTP_HEADER} header (a current code from the staff member's TOTP "
                'device), or came with the ADMIN_TOKEN, which cannot decide it: then {"error", "required"}.'
            ),
            409: OpenApiResponse(
                description="Already decided, or expired; or a further approval by someone who gave one already "
                "(in person or through a delegate), or by the admin token, which names nobody; or the policy "
                "changed since the request and seen_policy_version does not name its current version."
            ),
        },
    )
    def post(self, request, ref: str):
        decision = DecisionSerializer(data=request.data)
        decision.is_valid(raise_exception=True)
        if "\x00" in ref:  # no thread has one, and PostgreSQL cannot compare text with it
            return Response(NOTHING_PENDING, status=status.HTTP_404_NOT_FOUND)
        try:
            # An approval_id names its approval; anything else is the article's thread_id.
            approval = (_is_uuid(ref) and ApprovalRequest.objects.filter(pk=ref).first()) or (
                services.approval_for_thread(thread_id=ref)
            )
            refusal = step_up.api_step_up(request, approval)
            if refusal is not None:
                return Response(refusal, status=status.HTTP_403_FORBIDDEN)
            given = decision.validated_data
            on_behalf_of = deciders.delegator_named(given["on_behalf_of"])
            if "request_changes" in given:
                approval = services.approval_request_changes(
                    approval=approval,
                    changes=given["request_changes"],
                    via=DecidedVia.API,
                    user=request.user,
                    on_behalf_of=on_behalf_of,
                )
            else:
                approval = services.approval_decide(
                    approval=approval,
                    via=DecidedVia.API,
                    user=request.user,
                    approved=given["approved"],
                    note=given["note"],
                    edited_arguments=given["arguments"] if given["approved"] else None,
                    on_behalf_of=on_behalf_of,
                    seen_policy_version=given["seen_policy_version"],
                )
        except services.NothingPending:
            return Response(NOTHING_PENDING, status=status.HTTP_404_NOT_FOUND)
        except services.NotAllowed as refused:
            raise exceptions.PermissionDenied(str(refused)) from None
        except (services.ApprovalConflict, services.SameApprover, services.PolicyChanged) as conflict:
            raise Conflict(str(conflict)) from None
        except services.InvalidEdit as invalid:
            raise exceptions.ValidationError({"arguments": [str(invalid)]}) from None
        if approval.decided_at is not None:
            approval = resumes.approval_wait_for_answer(approval_id=approval.pk, timeout=settings.APPROVAL_WAIT_SECONDS)
        body = {
            "status": approval.status,
            "approval_id": str(approval.pk),
            "thread_id": approval.thread_id,
            "answer": approval.answer if approval.answered_at else None,
            "approvals_given": approval.approvals_given,
            "approvals_required": approval.approvals_required,
            "digest": approval.digest,
            "approved_digest": approval.approved_digest,
        }
        if approval.progress:
            body["progress"] = approval.progress
        if approval.error:
            body["error"] = approval.error
        if (revised := ApprovalRequest.objects.filter(revision_of=approval).first()) is not None:
            body["revised_approval_id"] = str(revised.pk)
        return Response(body, status=status.HTTP_200_OK if approval.answered_at else status.HTTP_202_ACCEPTED)


class AuditExport(AdminAPIView):
    """The audit chain as JSON Lines, one event a line with its prev_hash and hash, streamed."""

    permission_for = {"GET": AUDIT_PERMISSION}

    @extend_schema(
        operation_id="audit_export",
        summary="The approvals audit chain as JSON Lines, between two dates",
        parameters=[
            OpenApiParameter("since", str, description="From this date (2026-12-01) or date and time (ISO 8601)."),
            OpenApiParameter("until", str, description="To this date (included) or date and time (excluded)."),
        ],
        responses={
            (200, "application/jsonl"): OpenApiResponse(description="One event a line, in chain order."),
            400: OpenApiResponse(description="since or until is not a date."),
            **AUTH_ERRORS,
        },
    )
    def get(self, request):
        try:
            since = audit.bound(request.query_params.get("since"))
            until = audit.bound(request.query_params.get("until"), end=True)
        except audit.BadBound as bad:
            raise exceptions.ValidationError({"since/until": [str(bad)]}) from None
        return audit.export_response(since, until)
