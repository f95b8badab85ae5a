"""Passkeys (WebAuthn) for step-up, each assertion bound to the one decision it confirms.

Staff register their passkeys on /admin/passkeys/ (several each, named; removing one is audited).
py_webauthn makes the options and verifies what the browser's authenticator returns; the
registration's challenge waits in the server-side session for the one answer that uses it.

A decision confirmed with a passkey goes:

    decision page ──POST decide/passkey/ (decision, edited arguments)──► nonce issued (PasskeyNonce)
        options = {challenge: challenge(nonce, approval, its digest, decision, edited digest), ...}
    navigator.credentials.get(options) ──► the assertion, posted with the decision to decide/
    decisions.approval_decide ── step_up.check ──► check(): the nonce spent (once, for this user and
        approval), the challenge DERIVED AGAIN from what is being decided, and py_webauthn's
        verify_authentication_response against the passkey's public key and sign count

So the assertion proves that this person's authenticator confirmed this decision (approve,
reject or request changes) of this approval, with these arguments: one replayed (its nonce was
spent), re-targeted (another decision, other arguments) or posted on another approval verifies
against another challenge, or names a nonce that was not issued for it, and is refused as any
step-up proof is (StepUpProofInvalid, 403). The assertion is kept as it came (PasskeyProof) and in
the audit chain's `stepped_up` event; `reverify` checks it again offline (manage.py verify_audit).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST
from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers import (
    base64url_to_bytes,
    bytes_to_base64url,
    parse_authentication_credential_json,
    parse_client_data_json,
)
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    AuthenticatorTransport,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from . import audit
from .models import ApprovalRequest, AuditEvent, PasskeyNonce, PasskeyProof, StaffPasskey
from .refusals import StepUpProofInvalid

# The three decisions a challenge may be derived for (forms.DecisionForm's).
DECISIONS = ("approve", "reject", "request_changes")
# How long an issued nonce may be answered: the browser's own timeout for the authenticator, and some.
NONCE_LIFETIME = timedelta(minutes=5)
TIMEOUT_MS = 120_000
REGISTRATION = "approvals_passkey_registration"
# What the challenge's hash says it is for, so it can be taken for nothing else this service signs.
PURPOSE = "hitl-mcp: a staff decision on an approval"
REQUIRED = "passkey"
# What py_webauthn raises on what does not verify: its own exceptions, and on some malformed
# structures (a COSE key without its algorithm, short data) a KeyError, an IndexError or a ValueError.
UNVERIFIABLE = (WebAuthnException, ValueError, TypeError, KeyError, IndexError)


@dataclass
class Assertion:
    """A passkey's assertion as a door received it: the nonce it was asked with, the
    PublicKeyCredential as JSON (WebAuthn's, base64url), and the relying party the door expects."""

    nonce: str
    credential: str
    rp_id: str
    origin: str


def challenge(*, nonce: str, approval_id: Any, action_digest: str, decision: str, edited_digest: str) -> bytes:
    """The challenge of a decision's passkey: SHA-256 over the canonical JSON (RFC 8785) of what
    is decided. Recomputed by the server from what was posted, never taken from the client."""
    from .digests import canonical_json

    bound = {
        "purpose": PURPOSE,
        "nonce": nonce,
        "approval": str(approval_id),
        "action_digest": action_digest,
        "decision": decision,
        "edited_digest": edited_digest,
    }
    return hashlib.sha256(canonical_json(bound)).digest()


def relying_party(request: HttpRequest) -> tuple[str, str]:
    """(RP id, origin): WEBAUTHN_RP_ID and WEBAUTHN_ORIGIN when set, else SITE_URL's host and
    origin, else the request's (its Host is one of ALLOWED_HOSTS)."""
    site = urlsplit(settings.SITE_URL) if settings.SITE_URL else None
    origin = settings.WEBAUTHN_ORIGIN or (
        f"{site.scheme}://{site.netloc}" if site and site.netloc else f"{request.scheme}://{request.get_host()}"
    )
    rp_id = settings.WEBAUTHN_RP_ID or urlsplit(origin).hostname or ""
    return rp_id, origin.rstrip("/")


def has_passkey(user: Any) -> bool:
    return user is not None and user.is_authenticated and StaffPasskey.objects.filter(user=user).exists()


# --- a decision's assertion --------------------------------------------------------------------


def issue(request: HttpRequest, approval: ApprovalRequest, *, decision: str, edited_digest: str) -> dict[str, Any]:
    """A nonce for `request.user`'s decision on `approval`, and the options for
    navigator.credentials.get whose challenge is derived from it and from the decision."""
    rp_id, _ = relying_party(request)
    nonce = secrets.token_urlsafe(32)
    # Past their lifetime, spent or not, a user's nonces refuse nothing a missing one would not.
    PasskeyNonce.objects.filter(user=_me(request), issued_at__lt=timezone.now() - NONCE_LIFETIME).delete()
    PasskeyNonce.objects.create(nonce=nonce, user=_me(request), approval=approval)
    options = generate_authentication_options(
        rp_id=rp_id,
        challenge=challenge(
            nonce=nonce,
            approval_id=approval.pk,
            action_digest=approval.digest,
            decision=decision,
            edited_digest=edited_digest,
        ),
        timeout=TIMEOUT_MS,
        allow_credentials=[_descriptor(passkey) for passkey in StaffPasskey.objects.filter(user=_me(request))],
        user_verification=UserVerificationRequirement.REQUIRED,
    )
    return {"nonce": nonce, "options": json.loads(options_to_json(options))}


def check(
    approval: ApprovalRequest, *, user: Any, assertion: Assertion, decision: str, edited_digest: str
) -> PasskeyProof:
    """The step-up rule for a passkey (step_up.check calls it under the approval's row lock):
    the nonce is spent first, whatever follows, so an assertion counts at most once; then the
    assertion must verify against the challenge of exactly this decision. Returns the proof kept."""
    wrong = "Your passkey did not confirm this decision"
    with transaction.atomic():
        # PostgreSQL cannot compare text with NUL in it, and no nonce has one.
        given = assertion.nonce[:64] if "\x00" not in assertion.nonce else ""
        nonce = PasskeyNonce.objects.select_for_update().filter(nonce=given).first() if given else None
        if nonce is None or nonce.user_id != user.pk or nonce.approval_id != approval.pk:
            raise StepUpProofInvalid(
                f"{wrong}: its confirmation was not asked for by you on this approval. Confirm it again with your "
                "passkey.",
                required=REQUIRED,
            )
        if nonce.spent_at is not None:
            raise StepUpProofInvalid(
                f"{wrong}: that confirmation was used already, and each is taken once. Confirm again with your "
                "passkey.",
                required=REQUIRED,
            )
        nonce.spent_at = timezone.now()
        nonce.save(update_fields=["spent_at"])
    if timezone.now() - nonce.issued_at > NONCE_LIFETIME:
        raise StepUpProofInvalid(f"{wrong}: it took too long. Confirm again with your passkey.", required=REQUIRED)
    try:
        credential = parse_authentication_credential_json(assertion.credential)
    except UNVERIFIABLE:
        raise StepUpProofInvalid(f"{wrong}: what came is not a passkey's answer.", required=REQUIRED) from None
    passkey = (
        StaffPasskey.objects.select_for_update()
        .filter(user=user, credential_id=bytes_to_base64url(credential.raw_id))
        .first()
    )
    if passkey is None:
        raise StepUpProofInvalid(f"{wrong}: it is not one of your registered passkeys.", required=REQUIRED)
    expected = challenge(
        nonce=nonce.nonce,
        approval_id=approval.pk,
        action_digest=approval.digest,
        decision=decision,
        edited_digest=edited_digest,
    )
    try:
        signed_for = parse_client_data_json(credential.response.client_data_json).challenge
    except UNVERIFIABLE:
        raise StepUpProofInvalid(f"{wrong}: what came is not a passkey's answer.", required=REQUIRED) from None
    if signed_for != expected:
        raise StepUpProofInvalid(
            f"{wrong}: it was given for another decision (another choice, other arguments, or another approval). "
            "Confirm this decision with your passkey.",
            required=REQUIRED,
        )
    try:
        verified = verify_authentication_response(
            credential=credential,
            expected_challenge=expected,
            expected_rp_id=assertion.rp_id,
            expected_origin=assertion.origin,
            credential_public_key=bytes(passkey.public_key),
            credential_current_sign_count=passkey.sign_count,
            require_user_verification=True,
        )
    except UNVERIFIABLE as refused:
        raise StepUpProofInvalid(f"{wrong}: {refused}", required=REQUIRED) from None
    passkey.sign_count, passkey.last_used_at = verified.new_sign_count, timezone.now()
    passkey.save(update_fields=["sign_count", "last_used_at"])
    return PasskeyProof.objects.create(
        approval=approval,
        user=user,
        username=user.get_username(),
        passkey=passkey,
        credential_id=passkey.credential_id,
        credential_name=passkey.name,
        public_key=bytes(passkey.public_key),
        authenticator_data=credential.response.authenticator_data,
        client_data_json=credential.response.client_data_json,
        signature=credential.response.signature,
        nonce=nonce.nonce,
        decision=decision,
        action_digest=approval.digest,
        edited_digest=edited_digest,
        rp_id=assertion.rp_id,
        origin=assertion.origin,
        sign_count=verified.new_sign_count,
    )


def recorded(proof: PasskeyProof) -> dict[str, Any]:
    """The proof as the audit chain's `stepped_up` event holds it: enough to verify it again."""
    return {
        "proof": proof.pk,
        "credential_id": proof.credential_id,
        "credential_name": proof.credential_name,
        "public_key": bytes_to_base64url(bytes(proof.public_key)),
        "authenticator_data": bytes_to_base64url(bytes(proof.authenticator_data)),
        "client_data_json": bytes_to_base64url(bytes(proof.client_data_json)),
        "signature": bytes_to_base64url(bytes(proof.signature)),
        "nonce": proof.nonce,
        "decision": proof.decision,
        "action_digest": proof.action_digest,
        "edited_digest": proof.edited_digest,
        "challenge": bytes_to_base64url(_challenge_of(proof)),
        "rp_id": proof.rp_id,
        "origin": proof.origin,
    }


def _challenge_of(proof: PasskeyProof) -> bytes:
    """The challenge recomputed from the approval as it is now: its digest changed since is a
    challenge the stored assertion did not sign."""
    approval = ApprovalRequest.objects.filter(pk=proof.approval_id).only("pk", "digest").first()
    return challenge(
        nonce=proof.nonce,
        approval_id=proof.approval_id,
        action_digest=approval.digest if approval is not None else "",
        decision=proof.decision,
        edited_digest=proof.edited_digest,
    )


# --- verifying again, offline ------------------------------------------------------------------


def reverify(proof: PasskeyProof, event: AuditEvent | None = None) -> str:
    """Why the stored `proof` no longer verifies ("" when it does): its signature over its
    authenticator data and client data, with the public key kept, for the challenge recomputed
    from the approval's digest now; and, when its audit event is given, that the proof is still
    what the chain recorded."""
    failures = []
    credential = {
        "id": proof.credential_id,
        "rawId": proof.credential_id,
        "type": "public-key",
        "response": {
            "authenticatorData": bytes_to_base64url(bytes(proof.authenticator_data)),
            "clientDataJSON": bytes_to_base64url(bytes(proof.client_data_json)),
            "signature": bytes_to_base64url(bytes(proof.signature)),
        },
    }
    try:
        verify_authentication_response(
            credential=json.dumps(credential),
            expected_challenge=_challenge_of(proof),
            expected_rp_id=proof.rp_id,
            expected_origin=proof.origin,
            credential_public_key=bytes(proof.public_key),
            # Offline, the counter is not checked again: later uses moved it on.
            credential_current_sign_count=0,
            require_user_verification=True,
        )
    except UNVERIFIABLE as failed:
        failures.append(f"{str(failed).rstrip('.')}.")
    if event is not None:
        kept, now = event.data.get("passkey") or {}, recorded(proof)
        differs = [key for key in KEPT if kept.get(key) != now[key]]
        if differs:
            failures.append(f"It is not what the audit event #{event.seq} recorded: its {', '.join(differs)} differ.")
    return " ".join(failures)


# What a proof's audit event must still agree with it on.
KEPT = ("credential_id", "public_key", "authenticator_data", "client_data_json", "signature", "nonce", "decision",
        "edited_digest", "challenge")  # fmt: skip


def reverify_all() -> tuple[int, list[str]]:
    """Every stored passkey proof verified again: how many, and what fails, one line each."""
    events = {
        event.data.get("passkey", {}).get("proof"): event
        for event in AuditEvent.objects.filter(kind=audit.STEPPED_UP, data__method=REQUIRED)
    }
    failures, count = [], 0
    for proof in PasskeyProof.objects.order_by("pk").iterator():
        count += 1
        event = events.get(proof.pk)
        failed = "its audit event is missing." if event is None else reverify(proof, event)
        if failed:
            failures.append(
                f"The passkey confirmation #{proof.pk} of {proof.username} ({proof.decision} on approval "
                f"{proof.approval_id}) fails: {failed}"
            )
    return count, failures


# --- registering, listing and removing one's own passkeys (/admin/passkeys/) ---------------------


class NewPasskeyForm(forms.Form):
    name = forms.CharField(
        max_length=100, help_text="Which authenticator it is, so you know which to remove: “laptop”."
    )
    # The PublicKeyCredential navigator.credentials.create returned, as JSON (the page's script).
    credential = forms.CharField(widget=forms.HiddenInput, max_length=20_000)


def passkeys_view(request: HttpRequest) -> HttpResponse:
    """Wrapped in admin_view (urls.py): the page lists only the user's own passkeys, and adds or
    removes only theirs."""
    here = reverse("staff-passkeys")
    form = NewPasskeyForm()
    if request.method == "POST" and "remove" in request.POST:
        removed = StaffPasskey.objects.filter(user=_me(request), pk=_int(request.POST["remove"])).first()
        if removed is None:
            messages.error(request, "No such passkey of yours: it was removed already.")
        else:
            with transaction.atomic():
                audit.record(
                    audit.PASSKEY_REMOVED, actor=request.user, credential_id=removed.credential_id, name=removed.name
                )
                removed.delete()
            messages.success(request, f"Removed the passkey “{removed.name}”: it no longer confirms decisions.")
        return HttpResponseRedirect(here)
    status = 200
    if request.method == "POST":
        form = NewPasskeyForm(request.POST)
        if form.is_valid():
            refusal = register(request, name=form.cleaned_data["name"], credential=form.cleaned_data["credential"])
            if not refusal:
                messages.success(request, f"Added the passkey “{form.cleaned_data['name']}”.")
                return HttpResponseRedirect(here)
            form.add_error(None, refusal)
        status = 400
    context = {
        **admin.site.each_context(request),
        "title": "Your passkeys",
        "form": form,
        "passkeys": StaffPasskey.objects.filter(user=_me(request)),
        "options_url": reverse("staff-passkey-options"),
    }
    return TemplateResponse(request, "admin/approvals/passkeys.html", context, status=status)


@require_POST
def registration_options_view(request: HttpRequest) -> JsonResponse:
    """The options for navigator.credentials.create; their challenge waits in the session for
    the one registration that answers it."""
    rp_id, _ = relying_party(request)
    options = generate_registration_options(
        rp_id=rp_id,
        rp_name="hitl-mcp staff",
        user_id=f"hitl-mcp-staff-{request.user.pk}".encode(),
        user_name=request.user.get_username(),
        timeout=TIMEOUT_MS,
        exclude_credentials=[_descriptor(passkey) for passkey in StaffPasskey.objects.filter(user=_me(request))],
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.PREFERRED, user_verification=UserVerificationRequirement.REQUIRED
        ),
    )
    request.session[REGISTRATION] = {"user": request.user.pk, "challenge": bytes_to_base64url(options.challenge)}
    return JsonResponse(json.loads(options_to_json(options)))


