"""Sessions of the handshake revisions (the 2025 transports' `Mcp-Session-Id`), with
MCP_OLDER_CLIENTS=answer: what lets an older client be asked a tool's questions on the call's
stream and answer them with a POST that any web process takes (call_streams.py).

    initialize ──► a session: its id to the client once, a keyed hash of it in the table, bound to
                   the caller, with the negotiated revision and the declared capabilities
    a request with the id ──► its session, kept alive; unknown, expired, ended or another
                   caller's ──► HTTP 404 (the transport: the client starts a new session)
    DELETE with the id ──► the session ends (its streams with it; its calls go on)

A request without the id is served as it is without sessions. 2026-07-28 has no sessions: its
requests never carry one here.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from django.utils.crypto import salted_hmac

from mcp_gateway import limits
from mcp_gateway.auth import Caller
from mcp_gateway.models import Session
from mcp_gateway.protocol import INVALID_REQUEST, Message, RpcError, declared_client

HEADER = "Mcp-Session-Id"
# Elicitation came with 2025-06-18, its URL mode with 2025-11-25.
ELICITING_REVISIONS = frozenset({"2025-06-18", "2025-11-25"})
URL_REVISIONS = frozenset({"2025-11-25"})


def enabled() -> bool:
    return settings.MCP_OLDER_CLIENTS == "answer"


def _idle() -> timedelta:
    return timedelta(minutes=settings.MCP_SESSION_IDLE_MINUTES)


def key_hash(raw: str) -> str:
    # Keyed, so the table alone gives no usable id.
    return salted_hmac("mcp_gateway.sessions", raw, algorithm="sha256").hexdigest()


def declared_capabilities(version: str, capabilities: Any) -> dict[str, Any]:
    """What the session's client can be asked, as its revision can carry it: elicitation from
    2025-06-18 (form only), its URL mode from 2025-11-25; and the extensions it declared (MCP Apps
    is read from them when it lists tools: its requests carry no capabilities of their own)."""
    if not isinstance(capabilities, dict):
        return {}
    extensions = capabilities.get("extensions")
    # Kept only as PostgreSQL can store it (no U+0000, no lone surrogate): else as if undeclared.
    storable = isinstance(extensions, dict) and extensions and limits.resume_value_error(extensions) is None
    declared: dict[str, Any] = {"extensions": extensions} if storable else {}
    elicitation = capabilities.get("elicitation")
    if not isinstance(elicitation, dict) or version not in ELICITING_REVISIONS:
        return declared
    modes: dict[str, dict[str, Any]] = {m: {} for m in ("form", "url") if isinstance(elicitation.get(m), dict)}
    if version not in URL_REVISIONS:
        modes.pop("url", None)
    # A client that declares elicitation with no modes supports form (the revision's rule).
    return {**declared, "elicitation": modes or {"form": {}}}


def open_session(message: Message, caller: Caller, version: str) -> str:
    """A new session for an initialize; its id, which only the client holds from now on."""
    now = timezone.now()
    live = Session.objects.filter(caller=caller.identity, expires_at__gt=now).count()
    if live >= (most := settings.MCP_SESSIONS_PER_CALLER):
        raise RpcError(
            INVALID_REQUEST,
            f"Too many sessions: this caller holds {most}. End one (DELETE /mcp/) or let one expire.",
            {"limit": most},
            http_status=429,
        )
    raw = secrets.token_urlsafe(32)
    Session.open(
        key_hash=key_hash(raw),
        caller=caller.identity,
        protocol_version=version,
        capabilities=declared_capabilities(version, message.params.get("capabilities")),
        client_info=declared_client(message.params.get("clientInfo")),
        expires_at=now + _idle(),
    )
    return raw


def session_of(raw: str, caller: Caller) -> Session | None:
    """The caller's live session with this id, kept alive for another idle lifetime; None for one
    that is unknown, expired, ended or another caller's (all alike: HTTP 404)."""
    if not raw or len(raw) > 200:
        return None
    now = timezone.now()
    session = Session.objects.filter(key_hash=key_hash(raw), caller=caller.identity, expires_at__gt=now).first()
    if session is not None:
        keep_alive(session)
    return session


def alive(session: Session) -> bool:
    return session.expires_at > timezone.now()


def keep_alive(session: Session) -> None:
    """Another idle lifetime from now. Written at most once a minute: a busy session does not
    write its row on every request."""
    now = timezone.now()
    until = now + _idle()
    if session.expires_at < until - timedelta(minutes=1):
        session.keep_until(until, now=now)


def end(session: Session) -> None:
    session.end()


def asks_on_stream(session: Session | None) -> bool:
    """Whether a tool's questions are asked on the call's stream in this session."""
    return session is not None and enabled() and "elicitation" in session.capabilities


def remove_expired() -> int:
    return Session.remove_expired(timezone.now())


def not_found() -> RpcError:
    # The transport: a session id the server does not know (any more) is 404, and the client
    # starts a new session with initialize.
    return RpcError(INVALID_REQUEST, "Session not found: initialize a new session", http_status=404)
