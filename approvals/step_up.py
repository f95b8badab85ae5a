"""Step-up for high-risk policies: staff prove again who they are before a decision is taken.

A policy with `requires_step_up` (ApprovalPolicy) holds every decision on the approvals it
requires to one more proof than the login or the staff token:

- in the admin, the password entered again, which counts for STEP_UP_MINUTES (the time is kept
  in the Django session), or a code from the decider's TOTP device (django-otp's `otp_totp`,
  enrolled in the admin), which counts the same way. A decision posted without a fresh step-up
  is held on the step-up page, with what was decided, and goes on once the proof is given. The
  page is also at /admin/step-up/, to step up before deciding;
- in the REST API, a staff token and an `X-OTP-Code` header with a current code, for each
  decision: the API has no session to remember a step-up in, and the shared ADMIN_TOKEN names
  nobody who could have a device, so it cannot decide these at all;
- anywhere else (a chat message's buttons, an e-mail link): not at all. A door that cannot ask for
  a password or a code calls `required_for(approval)` and, when it is true, links to the decision
  page in the admin instead of deciding.

Each step-up is an event of the audit chain ("stepped_up", with how), so the audit shows who
proved themselves, when, and for which approval. A TOTP code is taken once (django-otp records the
last time step used) and wrong codes are throttled by django-otp's own back-off.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django_otp.plugins.otp_totp.models import TOTPDevice

from . import audit
from .models import ApprovalRequest

OTP_HEADER = "X-OTP-Code"
PASSWORD, TOTP = "password", "totp"
SESSION_KEY = "approvals_step_up"
# What a TOTP code looks like: 6 to 8 digits (RFC 6238). Anything else is refused before
# django-otp's int(), which would take " 123456" or "+123456".
CODE = re.compile(r"[0-9]{6,8}")


def required_for(approval: ApprovalRequest) -> bool:
    """Whether a decision on `approval` needs a step-up: its policy, as it is now, requires one."""
    policy = approval.policy
    return policy is not None and policy.requires_step_up


def window() -> timedelta:
    return timedelta(minutes=settings.STEP_UP_MINUTES)


# --- in the admin: the session remembers the step-up for STEP_UP_MINUTES ----------------------------


def stepped_up_at(request: HttpRequest) -> float | None:
    """When this session's user last stepped up (a Unix time), or None."""
    kept = request.session.get(SESSION_KEY)
    if not isinstance(kept, dict) or kept.get("user") != request.user.pk:
        return None
    at = kept.get("at")
    return at if isinstance(at, float) else None


def is_fresh(request: HttpRequest) -> bool:
    at = stepped_up_at(request)
    return at is not None and 0 <= time.time() - at < window().total_seconds()


def fresh_until(request: HttpRequest) -> datetime | None:
    """Until when this session's step-up counts; None when there is none, or it is stale."""
    at = stepped_up_at(request)
    return datetime.fromtimestamp(at, UTC) + window() if at is not None and is_fresh(request) else None


