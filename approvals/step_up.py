"""Step-up for high-risk policies: staff prove again who they are before a decision is taken.

A policy with `requires_step_up` (ApprovalPolicy) holds every decision on the approvals it
requires to one more proof than the login or the staff token. The rule is the decision service's
(`check`, called by approval_decide and approval_request_changes under the approval's row lock,
once the approval is known to be decidable and the decider allowed); a door only turns what it
received into a `StepUpProof` and passes it on:

- the admin's decision page and an e-mail link's confirmation page: the step-up this login gave
  within STEP_UP_MINUTES (kept in the Django session), or the password entered again or a code
  from the decider's TOTP device (django-otp's `otp_totp`, enrolled in the admin) posted with the
  decision from the step-up page, where a decision refused for want of one is held with what was
  decided. The page is also at /admin/step-up/, to step up before deciding;
- the REST API: a staff token and an `X-OTP-Code` header with a current code, for each decision:
  the API has no session to remember a step-up in, and the shared ADMIN_TOKEN names nobody who
  could have a device, so it cannot decide these at all;
- Slack: no proof at all, so the service refuses, and the answer links to the decision page;
- the admin's decision page, with a passkey: an assertion of this very decision, its challenge
  derived from a nonce issued for it and from what is decided (passkeys.py), checked by
  passkeys.check. A policy with `requires_passkey` takes nothing else: a password, a code, this
  login's earlier step-up and the REST API are refused for it.

Each step-up is an event of the audit chain ("stepped_up", with how), so the audit shows who
proved themselves, when, and for which approval. A TOTP code is taken once (django-otp records the
last time step used) and wrong codes are throttled by django-otp's own back-off; wrong passwords
are held to the same back-off (PasswordThrottle), so neither is a faster guess than the other.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django_otp.plugins.otp_totp.models import TOTPDevice

from . import audit, passkeys
from .models import ApprovalRequest, DecidedVia, PasswordThrottle
from .refusals import StepUpProofInvalid, StepUpRequired

OTP_HEADER = "X-OTP-Code"
PASSWORD, TOTP, PASSKEY = "password", "totp", passkeys.REQUIRED
SESSION_KEY = "approvals_step_up"
# The decision page's fields for a passkey's assertion (its script fills them).
PASSKEY_NONCE, PASSKEY_CREDENTIAL = "passkey_nonce", "passkey_credential"
# What a TOTP code looks like: 6 to 8 digits (RFC 6238). Anything else is refused before
# django-otp's int(), which would take " 123456" or "+123456".
CODE = re.compile(r"[0-9]{6,8}")


def required_for(approval: ApprovalRequest) -> bool:
    """Whether a decision on `approval` needs a step-up: its policy, as it is now, requires one."""
    policy = approval.policy
    return policy is not None and policy.requires_step_up


def passkey_only(approval: ApprovalRequest) -> bool:
    """Whether only a passkey's assertion, bound to the decision, steps up for `approval`."""
    policy = approval.policy
    return policy is not None and policy.requires_step_up and policy.requires_passkey


def window() -> timedelta:
    return timedelta(minutes=settings.STEP_UP_MINUTES)


def _is_fresh(at: float | None) -> bool:
    return at is not None and 0 <= time.time() - at < window().total_seconds()


# --- the proof a door hands to the decision service ------------------------------------------------


@dataclass
class StepUpProof:
    """What a door received as step-up, for the decision service to check under the row lock: a
    step-up `user_id` gave earlier in this login (`at`, a Unix time), or a password or a TOTP code
    sent with this decision, or a passkey's assertion of this very decision (passkeys.py), each
    checked (and a code or a nonce used up) only once the approval is known to be open to this
    decider. `method` is set once the service accepted one, so the admin may remember the step-up
    in its session."""

    user_id: Any
    at: float | None = None
    password: str = ""
    code: str = ""
    passkey: passkeys.Assertion | None = None
    method: str = ""


