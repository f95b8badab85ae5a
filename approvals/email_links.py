"""The Approve and Reject links of an approval's e-mail: signed (django.core.signing, with a salt of
their own), expiring (APPROVAL_EMAIL_LINK_MAX_AGE) and single-use (each carries a nonce, spent in
the decision's own transaction: SpentKey).

A link authenticates nobody. It opens a confirmation page behind the admin's login
(email_confirm.py), with the decision pre-selected; only that page's POST, CSRF-protected and by a
member of staff who may decide, decides. A GET never does: mail scanners and link previews open
every link they see.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core import signing
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from .models import SpentKey

SALT = "approvals.email_links"
APPROVE, REJECT = "approve", "reject"


class LinkRefused(Exception):
    """A link that is not ours, has expired, or was used."""


@dataclass(frozen=True)
class Link:
    approval_id: str
    decision: str
    nonce: str

    @property
    def approves(self) -> bool:
        return self.decision == APPROVE


def link(approval: Any, decision: str) -> str:
    """A fresh link to confirm `decision` (APPROVE or REJECT) on the approval: absolute when SITE_URL is set."""
    token = signing.dumps({"a": str(approval.pk), "d": decision, "n": secrets.token_urlsafe(16)}, salt=SALT)
    return settings.SITE_URL + reverse("approval-email-decision", args=[token])


def read(token: str) -> Link:
    """The link a token stands for, while it may still be used; LinkRefused says why not."""
    try:
        data = signing.loads(token, salt=SALT, max_age=settings.APPROVAL_EMAIL_LINK_MAX_AGE)
    except signing.SignatureExpired:
        raise LinkRefused(
            "This link has expired: decide on the approval's page in the admin, or from a newer e-mail."
        ) from None
    except signing.BadSignature:
        raise LinkRefused("This link is not valid: it was not made here, or it was changed.") from None
    if not isinstance(data, dict) or data.get("d") not in (APPROVE, REJECT):
        raise LinkRefused("This link is not valid: it was not made here, or it was changed.")
    found = Link(approval_id=str(data.get("a")), decision=data["d"], nonce=str(data.get("n")))
    if SpentKey.objects.filter(kind=SpentKey.Kind.EMAIL, key=found.nonce).exists():
        raise LinkRefused(USED)
    return found


USED = "This link was used already: each link decides once. The approval's page in the admin shows its outcome."


def spend(found: Link) -> None:
    """Mark the link used, within the caller's transaction (the decision's): a decision that is
    refused leaves it unused. Of two uses at once, the second waits on the unique key and is refused."""
    try:
        with transaction.atomic():
            SpentKey.objects.create(kind=SpentKey.Kind.EMAIL, key=found.nonce)
    except IntegrityError:
        raise LinkRefused(USED) from None
    # A link older than its lifetime is refused as expired: its nonce need not be kept.
    SpentKey.objects.filter(
        kind=SpentKey.Kind.EMAIL, spent_at__lt=timezone.now() - settings.APPROVAL_EMAIL_LINK_MAX_AGE
    ).delete()
