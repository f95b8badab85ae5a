"""The tamper-evident audit: an append-only chain of what happened to each approval.

Each event's hash is SHA-256 over the previous event's hash and this event's canonical JSON
(RFC 8785: its seq, time, kind, approval, actor and data), so changing, inserting or deleting any
row breaks every link after it; the head row (AuditHead) holds the last seq and hash, so rows
deleted from the end are seen too. `python manage.py verify_audit` recomputes the chain and names
the first broken link.

An event is written by one call, in the transaction of the state change it records:

    audit.record(audit.DECIDED, approval=approval, actor=user, status="approved")

Appends lock the head row, so concurrent writers take turns and never fork the chain (on SQLite,
transactions take turns anyway). Record last in a transaction: the head is locked until it
commits, and nothing should wait on it while it waits for another lock.

The head row is in the same database as the events, so whoever can write SQL can delete the last
events and move the head back, and the shorter chain verifies. So each new head is also published
outside the database once it has committed: a log line (logger `approvals.audit.head`, its message
`audit head {"seq": …, "hash": …}`, kept by whatever keeps the logs) and the gauge
`hitl_audit_head_seq`. `verify_audit --expect-head <seq>:<hash>` (a head taken from there, or the
last line of an earlier export: `--expect-head-from <file>`) then fails when the chain no longer
reaches that head, naming it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.http import StreamingHttpResponse
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from .digests import canonical_json
from .models import AuditEvent, AuditHead

GENESIS = "0" * 64
# Not "approvals.audit": the heads are a record of their own, for a log pipeline to keep apart.
head_log = logging.getLogger("approvals.audit.head")

# The kinds of event. Adding one is a constant here and a record() call where it happens.
REQUESTED = "requested"  # a run paused for staff: the action and its digest
SIGNED_OFF = "signed_off"  # one approval of several (the two-person rule); the last one decides
EDITED = "edited"  # staff changed the arguments before approving: the new digest
DECIDED = "decided"  # approved or rejected, by whom (on whose behalf, for a delegate), through which door
CHANGES_REQUESTED = "changes_requested"  # sent back with what must change: the agent revises its call
STEPPED_UP = "stepped_up"  # staff proved who they are again (password, TOTP code, or a passkey's assertion) to decide
PASSKEY_ADDED = "passkey_added"  # a member of staff registered a passkey (its credential id and name)
PASSKEY_REMOVED = "passkey_removed"  # a member of staff removed one of their passkeys
ESCALATED = "escalated"  # still pending past APPROVAL_ESCALATE_AFTER: staff told again
WITHDRAWN = "withdrawn"  # the MCP client cancelled the task waiting for it
EXPIRED = "expired"  # nobody decided in time: declined
RESUMED = "resumed"  # the run went on with the decision, the approved digest checked
REFUSED = "refused"  # what would run differed from what was approved: it did not run
FINISHED = "finished"  # the resumed run's answer recorded


def record(kind: str, *, approval: Any = None, actor: Any = None, **data: Any) -> AuditEvent:
    """Append one event to the chain, in the caller's transaction. `actor`: a user, a name, or
    None (the service itself, or the shared admin token)."""
    with transaction.atomic():
        # The lock serialises appends: the next writer reads this head only after this commits.
        head, _ = AuditHead.objects.select_for_update().get_or_create(pk=1, defaults={"hash": GENESIS})
        event = AuditEvent(
            seq=head.seq + 1,
            at=timezone.now(),
            kind=kind,
            approval_id=getattr(approval, "pk", approval),
            actor=_name(actor),
            # Hashed as it is stored and read back: plain JSON (a choice's value, a UUID's text).
            data=json.loads(json.dumps(data, cls=DjangoJSONEncoder)),
            prev_hash=head.hash,
        )
        event.hash = link_hash(event)
        event.save(force_insert=True)
        head.seq, head.hash = event.seq, event.hash
        head.save(update_fields=["seq", "hash"])
    seq, hash_ = event.seq, event.hash
    # Only a head that committed is published: a rolled-back append never was the chain's end.
    transaction.on_commit(lambda: publish_head(seq, hash_), robust=True)
    return event


def publish_head(seq: int, hash_: str) -> None:
    """Tell the world outside the database the chain's new head: a log line and a gauge."""
    from . import metrics  # metrics imports the models, as audit does; kept out of import time

    head_log.info(
        "audit head %s", json.dumps({"seq": seq, "hash": hash_}), extra={"audit_head": {"seq": seq, "hash": hash_}}
    )
    metrics.AUDIT_HEAD_SEQ.set(seq)


def _name(actor: Any) -> str:
    if actor is None:
        return ""
    return actor if isinstance(actor, str) else actor.get_username()


def body(event: AuditEvent) -> dict[str, Any]:
    """The event as its hash covers it (and as it is exported, with its two hashes)."""
    return {
        "seq": event.seq,
        "at": event.at.astimezone(UTC).isoformat(),
        "kind": event.kind,
        "approval": str(event.approval_id) if event.approval_id else None,
        "actor": event.actor,
        "data": event.data,
    }


def link_hash(event: AuditEvent) -> str:
    return hashlib.sha256(event.prev_hash.encode() + b"\n" + canonical_json(body(event))).hexdigest()


# --- checking -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Broken:
    seq: int
    reason: str

    def __str__(self) -> str:
        return f"The audit chain breaks at event #{self.seq}: {self.reason}"


@dataclass(frozen=True)
class Head:
    """A head of the chain recorded outside the database: event #seq and its hash."""

    seq: int
    hash: str

    def __str__(self) -> str:
        return f"#{self.seq} ({self.hash[:16]}…)"