def register(request: HttpRequest, *, name: str, credential: str) -> str:
    """Verify a new passkey's registration against the challenge this session was given (taken,
    so it is answered once) and keep it: "" when it was, else why not."""
    issued = request.session.pop(REGISTRATION, None)
    if not isinstance(issued, dict) or issued.get("user") != request.user.pk:
        return "No passkey was added: its registration was not asked for, or was used already. Try again."
    rp_id, origin = relying_party(request)
    try:
        verified = verify_registration_response(
            credential=credential,
            expected_challenge=base64url_to_bytes(issued["challenge"]),
            expected_rp_id=rp_id,
            expected_origin=origin,
            require_user_verification=True,
        )
        transports = [str(getattr(t, "value", t)) for t in (json.loads(credential)["response"].get("transports") or [])]
    except (*UNVERIFIABLE, AttributeError) as refused:
        return f"No passkey was added: {refused}"
    credential_id = bytes_to_base64url(verified.credential_id)
    if StaffPasskey.objects.filter(credential_id=credential_id).exists():
        return "No passkey was added: this one is registered already."
    with transaction.atomic():
        StaffPasskey.objects.create(
            user=_me(request),
            name=name,
            credential_id=credential_id,
            public_key=verified.credential_public_key,
            sign_count=verified.sign_count,
            transports=[t for t in transports if t in {value.value for value in AuthenticatorTransport}],
        )
        audit.record(audit.PASSKEY_ADDED, actor=request.user, credential_id=credential_id, name=name)
    return ""


def _descriptor(passkey: StaffPasskey) -> PublicKeyCredentialDescriptor:
    return PublicKeyCredentialDescriptor(
        id=base64url_to_bytes(passkey.credential_id),
        transports=[AuthenticatorTransport(t) for t in passkey.transports],
    )


def _int(text: str) -> int:
    return int(text) if text.isdigit() and len(text) < 19 else 0


def _me(request: HttpRequest) -> Any:
    """The member of staff logged in: admin_view lets no one else in."""
    return request.user
