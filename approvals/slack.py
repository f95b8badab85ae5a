"""Decide from Slack: the endpoint Slack posts a press of the webhook message's Approve or Reject
button to (the Slack app's Interactivity Request URL, /slack/interactions).

A request is taken only when Slack signed it: the `v0` HMAC-SHA256, with the app's signing secret,
of "v0:<X-Slack-Request-Timestamp>:<raw body>", compared in constant time with X-Slack-Signature;
its timestamp within five minutes of now; and its signature not seen before (a captured request
replayed within the window is refused: SpentKey). Then the Slack user must be linked to a member of
staff (StaffIdentity) who may decide approvals, and the decision is approval_decide's, with every
rule the admin's decisions keep (groups, M of N, self-approval, the changed policy, step-up, one
decision); a refusal is answered with its text (refusals.py), as every door answers it.

Slack waits three seconds for the answer and, for Block Kit buttons, ignores what it says: the
message is updated (or the refusal shown to the presser alone) through the payload's response_url,
by a task enqueued once the decision has committed. Refusals of the request itself (no signature,
a stale or replayed one) are answered with an HTTP error, which Slack shows nobody.

A response_url is posted to only when it is on Slack's own origin (SLACK_RESPONSE_ORIGINS,
https://hooks.slack.com): the signature proves only that someone holds the signing secret, and a
leaked secret must not turn this service into a client of any address its network reaches.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
import uuid
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from graph_runtime import work

from . import deciders, decisions, notifications, refusals, slack_messages
from .models import DECIDE_PERMISSION, ApprovalRequest, DecidedVia, SpentKey, StaffIdentity
from .refusals import Refusal

logger = logging.getLogger(__name__)

# Slack's own rule for its signed requests: older (or later) than this, a request is refused.
WINDOW = timedelta(minutes=5)
TIMESTAMP_HEADER = "X-Slack-Request-Timestamp"
SIGNATURE_HEADER = "X-Slack-Signature"
# The Celery task that posts to a payload's response_url (tasks.py), enqueued by name.
RESPOND = "approvals.tasks.slack_respond"


class Refused(Exception):
    """A request that is not Slack's, or not Slack's first time: answered with an HTTP error."""

    def __init__(self, message: str, status: int = 401):
        super().__init__(message)
        self.status = status


@csrf_exempt  # Slack cannot send Django's CSRF token; its signature is the proof instead.
@require_POST
def interactions(request: HttpRequest) -> HttpResponse:
    try:
        payload = verified_payload(request)
    except Refused as refused:
        logger.warning("Slack interaction refused: %s", refused)
        return HttpResponse(str(refused), status=refused.status, content_type="text/plain; charset=utf-8")
    message = slack_decide(payload)
    url = payload.get("response_url")
    if isinstance(url, str) and not is_slacks(url):
        logger.warning("Slack interaction's response_url is not on Slack's origin: not posted to (%.200s)", url)
    elif isinstance(url, str):
        # Once the decision has committed, and never one that a rollback undid.
        transaction.on_commit(lambda: work.enqueue(RESPOND, url, json.dumps(message, ensure_ascii=False)), robust=True)
    return HttpResponse(status=200)


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """Slack's v0 signature of a request: what X-Slack-Signature must be."""
    mac = hmac.new(secret.encode(), b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256)
    return f"v0={mac.hexdigest()}"


def verified_payload(request: HttpRequest) -> dict[str, Any]:
    """The interaction payload of a request Slack signed, within the window, for the first time."""
    secret = settings.SLACK_SIGNING_SECRET
    if not secret:
        raise Refused("Slack interactions are not set up here: SLACK_SIGNING_SECRET is empty.", status=403)
    timestamp = request.headers.get(TIMESTAMP_HEADER, "")
    given = request.headers.get(SIGNATURE_HEADER, "")
    if not (timestamp.isascii() and timestamp.isdigit()) or not given:
        raise Refused(f"Not signed by Slack: {TIMESTAMP_HEADER} and {SIGNATURE_HEADER} are required.")
    if abs(time.time() - int(timestamp)) > WINDOW.total_seconds():
        raise Refused("The request's timestamp is more than five minutes from now: refused as stale.")
    # Constant time, so the response time tells nothing about how much of the signature matched.
    if not hmac.compare_digest(given.encode(), signature(secret, timestamp, request.body).encode()):
        raise Refused("The request's signature does not match Slack's signing secret.")
    _spend(given)
    try:
        payload = json.loads(request.POST.get("payload", ""))
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        raise Refused("The request carries no interaction payload (a `payload` form field of JSON).", status=400)
    return payload


