"""Deciding in the admin: the decision page's POST (`<id>/decide/`, CSRF-protected by admin_view)
and the queue's bulk actions. Both parse what was posted (the decision, the note, edited
arguments, whom a delegate acts for, and a step-up: this login's, or a password or code posted
from the step-up page) and hand it to decisions.approval_decide, which checks every rule under the
approval's row lock. A refusal (refusals.py) is answered with its status: the decision page again,
saying why, or the step-up page holding the decision when the refusal is for want of a step-up.
Neither waits for the model: the page reloads itself until the answer lands.
"""

from __future__ import annotations

import copy
import json

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from .. import deciders, decisions, passkeys, step_up
from ..forms import DecisionForm
from ..models import DECIDE_PERMISSION, ApprovalRequest, DecidedVia
from ..refusals import Refusal, StepUpRequired

SECOND_NEEDED = "another member of staff must approve it too before it runs."
# A bulk action has no page to ask for a step-up on.
STEP_UP_FIRST = (
    "nothing was decided: its policy requires step-up. Decide it on its own page, or confirm it’s you "
    "at /admin/step-up/ first."
)


PASSKEY_FIRST = "nothing was decided: its policy requires a passkey for each decision. Decide it on its own page."


class DecidingAdmin(admin.ModelAdmin):
    """The decision views of the approvals' admin (queue.ApprovalRequestAdmin)."""

    actions = ["approve_selected", "reject_selected"]

    def has_decide_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(DECIDE_PERMISSION)

    # --- one approval, from its decision page ------------------------------------------------------

    def decide_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        approval = self.get_object(request, object_id)
        if approval is None:
            raise Http404
        change_url = reverse("admin:approvals_approvalrequest_change", args=[approval.pk])
        form = DecisionForm(request.POST)
        if not form.is_valid():
            if "decision" in form.errors:
                wrong = "Choose Approve, Request changes or Reject."
            elif "note" in form.errors:
                wrong = str(form.errors["note"][0])
            else:
                wrong = form.errors.as_text()
            return self._refused(request, object_id, f"Nothing was decided: {wrong}", status=400)
        decision = form.cleaned_data["decision"]
        approved = decision == "approve"
        try:
            # One text field per tool call, prefilled with its arguments as JSON: what staff
            # approve to run (unchanged, nothing is recorded as edited). A rejection ignores them.
            edits = ([json.loads(text) for text in request.POST.getlist("arguments")] or None) if approved else None
        except (ValueError, RecursionError):
            return self._refused(
                request, object_id, "Nothing was decided: the edited arguments are not valid JSON.", status=400
            )
        proof = step_up.proof_from(request)
        try:
            taken = {
                "approval": approval,
                "via": DecidedVia.ADMIN,
                "user": request.user,
                "on_behalf_of": deciders.delegator_named(form.cleaned_data["on_behalf_of"]),
                "seen_policy_version": form.cleaned_data["seen_policy_version"],
                "step_up": proof,
            }
            if decision == "request_changes":
                approval = decisions.approval_request_changes(changes=form.cleaned_data["note"], **taken)
            else:
                approval = decisions.approval_decide(
                    approved=approved, note=form.cleaned_data["note"], edited_arguments=edits, **taken
                )
        except StepUpRequired as refused:
            if (proof is not None and proof.passkey is not None) or step_up.passkey_only(approval):
                # A passkey is asked for on the decision page itself, bound to the decision.
                return self._refused(request, object_id, refused.said(), status=refused.status)
            # Held on the step-up page, which posts the decision back here with the proof.
            return step_up.held_decision(request, approval=approval, refused=refused, action=request.path)
        except Refusal as refused:
            return self._refused(request, object_id, refused.said(), status=refused.status)
        step_up.remember(request, proof)
        if approval.progress:
            messages.success(request, f"Approved {approval.progress}: {SECOND_NEEDED}")
        elif decision == "request_changes":
            messages.success(
                request,
                "Changes requested. The agent revises its call; the revised one is a new approval, "
                "linked below once it arrives.",
            )
        else:
            verb = "Approved" if approved else "Rejected"
            messages.success(request, f"{verb}. The run resumes in the background; its answer appears below.")
        return HttpResponseRedirect(change_url)

    def passkey_options_view(self, request: HttpRequest, object_id: str) -> JsonResponse:
        """`<id>/decide/passkey/`: a nonce for this decision, and the options for the browser's
        navigator.credentials.get, their challenge derived from the decision and the arguments
        posted (passkeys.issue). Whether the decision may be taken is the decision's to say."""
        approval = self.get_object(request, object_id)
        if approval is None:
            raise Http404
        if not self.has_decide_permission(request):
            return JsonResponse({"error": "You may not decide approvals."}, status=403)
        decision = request.POST.get("decision", "")
        if decision not in passkeys.DECISIONS:
            return JsonResponse({"error": "Choose Approve, Request changes or Reject."}, status=400)
        if not passkeys.has_passkey(request.user):
            return JsonResponse({"error": "You have no passkey: register one on “Your passkeys”."}, status=403)
        try:
            edits = [json.loads(text) for text in request.POST.getlist("arguments")] or None
        except (ValueError, RecursionError):
            return JsonResponse({"error": "Nothing was decided: the edited arguments are not valid JSON."}, status=400)
        edited = decisions.edit_digest(approval, edits) if decision == "approve" else ""
        return JsonResponse(passkeys.issue(request, approval, decision=decision, edited_digest=edited))

    def _refused(self, request: HttpRequest, object_id: str, said: str, *, status: int) -> HttpResponse:
        """The decision page again, saying why nothing was decided, with the refusal's status: a
        client that posted the decision can tell it was not taken."""
        if not self.has_view_permission(request):
            raise PermissionDenied  # nor may they see the page that would say why
        messages.error(request, said)
        shown = copy.copy(request)
        shown.method = "GET"  # the page as it is now, not a post of the admin's change form
        response = self.change_view(shown, object_id)
        response.status_code = status
        return response

    # --- several approvals, from the queue ---------------------------------------------------------

    @admin.action(description="Approve selected approvals", permissions=["decide"])
    def approve_selected(self, request, queryset):
        return self._decide_selected(request, queryset, approved=True)

    @admin.action(description="Reject selected approvals", permissions=["decide"])
    def reject_selected(self, request, queryset):
        return self._decide_selected(request, queryset, approved=False)

    def _decide_selected(self, request, queryset, *, approved: bool):
        """Ask for one note, then decide each approval on its own (its own locked decision, as
        one at a time would be), and report each that could not be decided, saying why."""
        if "apply" not in request.POST:
            context = {
                **self.admin_site.each_context(request),
                "title": "Approve these?" if approved else "Reject these?",
                "opts": self.model._meta,
                "approvals": queryset,
                "action": request.POST.get("action"),
                "approved": approved,
                "form": DecisionForm(),
                "selected": request.POST.getlist(ACTION_CHECKBOX_NAME),
            }
            return TemplateResponse(request, "admin/approvals/decide_selected.html", context)
        form = DecisionForm({"decision": "approve" if approved else "reject", "note": request.POST.get("note", "")})
        if not form.is_valid():
            self.message_user(request, f"Nothing was decided: {form.errors.as_text()}", messages.ERROR)
            return None
        note = form.cleaned_data["note"] or None
        # This login's step-up only.
        proof = step_up.proof_from(request)
        decided = 0
        approval: ApprovalRequest
        for approval in queryset:
            try:
                approval = decisions.approval_decide(
                    approval=approval, approved=approved, note=note, via=DecidedVia.ADMIN, user=request.user,
                    step_up=proof,
                )  # fmt: skip
            except StepUpRequired:
                # A passkey confirms one decision on its own page; a password counts for a while.
                first = PASSKEY_FIRST if step_up.passkey_only(approval) else STEP_UP_FIRST
                self.message_user(request, f"{approval}: {first}", messages.WARNING)
            except Refusal as refused:
                # A changed policy is confirmed on the approval's own page, where it is shown.
                self.message_user(request, f"{approval}: {refused.said()}", messages.WARNING)
            else:
                if approval.progress:
                    self.message_user(request, f"{approval}: approved {approval.progress}; {SECOND_NEEDED}")
                else:
                    decided += 1
        verb = "Approved" if approved else "Rejected"
        self.message_user(request, f"{verb} {decided} approval(s); their runs resume in the background.")
        return None
