"""The page an e-mail's Approve or Reject link opens (email_links.py): behind the admin's login, it
shows the call and asks to confirm the link's decision; its POST (CSRF-protected) decides, through
approval_decide and with every rule the admin keeps. The link is spent in the decision's
transaction, so a refused decision leaves it usable and a taken one makes it useless."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from . import email_links, services, step_up
from .forms import LinkedDecisionForm
from .models import DECIDE_PERMISSION, ApprovalRequest, DecidedVia
from .notifications import decision_page

TEMPLATE = "admin/approvals/email_decision.html"
NOT_WAITING = "Nothing was decided: the agent's run is not waiting for this approval."


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
    if not request.user.has_perm(DECIDE_PERMISSION):
        refused = f"You may not decide approvals: it needs {DECIDE_PERMISSION}."
        return _page(request, refused=refused, status=403, **context)
    if step_up.required_for(approval) and not step_up.is_fresh(request):
        # Step up first, then back to this page: the link is spent only by a decision.
        return HttpResponseRedirect(f"{reverse('staff-step-up')}?{urlencode({'next': request.get_full_path()})}")
    form = LinkedDecisionForm(request.POST if request.method == "POST" else None)
    if not form.is_valid():  # a GET, or a POST with a note that is not one
        return _page(request, form=form, **context)
    try:
        with transaction.atomic():
            email_links.spend(link)
            approval = services.approval_decide(
                approval=approval,
                approved=link.approves,
                note=form.cleaned_data["note"],
                via=DecidedVia.EMAIL,
                user=request.user,
            )
    except services.PolicyChanged as changed:
        refused = f"Nothing was decided. {changed} Decide on the decision page."
        return _page(request, refused=refused, status=409, **context)
    except (services.NotAllowed, services.SameApprover) as not_allowed:
        return _page(request, refused=f"Nothing was decided: {not_allowed}", status=403, **context)
    except (services.ApprovalConflict, email_links.LinkRefused) as conflict:
        return _page(request, refused=str(conflict), status=409, **context)
    except services.NothingPending:
        return _page(request, refused=NOT_WAITING, status=409, **context)
    context["approval"] = approval
    return _page(request, done=True, **context)


def _page(request: HttpRequest, *, status: int = 200, **context: Any) -> HttpResponse:
    return render(request, TEMPLATE, {"title": "Confirm a decision", **context}, status=status)
