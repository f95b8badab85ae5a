"""How many event streams a web process serves at once, and how many of them one caller holds.

Every stream /mcp/ answers with (an older client's call stream and its session's own, a
subscriptions/listen, a 2026-07-28 call's notifications) holds one place from the moment its
request is accepted until it ends, however it ends (its last frame, an error, its client gone):

    a process serving MCP_MAX_STREAMS streams ──► HTTP 503, -32603, Retry-After
    a caller holding MCP_STREAMS_PER_CALLER of them ──► HTTP 429, -32003, Retry-After

The quota sits well below the cap, so one caller, with one token, can never hold the streams
every other caller needs; the error's data says which limit refused (`scope`: "caller" or
"server"). Both are counts of this process only: what it serves is what it spends (a connection,
a task, database reads), and a caller's streams spread over several processes are bounded by each.
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter

from django.conf import settings

from mcp_gateway.limits import RATE_LIMITED
from mcp_gateway.protocol import INTERNAL_ERROR, RpcError

# A stream lasts seconds to minutes: by then some of the caller's own streams, or the process's,
# have ended; a client that tries again sooner finds the same count.
RETRY_AFTER_SECONDS = 5

# Places are taken on database threads (a request accepted) and given back on the event loop (a
# stream's end): the check and the count are one step under this lock, so requests accepted
# together never pass a limit.
_lock = threading.Lock()
_open = 0
_by_caller: Counter[str] = Counter()


class Place:
    """One stream's place. `give_back` is idempotent; a place never given back (a response that
    was accepted but never started streaming, its client gone first) is given back when it is
    garbage collected."""

    def __init__(self, identity: str) -> None:
        self.identity = identity
        self._finalizer = weakref.finalize(self, _give_back, identity)

    def give_back(self) -> None:
        self._finalizer()  # runs _give_back at most once


def check(identity: str) -> None:
    """Raise the refusal `take` would raise now, without taking a place: before a request starts
    work whose answer may need a stream (a call started and then refused its stream is lost)."""
    with _lock:
        _refuse_if_full(identity)


def take(identity: str, *, admitted: bool = False) -> Place:
    """A place for a stream of `identity`'s, or the RpcError (429 or 503) that refuses it.

    `admitted`: the stream answers a request that `check` let in before it started a call. It is
    served even if a burst took the last place since: refusing it then would lose the call (its
    answer has nowhere else to go), so a limit may be passed by the requests admitted together,
    at most one per database thread."""
    global _open
    with _lock:
        if not admitted:
            _refuse_if_full(identity)
        _open += 1
        _by_caller[identity] += 1
    return Place(identity)


def open_streams(identity: str | None = None) -> int:
    """The streams this process serves now: all of them, or one caller's."""
    with _lock:
        return _open if identity is None else _by_caller[identity]


def _give_back(identity: str) -> None:
    global _open
    with _lock:
        _open -= 1
        _by_caller[identity] -= 1
        if _by_caller[identity] <= 0:
            del _by_caller[identity]


def _refuse_if_full(identity: str) -> None:
    # The caller's own quota first: a caller at its quota is told so (and to close a stream of its
    # own), whether or not the process has room.
    quota = settings.MCP_STREAMS_PER_CALLER
    if _by_caller[identity] >= quota:
        raise RpcError(
            RATE_LIMITED,
            f"Too many streams: this caller holds {quota} open at once; close one or try again later",
            {"scope": "caller", "limit": quota, "retryAfterSeconds": RETRY_AFTER_SECONDS},
            http_status=429,
            retry_after=RETRY_AFTER_SECONDS,
        )
    cap = settings.MCP_MAX_STREAMS
    if _open >= cap:
        # -32603 with 503: the process is at capacity, not broken (as overload.py's busy answers).
        raise RpcError(
            INTERNAL_ERROR,
            "Stream limit reached: this server serves all the streams it can; try again later",
            {"scope": "server", "limit": cap, "retryAfterSeconds": RETRY_AFTER_SECONDS},
            http_status=503,
            retry_after=RETRY_AFTER_SECONDS,
        )
