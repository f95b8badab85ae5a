"""The page an e-mail's Approve or Reject link opens (email_links.py): behind the admin's login, it
shows the call and asks to confirm the link's decision; its POST (CSRF-protected) decides, through
approval_decide and with every rule the admin keeps; a refusal is answered with its status and
text (refusals.py), and one for want of a step-up holds the decision on the step-up page, which
posts it back here with the proof. The link is spent in the decision's transaction, so a refused
decision leaves it usable and a taken one makes it useless."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from . import deciders, decisions, email_links, refusals, step_up
from .forms import LinkedDecisionForm
from .models import ApprovalRequest, DecidedVia
from .notifications import decision_page
from .refusals import AlreadyDecided, Refusal, StepUpProofInvalid, StepUpRequired

TEMPLATE = "admin/approvals/email_decision.html"


@require_http_methods(["GET", "POST"])
def email_decision(request: HttpRequest, token: str) -> HttpResponse:
    """Wrapped in admin.site.admin_view (urls.py): a member of staff, logged in, CSRF-checked."""
    try:
        link = email_links.read(token)
    except email_links.LinkRefused as refused_link:
        return _page(request, refused=str(refused_link), status=410)
    approval = ApprovalRequest.objects.filter(pk=link.approval_id).first()
    if approval is None:
        return _page(request, refused="This approval does not exist (any more).", status=404)
    context: dict[str, Any] = {"approval": approval, "link": link, "decision_page": decision_page(approval)}
    try:
        # Not worth showing the call to someone who may not decide it at all (the service refuses
        # them again when they post).
        deciders.check_may_decide(request.user)
    except Refusal as refused:
        return _page(request, refused=refused.said(), status=refused.status, **context)
    proof = step_up.proof_from(request)
    if (
        request.method == "GET"
        and approval.is_decidable
        and step_up.required_for(approval)
        and not step_up.is_fresh(request)
        # A passkey is given on the decision page only, bound to the decision: no step-up page helps.
        and not step_up.passkey_only(approval)
    ):
        # Step up first, then back to this page: the link is spent only by a decision.
        return HttpResponseRedirect(f"{reverse('staff-step-up')}?{urlencode({'next': request.get_full_path()})}")
    form = LinkedDecisionForm(request.POST if request.method == "POST" else None)
    if not form.is_valid():  # a GET, or a POST with a note that is not one
        return _page(request, form=form, **context)
    try:
        wrong_proof = None
        with transaction.atomic():
            try:
                approval = decisions.approval_decide(
                    approval=approval,
                    approved=link.approves,
                    note=form.cleaned_data["note"],
                    via=DecidedVia.EMAIL,
                    user=request.user,
                    step_up=proof,
                )
            except StepUpProofInvalid as refused:
                # Nothing was decided, but the device's back-off must commit (decisions.py).
                wrong_proof = refused
            else:
                email_links.spend(link)
        if wrong_proof is not None:
            raise wrong_proof
    except StepUpRequired as refused:
        if step_up.passkey_only(approval):
            said = refusals.said_with(refused, decision_page=context["decision_page"])
            return _page(request, refused=said, status=refused.status, **context)
        # Held on the step-up page, which posts the note back here with the proof.
        decision = "approve" if link.approves else "reject"
        return step_up.held_decision(
            request, approval=approval, refused=refused, action=request.path, decision=decision
        )
    except Refusal as refused:
        said = refusals.said_with(refused, decision_page=context["decision_page"])
        return _page(request, refused=said, status=refused.status, **context)
    except email_links.LinkRefused as used:
        # Spent by another decision a moment ago: the approval's state, as AlreadyDecided is.
        return _page(request, refused=str(used), status=AlreadyDecided.status, **context)
    step_up.remember(request, proof)
    context["approval"] = approval
    return _page(request, done=True, **context)


def _page(request: HttpRequest, *, status: int = 200, **context: Any) -> HttpResponse:
    return render(request, TEMPLATE, {"title": "Confirm a decision", **context}, status=status)
