"""An answer page's link: a capability to answer one round of one call, and nothing else.

    /answer/<round id>.<HMAC(key derived from SECRET_KEY, "answer-page" | round id | call id)>/

The HMAC makes the link unguessable and binds it to its round and its call; nothing is stored for
it, so the round's row is the whole record, and the link dies with the round: it opens the form only
while the round is ASKING and its call has not expired, and once the round is answered it shows the
person who answered what happens next (views.py), and nobody else anything. Neither the questions
nor the answers are ever in it (docs/security.md, "Answer pages").
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import constant_time_compare, salted_hmac

from mcp_gateway.auth import user_id_of
from mcp_gateway.models import Round, ToolCall

# The HMAC's own key, derived from SECRET_KEY: a requestState's or a task id's never verifies here.
SALT = "hitl-mcp.answer-page"
PURPOSE = "answer-page"


def _signature(round_id: uuid.UUID | str, call_id: uuid.UUID | str) -> str:
    mac = salted_hmac(SALT, f"{PURPOSE}|{round_id}|{call_id}", algorithm="sha256")
    return mac.hexdigest()


def token_for(round_: Round) -> str:
    return f"{round_.id.hex}.{_signature(round_.id.hex, round_.call_id)}"


def path_for(round_: Round) -> str:
    return reverse("answer_page", args=[token_for(round_)])


def url_for(round_: Round) -> str:
    """The round's answer page: absolute from SITE_URL where it is set, else the path alone (a
    worker has no request to take the host from)."""
    return f"{settings.SITE_URL}{path_for(round_)}"


@dataclass(frozen=True)
class Verified:
    """A link that names a round of a call and was minted for it: the round, with its call."""

    round: Round

    @property
    def open(self) -> bool:
        """Whether the link still answers: its round asks, its call has not expired, and the caller
        is not an account that was deactivated since (whose tokens no longer authenticate either)."""
        call = self.round.call
        return self.round.state == Round.State.ASKING and call.expires_at > timezone.now() and _caller_active(call)


def _caller_active(call: ToolCall) -> bool:
    user_id = user_id_of(call.caller)
    return user_id is None or not get_user_model().objects.filter(pk=user_id, is_active=False).exists()


def verified(token: str) -> Verified | None:
    """The round a link names, when the link was minted for it; None for anything else (unknown,
    altered, of a removed call), all alike."""
    round_hex, dot, signature = token.partition(".")
    if not dot or len(token) > 200:
        return None
    try:
        round_id = uuid.UUID(hex=round_hex)
    except ValueError:
        return None
    if round_hex != round_id.hex:
        return None  # one round, one spelling of its link
    round_ = Round.objects.select_related("call").filter(pk=round_id).first()
    if round_ is None or not constant_time_compare(signature, _signature(round_id.hex, round_.call_id)):
        return None
    return Verified(round_)