def check(
    approval: ApprovalRequest,
    *,
    user: Any,
    proof: StepUpProof | None,
    via: str,
    decision: str = "",
    edited_digest: str = "",
) -> None:
    """The step-up rule, for the decision service: returns when `approval`'s policy needs no step-up
    or `proof` is a fresh one of `user`'s (recorded in the audit chain when it came with this
    decision); raises StepUpRequired or StepUpProofInvalid, saying what is required, otherwise.
    `decision` (approve, reject, request_changes) and `edited_digest` (the digest of the action as
    edited, "" when it was not) are what a passkey's challenge is derived from again."""
    if not required_for(approval):
        return
    policy = f"The policy “{approval.policy_name or approval.policy}” requires step-up"
    api = via == DecidedVia.API
    required = OTP_HEADER if api else "step-up"
    if proof is not None and proof.passkey is not None and user is not None and proof.user_id == user.pk:
        kept = passkeys.check(
            approval, user=user, assertion=proof.passkey, decision=decision, edited_digest=edited_digest
        )
        proof.method = PASSKEY
        audit.record(
            audit.STEPPED_UP, approval=approval, actor=user, via=via, method=PASSKEY, passkey=passkeys.recorded(kept)
        )
        return
    if passkey_only(approval):
        _passkey_required(policy, proof=proof, via=via)
    if user is None:
        raise StepUpRequired(
            f"{policy}: the ADMIN_TOKEN names nobody, so it cannot decide this. Decide with your own staff API "
            f"token and an {OTP_HEADER} header holding a current code from your TOTP device.",
            required=f"staff token, {OTP_HEADER}",
        )
    if proof is None or proof.user_id != user.pk or not (proof.password or proof.code or _is_fresh(proof.at)):
        raise StepUpRequired(_ask(policy, via=via, stale=proof is not None and proof.at is not None), required=required)
    if proof.password:
        refusal = password_refusal(user, proof.password)
        if refusal:
            raise StepUpProofInvalid(refusal, required=required)
        method = PASSWORD
    elif proof.code:
        refusal = code_refusal(user, proof.code)
        if refusal:
            said = f"{policy}, and the {OTP_HEADER} header was refused. {refusal}" if api else refusal
            raise StepUpProofInvalid(said, required=required)
        method = TOTP
    else:
        return  # a step-up of this login's, recorded when it was given
    proof.method = method
    audit.record(audit.STEPPED_UP, approval=approval, actor=user, via=via, method=method)


def _passkey_required(policy: str, *, proof: StepUpProof | None, via: str) -> None:
    """A policy that takes only a passkey: refused, saying where one is given."""
    policy = f"{policy} with a passkey"
    if via == DecidedVia.API:
        raise StepUpRequired(
            f"{policy}, which the REST API does not carry: decide it on its decision page in the admin.",
            required=PASSKEY,
        )
    if via != DecidedVia.ADMIN:
        raise StepUpRequired(f"{policy}. Confirm it with your passkey on the decision page", required=PASSKEY)
    if proof is not None and (proof.password or proof.code):
        raise StepUpProofInvalid(
            f"{policy}: a password or a TOTP code does not step up for it. Confirm the decision with your passkey.",
            required=PASSKEY,
        )
    raise StepUpRequired(
        f"{policy}: confirm the decision with your passkey (register one on “Your passkeys” if you have none).",
        required=PASSKEY,
    )


def _ask(policy: str, *, via: str, stale: bool) -> str:
    if via == DecidedVia.API:
        return f"{policy}: send an {OTP_HEADER} header holding a current code from your TOTP device."
    if via == DecidedVia.SLACK:
        # Slack cannot ask for the password or a TOTP code: the decision page can.
        return f"{policy}. Confirm it's you and decide on the decision page"
    if stale:
        return f"{policy}, and yours is more than {settings.STEP_UP_MINUTES:g} minutes old: confirm it’s you again."
    return f"{policy}: confirm it’s you with your password or a code from your TOTP device."


# --- in the admin: the session remembers the step-up for STEP_UP_MINUTES ----------------------------


def stepped_up_at(request: HttpRequest) -> float | None:
    """When this session's user last stepped up (a Unix time), or None."""
    kept = request.session.get(SESSION_KEY)
    if not isinstance(kept, dict) or kept.get("user") != request.user.pk:
        return None
    at = kept.get("at")
    return at if isinstance(at, float) else None