class StepUpForm(forms.Form):
    """The proof: the password again, or a code from the user's TOTP device."""

    prefix = "step_up"
    password = forms.CharField(
        required=False, strip=False, widget=forms.PasswordInput(attrs={"autocomplete": "current-password"})
    )
    code = forms.CharField(
        label="or a code from your TOTP device",
        required=False,
        widget=forms.TextInput(attrs={"autocomplete": "one-time-code", "inputmode": "numeric", "size": 8}),
    )

    def __init__(self, user: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        self.method = ""

    def clean(self) -> dict[str, Any]:
        password, code = self.cleaned_data.get("password"), (self.cleaned_data.get("code") or "").strip()
        if password:
            if not self.user.check_password(password):
                raise forms.ValidationError("That is not your password. Nothing was decided.")
            self.method = PASSWORD
        elif code:
            refusal = code_refusal(self.user, code)
            if refusal:
                raise forms.ValidationError(f"{refusal} Nothing was decided.")
            self.method = TOTP
        else:
            raise forms.ValidationError("Enter your password, or a code from your TOTP device.")
        return self.cleaned_data

    @classmethod
    def posted(cls, request: HttpRequest) -> StepUpForm:
        """The form, bound when the step-up page was submitted with this request."""
        given = any(name.startswith(f"{cls.prefix}-") for name in request.POST)
        return cls(request.user, request.POST if given else None)


def record(request: HttpRequest, form: StepUpForm, *, approval: ApprovalRequest | None = None) -> None:
    """The step-up passed: remembered in the session, and appended to the audit chain."""
    request.session[SESSION_KEY] = {"user": request.user.pk, "at": time.time()}
    audit.record(audit.STEPPED_UP, approval=approval, actor=request.user, via="admin", method=form.method)


def held_decision(request: HttpRequest, form: StepUpForm, *, approval: ApprovalRequest, action: str) -> HttpResponse:
    """The step-up page for a decision posted without a fresh step-up: the decision's own fields
    ride along, hidden, and are posted again to `action` with the proof."""
    carried = [
        (name, value)
        for name, values in request.POST.lists()
        if name != "csrfmiddlewaretoken" and not name.startswith(f"{StepUpForm.prefix}-")
        for value in values
    ]
    return _page(request, form, approval=approval, action=action, carried=carried)


def _page(
    request: HttpRequest,
    form: StepUpForm,
    *,
    approval: ApprovalRequest | None = None,
    action: str = "",
    carried: list[tuple[str, str]] | None = None,
    next_url: str = "",
) -> HttpResponse:
    context = {
        **admin.site.each_context(request),
        "title": "Confirm it’s you",
        "form": form,
        "approval": approval,
        "decision": dict(carried or []).get("decision"),
        "action": action,
        "carried": carried or [],
        "next": next_url,
        "minutes": f"{settings.STEP_UP_MINUTES:g}",
        "has_device": has_device(request.user),
        "back": reverse("admin:approvals_approvalrequest_change", args=[approval.pk]) if approval else "",
    }
    # 403 when the proof was wrong, so no client takes the page for a decision taken.
    return TemplateResponse(
        request, "admin/approvals/step_up.html", context, status=403 if form.is_bound and form.errors else 200
    )


def step_up_view(request: HttpRequest) -> HttpResponse:
    """/admin/step-up/: step up before deciding, then back to `next` (an address on this site)."""
    next_url = request.POST.get("next") or request.GET.get("next") or ""
    if not url_has_allowed_host_and_scheme(next_url, {request.get_host()}, require_https=request.is_secure()):
        next_url = reverse("admin:approvals_approvalrequest_changelist")
    form = StepUpForm.posted(request) if request.method == "POST" else StepUpForm(request.user)
    if request.method == "POST" and form.is_valid():
        record(request, form)
        messages.success(request, f"Confirmed: you may decide approvals that require step-up for the next "
                                  f"{settings.STEP_UP_MINUTES:g} minutes.")  # fmt: skip
        return HttpResponseRedirect(next_url)
    return _page(request, form, action=reverse("staff-step-up"), next_url=next_url)


# --- TOTP ------------------------------------------------------------------------------------------


def has_device(user: Any) -> bool:
    return user is not None and TOTPDevice.objects.devices_for_user(user, confirmed=True).exists()


def code_refusal(user: Any, code: str) -> str:
    """Why `code` is not a current code of one of `user`'s confirmed TOTP devices ("" when it is:
    then it is used up)."""
    if not has_device(user):
        return (
            "You have no TOTP device: ask an administrator to enrol one for you in the admin (TOTP devices), "
            "or enter your password."
        )
    if not CODE.fullmatch(code):
        return "A TOTP code is 6 to 8 digits."
    # Locked, so one code is taken once even by two requests at the same moment: django-otp
    # records the time step it was used in, and refuses that step after.
    with transaction.atomic():
        devices = list(TOTPDevice.objects.devices_for_user(user, confirmed=True).select_for_update())
        # django-otp's back-off: after each wrong code, the device takes none for a while.
        allowed = [device for device in devices if device.verify_is_allowed()[0]]
        if not allowed:
            return "Too many wrong codes: wait a few seconds, then try a new code."
        if any(device.verify_token(code) for device in allowed):
            return ""
    return "That is not a current code of your TOTP device (each code is taken once)."


# --- in the REST API: a staff token and a code, for each decision ----------------------------------


def api_step_up(request: Any, approval: ApprovalRequest) -> dict[str, str] | None:
    """The API's step-up for a decision on `approval`, checked and, when it passes, recorded in the
    audit: None when this request may decide; else the body of its 403, saying what is required."""
    if not required_for(approval):
        return None
    policy = f"The policy “{approval.policy_name or approval.policy}” requires step-up"
    if request.user is None:
        return {
            "error": f"{policy}: the ADMIN_TOKEN names nobody, so it cannot decide this. Decide with your own "
            f"staff API token and an {OTP_HEADER} header holding a current code from your TOTP device.",
            "required": f"staff token, {OTP_HEADER}",
        }
    code = request.headers.get(OTP_HEADER, "").strip()
    if not code:
        return {
            "error": f"{policy}: send an {OTP_HEADER} header holding a current code from your TOTP device.",
            "required": OTP_HEADER,
        }
    refusal = code_refusal(request.user, code)
    if refusal:
        return {"error": f"{policy}, and the {OTP_HEADER} header was refused. {refusal}", "required": OTP_HEADER}
    audit.record(audit.STEPPED_UP, approval=approval, actor=request.user, via="api", method=TOTP)
    return None
