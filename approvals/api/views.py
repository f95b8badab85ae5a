"""The article's admin API, in DRF: list what waits for staff, read one approval, and decide.

    GET  /api/admin/approvals        pending approvals, newest first
    GET  /api/admin/approvals/<id>   one approval, by its approval_id or by its thread_id
    POST /api/admin/approvals/<id>   {"approved": bool, "note": str, "arguments": [{...}, ...],
                                      "seen_policy_version": int}
                                     -> {"status", "approval_id", "thread_id", "answer",
                                         "approvals_given", "approvals_required", "digest"}
    GET  /api/admin/audit?since=&until=   the audit chain as JSON Lines, streamed

Who calls, and with which permission, is auth.py's: reading needs the view permission on
approvals, deciding needs approvals.decide_approval (and the audit names who decided), or the
shared ADMIN_TOKEN, which is nobody in particular. A decision is parsed here and taken by
decisions.approval_decide, with the X-OTP-Code header as its step-up proof (approvals/step_up.py);
a refusal is answered with its one status (refusals.py) and {"detail": ...} (the step-up refusals
with {"error", "required"}, the article's 404 with {"error": ...}).

As in the article, the decision answers with the resumed run's answer, so the view waits for the
worker, up to APPROVAL_WAIT_SECONDS; past that it answers 202 with answer null (also when the
broker refused the resume: the decision is saved, and the periodic job resumes it). The first
approval of a request that needs two (the two-person rule) answers 202 at once, status "pending",
"1 of 2": nothing runs until a second member of staff approves.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import exceptions, serializers, status
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import audit, deciders, decisions, resumes, selectors, step_up
from ..models import DECIDE_PERMISSION, ApprovalRequest, DecidedVia
from ..refusals import InvalidEdit, NothingPending, Refusal
from .auth import (
    AUDIT_PERMISSION,
    VIEW_PERMISSION,
    AdminTokenAuthentication,
    ApiTokenRequired,
    BoundedJSONParser,
    StaffTokenAuthentication,
)
from .serializers import ApprovalSerializer, DecisionResultSerializer, DecisionSerializer, PendingApprovalSerializer

# The article's 404, word for word and under its field name: {"error": ...}, not DRF's {"detail": ...}.
NO_SUCH_APPROVAL = {"error": "No approval with this approval_id or thread_id."}


@csrf_exempt
def not_found(request, *args, **kwargs):
    """Any other path under the API: a JSON 404 like the API's others, not Django's HTML page. Exempt
    from CSRF, as the API's views are (DRF's): a POST with a token would otherwise get Django's HTML
    403 "CSRF verification failed" instead."""
    return JsonResponse({"detail": "Not found."}, status=status.HTTP_404_NOT_FOUND)


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
                "outside the delegation's period, the caller approving their own call, or a further approval by "
                "someone who gave one already (in person or through a delegate) or by the admin token, which names "
                "nobody; or the token's owner is not staff or lacks the permission. Or the approval's policy "
                f"requires step-up and the request has no valid {step_up.OTP_HEADER} header (a current code from "
                "the staff member's TOTP device), or came with the ADMIN_TOKEN, which cannot decide it: then "
                '{"error", "required"}.'
            ),
            409: OpenApiResponse(
                description="Already decided, expired or withdrawn (answered before any step-up is checked); or "
                "the policy changed since the request and seen_policy_version does not name its current version."
            ),
        },
    )
    def post(self, request, ref: str):
        decision = DecisionSerializer(data=request.data)
        decision.is_valid(raise_exception=True)
        given = decision.validated_data
        try:
            if "\x00" in ref:  # no thread has one, and PostgreSQL cannot compare text with it
                raise NothingPending
            # An approval_id names its approval; anything else is the article's thread_id.
            approval = (_is_uuid(ref) and ApprovalRequest.objects.filter(pk=ref).first()) or (
                decisions.approval_for_thread(thread_id=ref)
            )
            taken: dict[str, Any] = {
                "approval": approval,
                "via": DecidedVia.API,
                "user": request.user,
                "on_behalf_of": deciders.delegator_named(given["on_behalf_of"]),
                "seen_policy_version": given["seen_policy_version"],
                "step_up": step_up.from_header(request),
            }
            if "request_changes" in given:
                approval = decisions.approval_request_changes(changes=given["request_changes"], **taken)
            else:
                approval = decisions.approval_decide(
                    approved=given["approved"],
                    note=given["note"],
                    edited_arguments=given["arguments"] if given["approved"] else None,
                    **taken,
                )
        except InvalidEdit as invalid:
            raise exceptions.ValidationError({"arguments": [str(invalid)]}) from None
        except Refusal as refused:
            return Response(refused.api_body(), status=refused.status)
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