def is_fresh(request: HttpRequest) -> bool:
    return _is_fresh(stepped_up_at(request))


def fresh_until(request: HttpRequest) -> datetime | None:
    """Until when this session's step-up counts; None when there is none, or it is stale."""
    at = stepped_up_at(request)
    return datetime.fromtimestamp(at, UTC) + window() if at is not None and is_fresh(request) else None


def proof_from(request: HttpRequest) -> StepUpProof | None:
    """What a logged-in request carries: a passkey's assertion posted with the decision from the
    decision page, a password or code posted from the step-up page with the decision, else this
    login's step-up (fresh or not: the service says which)."""
    nonce, credential = request.POST.get(PASSKEY_NONCE, ""), request.POST.get(PASSKEY_CREDENTIAL, "")
    if nonce and credential:
        rp_id, origin = passkeys.relying_party(request)
        return StepUpProof(request.user.pk, passkey=passkeys.Assertion(nonce, credential, rp_id, origin))
    form = StepUpForm.posted(request)
    if form.is_bound and form.is_valid():
        return StepUpProof(request.user.pk, password=form.cleaned_data["password"], code=form.cleaned_data["code"])
    at = stepped_up_at(request)
    return StepUpProof(request.user.pk, at=at) if at is not None else None


def remember(request: HttpRequest, proof: StepUpProof | None) -> None:
    """After a decision the service took with a password or code: this login has stepped up. A
    passkey's assertion confirmed that one decision only, so it is not remembered."""
    if proof is not None and proof.method in (PASSWORD, TOTP):
        request.session[SESSION_KEY] = {"user": request.user.pk, "at": time.time()}


class StepUpForm(forms.Form):
    """The proof as posted: the password again, or a code from the user's TOTP device. Checked by
    `check` (a decision) or `verify` (the step-up page alone), not here."""

    prefix = "step_up"
    password = forms.CharField(
        required=False, strip=False, widget=forms.PasswordInput(attrs={"autocomplete": "current-password"})
    )
    code = forms.CharField(
        label="or a code from your TOTP device",
        required=False,
        widget=forms.TextInput(attrs={"autocomplete": "one-time-code", "inputmode": "numeric", "size": 8}),
    )

    def clean(self) -> dict[str, Any]:
        if not self.cleaned_data.get("password") and not (self.cleaned_data.get("code") or "").strip():
            raise forms.ValidationError("Enter your password, or a code from your TOTP device.")
        self.cleaned_data["code"] = (self.cleaned_data.get("code") or "").strip()
        return self.cleaned_data

    @classmethod
    def posted(cls, request: HttpRequest) -> StepUpForm:
        """The form, bound when the step-up page was submitted with this request."""
        given = any(name.startswith(f"{cls.prefix}-") for name in request.POST)
        return cls(request.POST if given else None)


def held_decision(
    request: HttpRequest,
    *,
    approval: ApprovalRequest,
    refused: StepUpRequired,
    action: str,
    decision: str | None = None,
) -> HttpResponse:
    """The step-up page for a decision refused for want of a fresh step-up: the decision's own
    fields ride along, hidden, and are posted again to `action` with the proof. Answered with the
    refusal's status, so no client takes the page for a decision taken."""
    form = StepUpForm.posted(request)
    if isinstance(refused, StepUpProofInvalid):
        form.add_error(None, refused.said())
    elif not form.is_bound:
        form = StepUpForm()
    carried = [
        (name, value)
        for name, values in request.POST.lists()
        if name != "csrfmiddlewaretoken" and not name.startswith(f"{StepUpForm.prefix}-")
        for value in values
    ]
    decision = decision or dict(carried).get("decision")
    return _page(
        request, form, approval=approval, action=action, carried=carried, decision=decision, status=refused.status
    )


def _page(
    request: HttpRequest,
    form: StepUpForm,
    *,
    approval: ApprovalRequest | None = None,
    action: str = "",
    carried: list[tuple[str, str]] | None = None,
    next_url: str = "",
    decision: str | None = None,
    status: int = 200,
) -> HttpResponse:
    context = {
        **admin.site.each_context(request),
        "title": "Confirm it’s you",
        "form": form,
        "approval": approval,
        "decision": decision,
        "action": action,
        "carried": carried or [],
        "next": next_url,
        "minutes": f"{settings.STEP_UP_MINUTES:g}",
        "has_device": has_device(request.user),
        "has_passkey": passkeys.has_passkey(request.user),
        "back": reverse("admin:approvals_approvalrequest_change", args=[approval.pk]) if approval else "",
    }
    return TemplateResponse(request, "admin/approvals/step_up.html", context, status=status)


