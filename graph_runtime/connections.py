"""A PostgreSQL connection check without a round trip, shared by the checkpointer's pool
(checkpointer.py) and Django's backend in the worker (hitl_project/postgresql).

A server that ends a session (a restart, a shutdown, pg_terminate_backend) sends its error and
closes the socket, which makes the socket readable. An idle connection whose socket has nothing
to read is live as far as a poll can tell; one that has something to read is tested with a round
trip. A poll can miss a session ended a moment before, whose backend has not yet said goodbye:
the first statement then fails, which only a caller that retries it can afford.
"""

from __future__ import annotations

import select
from typing import Any


def spoke_while_idle(conn: Any) -> bool:
    """Whether an idle psycopg connection has anything to read (the server's goodbye, or anything
    else it should not have sent unasked), or has no socket left: either way it is tested before
    use. A poll of the socket with no timeout, no round trip. A live connection never looks dead;
    a readable one that is live (a TLS session ticket, say) only costs the round trip that tells."""
    try:
        poller = select.poll()
        poller.register(conn.pgconn.socket, select.POLLIN | select.POLLPRI)
        return bool(poller.poll(0))
    except Exception:  # closed: no socket to poll
        return True
