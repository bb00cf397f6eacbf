"""The agent's local record of jobs (SQLite): with the chain, it decides whether work is done.

The chain is the authority on money (a job can be committed once); this record covers what the
chain cannot see: which process is running a job now, whether its outputs are already on disk
(computed, not yet committed), and why a job failed. Claims are taken in an IMMEDIATE
transaction, so two deliveries of the same job never run it at once; a claim held by a process
that no longer exists (a killed worker) is taken over.

Writes are cheap: the database is in WAL mode with `synchronous=NORMAL` (a commit appends to the
log and is synced at checkpoints, not one fsync per statement; a power cut may lose the last
commits, never the database, and the chain still holds what matters: a lost record only makes a
job run again), each update is one statement, and each thread keeps its connection.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from provider_agent import ProviderAgentError

RUNNING, COMPUTED, COMMITTED, FAILED, REFUNDED = "running", "computed", "committed", "failed", "refunded"
FINALIZED = "finalized"  # paid after the challenge window


class JobBusy(ProviderAgentError):
    """Another live process holds the job."""

    def __init__(self, job_id: int, pid: int) -> None:
        super().__init__(f"job {job_id} is being run by pid {pid}")
        self.job_id = job_id
        self.pid = pid


@dataclass(frozen=True)
class JobRecord:
    job_id: int
    status: str
    pid: int | None
    root: bytes | None
    item_count: int | None
    deadline: int | None
    error: str | None
    attempts: int
    updated_at: float


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class JobStore:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._local = threading.local()
        db = self._connect()
        db.execute("PRAGMA journal_mode=WAL")  # persistent: stored in the database file
        db.execute("""CREATE TABLE IF NOT EXISTS jobs (
            job_id INTEGER PRIMARY KEY, status TEXT NOT NULL, pid INTEGER, root BLOB,
            item_count INTEGER, deadline INTEGER, error TEXT, attempts INTEGER NOT NULL DEFAULT 0,
            updated_at REAL NOT NULL)""")

    def _connect(self) -> sqlite3.Connection:
        """This thread's connection (autocommit: every statement is its own transaction unless
        BEGIN says otherwise); a forked process (a Celery prefork worker) opens its own."""
        cached = getattr(self._local, "connection", None)
        if cached is not None and cached[0] == os.getpid():
            return cached[1]
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.execute("PRAGMA synchronous=NORMAL")
        self._local.connection = (os.getpid(), db)
        return db

    def get(self, job_id: int) -> JobRecord | None:
        row = self._connect().execute("SELECT job_id, status, pid, root, item_count, deadline, error, attempts, "
                                      "updated_at FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        return JobRecord(*row) if row else None

    def all(self) -> list[JobRecord]:
        rows = self._connect().execute("SELECT job_id, status, pid, root, item_count, deadline, error, attempts, "
                                       "updated_at FROM jobs ORDER BY job_id").fetchall()
        return [JobRecord(*r) for r in rows]

    def claim(self, job_id: int, deadline: int) -> JobRecord:
        """Marks the job as run by this process; raises JobBusy if a live process has it."""
        db = self._connect()
        db.execute("BEGIN IMMEDIATE")
        try:
            row = db.execute("SELECT status, pid FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
            if row and row[0] == RUNNING and row[1] not in (None, os.getpid()) and _alive(row[1]):
                db.execute("ROLLBACK")
                raise JobBusy(job_id, row[1])
            if row is None:
                db.execute("INSERT INTO jobs (job_id, status, pid, deadline, attempts, updated_at) "
                           "VALUES (?, ?, ?, ?, 1, ?)", (job_id, RUNNING, os.getpid(), deadline, time.time()))
            elif row[0] in (RUNNING, FAILED):
                db.execute("UPDATE jobs SET status = ?, pid = ?, attempts = attempts + 1, updated_at = ? "
                           "WHERE job_id = ?", (RUNNING, os.getpid(), time.time(), job_id))
            else:  # computed or committed: keep what is known, only take ownership
                db.execute("UPDATE jobs SET pid = ?, updated_at = ? WHERE job_id = ?",
                           (os.getpid(), time.time(), job_id))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        record = self.get(job_id)
        assert record is not None
        return record

    def update(self, job_id: int, status: str, *, root: bytes | None = None, item_count: int | None = None,
               error: str | None = None, deadline: int | None = None) -> None:
        # One statement, so one transaction: a value given as None keeps the stored one.
        self._connect().execute(
            "INSERT INTO jobs (job_id, status, root, item_count, error, deadline, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(job_id) DO UPDATE SET status = excluded.status, "
            "root = COALESCE(excluded.root, root), item_count = COALESCE(excluded.item_count, item_count), "
            "error = COALESCE(excluded.error, error), deadline = COALESCE(excluded.deadline, deadline), "
            "updated_at = excluded.updated_at, pid = CASE WHEN ? THEN pid END",
            (job_id, status, root, item_count, error, deadline, time.time(),
             status in (RUNNING, COMPUTED)))  # finished: nobody holds it any more

    def orphaned(self) -> list[int]:
        """Jobs started here whose process is gone before they were committed (a killed worker)."""
        return [r.job_id for r in self.all()
                if r.status in (RUNNING, COMPUTED) and (r.pid is None or not _alive(r.pid))]