def step_up_view(request: HttpRequest) -> HttpResponse:
    """/admin/step-up/: step up before deciding, then back to `next` (an address on this site)."""
    next_url = request.POST.get("next") or request.GET.get("next") or ""
    if not url_has_allowed_host_and_scheme(next_url, {request.get_host()}, require_https=request.is_secure()):
        next_url = reverse("admin:approvals_approvalrequest_changelist")
    form = StepUpForm.posted(request) if request.method == "POST" else StepUpForm()
    if request.method == "POST" and form.is_valid():
        try:
            method = verify(request.user, password=form.cleaned_data["password"], code=form.cleaned_data["code"])
        except StepUpProofInvalid as wrong:
            form.add_error(None, wrong.said())
            return _page(request, form, action=reverse("staff-step-up"), next_url=next_url, status=wrong.status)
        request.session[SESSION_KEY] = {"user": request.user.pk, "at": time.time()}
        audit.record(audit.STEPPED_UP, approval=None, actor=request.user, via=DecidedVia.ADMIN, method=method)
        messages.success(request, f"Confirmed: you may decide approvals that require step-up for the next "
                                  f"{settings.STEP_UP_MINUTES:g} minutes.")  # fmt: skip
        return HttpResponseRedirect(next_url)
    # 403 when no proof was given, as for a wrong one: the page never reads as a step-up taken.
    status = 403 if form.is_bound else 200
    return _page(request, form, action=reverse("staff-step-up"), next_url=next_url, status=status)


def verify(user: Any, *, password: str, code: str) -> str:
    """A step-up outside a decision (the step-up page): how `user` proved themselves, or
    StepUpProofInvalid."""
    if password:
        refusal = password_refusal(user, password)
        if refusal:
            raise StepUpProofInvalid(refusal, required="step-up")
        return PASSWORD
    refusal = code_refusal(user, code)
    if refusal:
        raise StepUpProofInvalid(refusal, required="step-up")
    return TOTP


# --- the password, throttled as TOTP codes are -----------------------------------------------------


def password_refusal(user: Any, password: str) -> str:
    """Why `password` does not step `user` up ("" when it does). After n wrong passwords in a row,
    none is even checked for OTP_TOTP_THROTTLE_FACTOR * 2^(n-1) seconds: django-otp's back-off for
    a TOTP device's codes. The count is written in the caller's transaction, which the decision
    service commits before it answers the refusal."""
    with transaction.atomic():
        # Locked, so two guesses at once take turns and both count.
        throttle, _ = PasswordThrottle.objects.select_for_update().get_or_create(user=user)
        factor = getattr(settings, "OTP_TOTP_THROTTLE_FACTOR", 1)
        if throttle.failure_count and throttle.last_failure_at is not None and factor > 0:
            until = throttle.last_failure_at + timedelta(seconds=factor * 2 ** (throttle.failure_count - 1))
            wait = (until - timezone.now()).total_seconds()
            if wait > 0:
                seconds = math.ceil(wait)
                return f"Too many wrong passwords: wait {seconds} second{'s' * (seconds != 1)}, then try again."
        if user.check_password(password):
            if throttle.failure_count:
                throttle.failure_count, throttle.last_failure_at = 0, None
                throttle.save(update_fields=["failure_count", "last_failure_at"])
            return ""
        throttle.failure_count += 1
        throttle.last_failure_at = timezone.now()
        throttle.save(update_fields=["failure_count", "last_failure_at"])
    return "That is not your password."


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


def from_header(request: Any) -> StepUpProof | None:
    """The REST API's proof: the X-OTP-Code header of a staff token's request (checked by the service)."""
    code = request.headers.get(OTP_HEADER, "").strip()
    return StepUpProof(request.user.pk, code=code) if code and request.user is not None else None