def _spend(signed: str) -> None:
    """Record the signature as seen, or refuse it as a replay. Kept for twice the window: a
    timestamp up to five minutes ahead is accepted too."""
    now = timezone.now()
    try:
        with transaction.atomic():
            SpentKey.objects.create(kind=SpentKey.Kind.SLACK, key=signed, spent_at=now)
    except IntegrityError:
        raise Refused("This interaction was received already: a replayed request is refused.", status=409) from None
    SpentKey.objects.filter(kind=SpentKey.Kind.SLACK, spent_at__lt=now - 2 * WINDOW).delete()


def slack_decide(payload: dict[str, Any]) -> dict[str, Any]:
    """Take the decision a button press asks for: the message Slack is to show for it."""
    action = _action(payload)
    if action is None:
        return slack_messages.refusal("Nothing was decided: this is not an Approve or Reject button of ours.")
    action_id, approval_id = action
    slack_user = payload.get("user")
    slack_user = slack_user if isinstance(slack_user, dict) else {}
    slack_id = str(slack_user.get("id") or "")
    identity = StaffIdentity.objects.select_related("user").filter(slack_user_id=slack_id).first() if slack_id else None
    if identity is None:
        return slack_messages.refusal(
            f"Nothing was decided: your Slack account ({slack_id or 'unknown'}) is not linked to a member of "
            "staff. An administrator links it in the admin, under Staff identities."
        )
    user = identity.user
    if not deciders.may_decide(user):
        return slack_messages.refusal(
            f"Nothing was decided: {user.get_username()}, whom your Slack account is linked to, may not decide "
            f"approvals (an active staff account with the permission {DECIDE_PERMISSION} may)."
        )
    approval = ApprovalRequest.objects.filter(pk=approval_id).first()
    if approval is None:
        return slack_messages.refusal("Nothing was decided: this approval does not exist (any more).")
    link = notifications.decision_page(approval)
    title = notifications.headline(approval)
    try:
        # No step-up proof: Slack cannot ask for a password or a code, so a policy that requires
        # step-up is refused, and the answer sends the presser to the decision page.
        approval = decisions.approval_decide(
            approval=approval, approved=action_id == slack_messages.APPROVE, note=None, via=DecidedVia.SLACK, user=user
        )
    except Refusal as refused:
        return slack_messages.refusal(refusals.said_with(refused, decision_page=link))
    if approval.progress:
        return slack_messages.signed_off(approval, headline=title, link=link, who=user.get_username())
    return slack_messages.decided(approval, headline=title, link=link)


def _action(payload: dict[str, Any]) -> tuple[str, str] | None:
    """(action_id, approval id) of the pressed button, when it is one of ours."""
    if payload.get("type") != "block_actions":
        return None
    actions = payload.get("actions")
    if not isinstance(actions, list) or not actions or not isinstance(actions[0], dict):
        return None
    action_id, value = actions[0].get("action_id"), actions[0].get("value")
    if action_id not in (slack_messages.APPROVE, slack_messages.REJECT) or not isinstance(value, str):
        return None
    try:
        return action_id, str(uuid.UUID(value))
    except ValueError:
        return None  # not an approval's id


def is_slacks(url: str) -> bool:
    """Whether `url` is on one of SLACK_RESPONSE_ORIGINS (scheme, host and port exactly; no user
    name or password, which would make "https://hooks.slack.com@elsewhere" look like Slack's)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    if parts.username is not None or parts.password is not None or not parts.hostname:
        return False
    origin = f"{parts.scheme.lower()}://{parts.hostname}{f':{port}' if port is not None else ''}"
    return origin in {allowed.rstrip("/").lower() for allowed in settings.SLACK_RESPONSE_ORIGINS}


def respond(url: str, body: str) -> None:
    """POST a message to a press's response_url. Raises WebhookRefused, for the task to retry."""
    if not is_slacks(url):  # a task enqueued before the origin was narrowed, say: never posted
        logger.warning("Not posting to a response_url off Slack's origin (%.200s)", url)
        return
    notifications.post_json(url, body.encode())
