"""One indexer and dispatcher at a time among backend replicas that share a database.

Every replica serves the API from the shared database, but only the one holding the leader lock
follows the chain, writes the index and dispatches funded jobs: two indexers would insert the same
events (PostgreSQL deadlocked them on the events' unique key) and race each other's dispatches.

- PostgreSQL: a session-level advisory lock, held by a connection of the leader's own. The server
  frees it when that connection ends, a killed replica's included, and another replica takes it at
  its next pass. The key is per schema, so replicas of different deployments sharing a database
  (tests, staging) do not exclude each other.
- SQLite (replicas on one machine sharing the file): an exclusive `flock` on `<database>.leader`,
  which the kernel frees when the process dies. An in-memory database has one replica.

A leader checks its lock before every pass (a lost connection loses the lock, and another replica
may have taken over); one that cannot reach the broker steps down for a while, so that a replica
that can reach it dispatches instead.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from pathlib import Path

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

log = logging.getLogger(__name__)

# The lock's name; each schema hashes it with its own name (hashtextextended, PostgreSQL 11+).
LOCK_NAME = "unchained-backend-leader"
LOCK_KEY_SQL = "hashtextextended(current_schema() || ':' || :name, 0)"


class Leadership:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._connection: Connection | None = None  # PostgreSQL: the connection holding the lock
        self._file: int | None = None  # SQLite: the locked file's descriptor
        self._resting_until = 0.0
        self.leading = False

    def hold(self) -> bool:
        """Whether this replica leads now: takes the lock when it is free (and we are not resting
        after stepping down), and checks that a lock we hold is still ours."""
        was = self.leading
        if time.monotonic() < self._resting_until:
            self.leading = False
        elif self.engine.dialect.name == "postgresql":
            self.leading = self._hold_postgresql()
        else:
            self.leading = self._hold_file()
        if self.leading != was:
            log.info("leader lock %s: %s", "taken" if self.leading else "lost",
                     "this replica indexes and dispatches" if self.leading else "another replica leads")
        return self.leading

    def step_down(self, rest_s: float) -> None:
        """Releases the lock and leaves it to other replicas for `rest_s` (then competes again)."""
        self.release()
        self._resting_until = time.monotonic() + rest_s
        log.warning("leader lock released for %.0f s: another replica may lead", rest_s)

    def release(self) -> None:
        if self._connection is not None:
            try:
                # Unlocked first: the server frees a closed session's locks only when its backend
                # process has noticed the close, and until then no other replica can take over.
                self._connection.execute(text(f"SELECT pg_advisory_unlock({LOCK_KEY_SQL})"), {"name": LOCK_NAME})
            except SQLAlchemyError:
                pass  # the connection is gone, and the lock with it
            try:
                # Closed for real, not returned to the pool: nothing else runs on the lock's session.
                self._connection.invalidate()
                self._connection.close()
            except DBAPIError:
                pass
            self._connection = None
        if self._file is not None:
            os.close(self._file)  # closing the descriptor frees the flock
            self._file = None
        self.leading = False

    def _hold_postgresql(self) -> bool:
        if self._connection is not None:
            try:
                self._connection.execute(text("SELECT 1"))
                return True
            except DBAPIError:  # the connection (and with it the lock) is gone
                self.release()
        connection = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        try:
            taken = connection.execute(text(f"SELECT pg_try_advisory_lock({LOCK_KEY_SQL})"),
                                       {"name": LOCK_NAME}).scalar()
        except DBAPIError:
            connection.close()
            raise
        if not taken:
            connection.close()
            return False
        self._connection = connection
        return True

    def _hold_file(self) -> bool:
        if self._file is not None:
            return True
        database = self.engine.url.database
        if not database or database == ":memory:":
            return True
        descriptor = os.open(Path(database).with_name(Path(database).name + ".leader"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            return False
        self._file = descriptor
        return True


__all__ = ["Leadership"]
