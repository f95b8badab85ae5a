"""Each member of staff's own API tokens for the REST API (api/), on one admin page: create one
with a name, see it once with a warning to copy it now, list and revoke them.

A token acts as its owner, so anyone who may use the admin may make their own, and only their
own: the page never takes a user id. Knox stores only the token's digest, which is why the token
is shown on the page the creation leads to, once, and never again.
"""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.http import HttpRequest, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from knox.models import AuthToken

from .models import StaffTokenName

NEW_TOKEN = "approvals.new_api_token"
LIFETIMES = [("", "never (until revoked)"), ("30", "in 30 days"), ("90", "in 90 days"), ("365", "in a year")]


class NewTokenForm(forms.Form):
    name = forms.CharField(
        max_length=100, help_text="What the token is for, so you know which to revoke: “nightly report script”."
    )
    expires = forms.ChoiceField(choices=LIFETIMES, required=False, initial="")


@transaction.atomic
def staff_token_create(*, user, name: str, days: int | None) -> tuple[AuthToken, str]:
    """A new API token of `user`'s, named: (the stored token, the token itself, shown once)."""
    token, raw = AuthToken.objects.create(user, expiry=timedelta(days=days) if days else None)
    StaffTokenName.objects.create(token=token, name=name)
    return token, raw


def tokens_view(request: HttpRequest):
    """Wrapped in admin_view (urls.py): an active member of staff, logged in, CSRF-checked, never cached."""
    here = reverse("staff-api-tokens")
    form = NewTokenForm()
    created = None
    if request.method == "POST" and "revoke" in request.POST:
        # Only one's own: the digest of someone else's token deletes nothing. (PostgreSQL cannot
        # compare text with NUL in it, and no digest has one.)
        digest = request.POST["revoke"]
        revoked = "\x00" not in digest and AuthToken.objects.filter(user=request.user, digest=digest).first()
        if not revoked:
            messages.error(request, "No such token of yours: it was revoked already.")
        else:
            name = token_name(revoked)
            revoked.delete()
            messages.success(request, f"Revoked the token “{name}”: it no longer works.")
        return HttpResponseRedirect(here)
    if request.method == "POST":
        form = NewTokenForm(request.POST)
        if form.is_valid():
            expires = form.cleaned_data["expires"]
            token, raw = staff_token_create(
                user=request.user, name=form.cleaned_data["name"], days=int(expires) if expires else None
            )
            # Post/redirect/get, so reloading the page cannot make a second token. The token waits in
            # the server-side session for the one GET that shows it, and leaves it there.
            request.session[NEW_TOKEN] = {"digest": token.digest, "token": raw}
            return HttpResponseRedirect(here)
    else:
        created = _just_created(request)
    now = timezone.now()
    tokens = [
        {
            "digest": token.digest,
            "name": token_name(token),
            "start": token.token_key,
            "created": token.created,
            "expiry": token.expiry,
            "expired": token.expiry is not None and token.expiry < now,
        }
        for token in AuthToken.objects.filter(user=request.user).select_related("staff_name").order_by("-created")
    ]
    context = {
        **admin.site.each_context(request),
        "title": "Your API tokens",
        "form": form,
        "created": created,
        "tokens": tokens,
        "api_docs": reverse("api-docs"),
    }
    return TemplateResponse(request, "admin/approvals/api_tokens.html", context)


def _just_created(request: HttpRequest) -> dict | None:
    new = request.session.pop(NEW_TOKEN, None)
    token = new and AuthToken.objects.filter(user=request.user, digest=new["digest"]).first()
    if not token:
        return None
    return {"name": token_name(token), "token": new["token"], "expiry": token.expiry}


def token_name(token: AuthToken) -> str:
    try:
        return token.staff_name.name  # type: ignore[attr-defined]
    except StaffTokenName.DoesNotExist:
        return "(no name)"
