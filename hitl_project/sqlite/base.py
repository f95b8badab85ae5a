"""settings.DATABASES' ENGINE on SQLite (the embedded default): Django's own backend, whose
writers take turns on a lock of this process before they ask SQLite for the file's write lock.

SQLite lets one writer at a time have the file, and one that finds it taken does not queue: its
busy handler sleeps and tries again, with sleeps growing to 100 ms. Under load the file is free
for most of such a sleep and another thread, trying at the right moment, takes it first: with 8
requests' threads and 8 rounds' threads writing at once, a writer lost for the whole busy timeout
(20 s) and failed with "database is locked", which failed its request with a 500, or its run's
lease renewal, so the round looked stalled and was enqueued again
(docs/performance.md, "The embedded default under load"). Here each writer of this process waits
on a lock that is handed on the moment its holder commits, so the busy handler only ever waits
for another process (a `manage.py` command beside the server).

A writer is a transaction (every one begins IMMEDIATE, settings.py) or a write statement outside
one. Reads never wait: the file is in WAL mode, and readers do not block the writer.
"""

from __future__ import annotations

import threading

from django.db import OperationalError
from django.db.backends import utils
from django.db.backends.sqlite3 import base

# One per process: every connection of every thread of the process writes to the same file.
_writer = threading.Lock()
_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


class DatabaseWrapper(base.DatabaseWrapper):
    _writing = False

    def _take_the_writers_turn(self) -> None:
        # As long as SQLite's own busy timeout: past it a writer fails as SQLite would fail it.
        timeout = self.settings_dict["OPTIONS"].get("timeout", 5)
        if not _writer.acquire(timeout=timeout):
            raise OperationalError(f"database is locked (this process's other writers held it for {timeout} s)")
        self._writing = True

    def _end_the_writers_turn(self) -> None:
        if self._writing:
            self._writing = False
            _writer.release()

    def _start_transaction_under_autocommit(self) -> None:
        self._take_the_writers_turn()
        try:
            super()._start_transaction_under_autocommit()  # type: ignore[misc]  # private, not in the stubs
        except BaseException:
            self._end_the_writers_turn()
            raise

    def _commit(self) -> None:
        try:
            super()._commit()  # type: ignore[misc]  # private, not in the stubs
        finally:
            if not self.connection.in_transaction:
                self._end_the_writers_turn()

    def _rollback(self) -> None:
        try:
            super()._rollback()  # type: ignore[misc]  # private, not in the stubs
        finally:
            self._end_the_writers_turn()

    def _close(self) -> None:
        try:
            super()._close()  # type: ignore[misc]  # private, not in the stubs
        finally:
            self._end_the_writers_turn()

    def make_cursor(self, cursor):
        return _TakingTurns(cursor, self)

    def make_debug_cursor(self, cursor):
        return _TakingTurnsDebug(cursor, self)


class _TakingTurns(utils.CursorWrapper):
    """A write outside a transaction (an autocommitted UPDATE: a lease's renewal, a run's progress)
    takes the writers' turn for its one statement."""

    db: DatabaseWrapper

    def _execute(self, sql, params, *ignored):
        if self.db._writing or not sql.lstrip()[:7].upper().startswith(_WRITES) or self.db.connection.in_transaction:
            return super()._execute(sql, params, *ignored)  # type: ignore[misc]
        self.db._take_the_writers_turn()
        try:
            return super()._execute(sql, params, *ignored)  # type: ignore[misc]
        finally:
            self.db._end_the_writers_turn()

    def _executemany(self, sql, param_list, *ignored):
        if self.db._writing or self.db.connection.in_transaction:
            return super()._executemany(sql, param_list, *ignored)  # type: ignore[misc]
        self.db._take_the_writers_turn()
        try:
            return super()._executemany(sql, param_list, *ignored)  # type: ignore[misc]
        finally:
            self.db._end_the_writers_turn()


class _TakingTurnsDebug(_TakingTurns, utils.CursorDebugWrapper):
    pass