class BadHead(ValueError):
    """An expected head that is not `<seq>:<64 hex digits>`, or a file without one."""


HEAD = re.compile(r"([0-9]{1,18}):([0-9a-f]{64})")


def parse_head(text: str) -> Head:
    """`<seq>:<hash>`, as the published head's log line and an export's last line give them."""
    matched = HEAD.fullmatch(text.strip().lower())
    if matched is None or int(matched[1]) < 1:
        raise BadHead(f"{text[:80]!r} is not a head: give <seq>:<hash>, e.g. 42:{'ab' * 32}.")
    return Head(int(matched[1]), matched[2])


def head_of_export(lines: Any) -> Head:
    """The head an earlier export (JSON Lines, as the admin and the API give it) reached: its last event."""
    last = None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
            last = Head(int(event["seq"]), str(event["hash"]))
        except (ValueError, KeyError, TypeError):
            raise BadHead(f"line {number} of the export is not an audit event with a seq and a hash.") from None
    if last is None:
        raise BadHead("the export holds no event.")
    return parse_head(f"{last.seq}:{last.hash}")


def verify(expected: Head | None = None) -> tuple[int, Broken | None]:
    """Recompute the chain from its start: how many events hold, and the first broken link.

    The events and the head are read in one snapshot, so events appended meanwhile are neither
    half seen nor taken for a break: REPEATABLE READ on PostgreSQL; on SQLite, a transaction is
    one snapshot (and writers wait until the check ends).

    `expected`: a head recorded outside the database (published as it was appended, or an earlier
    export's last event). The chain must still hold that event, with that hash: a chain cut back
    below it, with its head row moved back to match, is otherwise a chain that holds."""
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if connection.vendor == "postgresql" and outermost:
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        return _verify(expected)


def _verify(expected: Head | None) -> tuple[int, Broken | None]:
    expected_prev, expected_seq, checked = GENESIS, 1, 0
    for event in AuditEvent.objects.order_by("seq").iterator(chunk_size=2000):
        if event.seq != expected_seq:
            return checked, Broken(expected_seq, f"it is missing (the next event is #{event.seq}).")
        if event.prev_hash != expected_prev:
            return checked, Broken(event.seq, "its previous hash is not the hash of the event before it.")
        if link_hash(event) != event.hash:
            return checked, Broken(event.seq, f"its content ({event.kind}) does not match its hash.")
        if expected is not None and event.seq == expected.seq and event.hash != expected.hash:
            return checked, Broken(
                event.seq, f"its hash is not that of the head recorded elsewhere, {expected}: the chain was rewritten."
            )
        expected_prev, expected_seq, checked = event.hash, expected_seq + 1, checked + 1
    head = AuditHead.objects.filter(pk=1).first()
    head_seq, head_hash = (head.seq, head.hash) if head is not None else (0, GENESIS)
    if (head_seq, head_hash) != (checked, expected_prev):
        return checked, Broken(checked + 1, f"the chain's head says {head_seq} events, ending with another hash.")
    if expected is not None and checked < expected.seq:
        return checked, Broken(
            checked + 1,
            f"the chain ends at event #{checked}, short of the head recorded elsewhere, {expected}: "
            "its tail was cut (and its head row moved back).",
        )
    return checked, None


# --- export ---------------------------------------------------------------------------------


class BadBound(ValueError):
    """A date filter that is neither a date (2026-12-01) nor a date and time in ISO 8601."""


def bound(text: str | None, *, end: bool = False) -> datetime | None:
    """A filter's date or date and time; a date is its whole day (from its start, or to its end)."""
    if not text:
        return None
    # A date first: parse_datetime reads "2026-12-01" as its midnight, which would end `until` a day early.
    day = _parsed(parse_date, text)
    moment = (
        datetime.combine(day + timedelta(days=1) if end else day, time.min) if day else _parsed(parse_datetime, text)
    )
    if moment is None:
        raise BadBound(f"{text[:40]!r} is not a date (2026-12-01) or a date and time (2026-12-01T09:30:00Z).")
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment, UTC)


def _parsed(parse: Any, text: str) -> Any:
    try:
        return parse(text)
    except ValueError:  # well formed, but no such day or time (2026-02-30)
        return None


def json_line(event: AuditEvent) -> str:
    return json.dumps({**body(event), "prev_hash": event.prev_hash, "hash": event.hash}, ensure_ascii=False) + "\n"


def _page(since: datetime | None, until: datetime | None, after: int, size: int) -> list[AuditEvent]:
    events = AuditEvent.objects.filter(seq__gt=after).order_by("seq")
    if since is not None:
        events = events.filter(at__gte=since)
    if until is not None:
        events = events.filter(at__lt=until)
    return list(events[:size])


async def export_lines(since: datetime | None, until: datetime | None, *, size: int = 500) -> AsyncIterator[str]:
    """The events in [since, until) as JSON Lines, read `size` at a time (by seq), so a long audit
    is streamed and never held whole in memory."""
    after = 0
    while page := await sync_to_async(_page)(since, until, after, size):
        yield "".join(json_line(event) for event in page)
        after = page[-1].seq


def export_response(since: datetime | None, until: datetime | None) -> StreamingHttpResponse:
    """The export as a download, for the admin and the REST API alike."""
    response = StreamingHttpResponse(export_lines(since, until), content_type="application/jsonl")
    response["Content-Disposition"] = 'attachment; filename="approvals-audit.jsonl"'
    return response
