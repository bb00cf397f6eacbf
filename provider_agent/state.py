"""The agent's local record of jobs (SQLite): with the chain, it decides whether work is done.

The chain is the authority on money (a job can be committed once); this record covers what the
chain cannot see: which process is running a job now, whether its outputs are already on disk
(computed, not yet committed), what it signed and handed the renter before the commit (signed:
the background committer's queue, so a restart resumes every signed-but-uncommitted job), the
job as it was dispatched (the committer hands it to the chain calls), the end of its challenge
window (read from the commit, so only jobs due are read from the chain), and why a job failed.
Claims are taken in an IMMEDIATE transaction, so two deliveries of the same job never run it at
once; a claim held by a process that no longer exists (a killed worker) is taken over.

Writes are cheap: the database is in WAL mode with `synchronous=NORMAL` (a commit appends to the
log and is synced at checkpoints, not one fsync per statement; a power cut may lose the last
commits, never the database, and the chain still holds what matters: a lost record only makes a
job run again), each update is one statement (a batch's transitions one transaction), and each
thread keeps its connection.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from protocol.escrow_job import EscrowJob
from provider_agent import ProviderAgentError

RUNNING, COMPUTED, COMMITTED, FAILED, REFUNDED = "running", "computed", "committed", "failed", "refunded"
FINALIZED = "finalized"  # paid after the challenge window
SIGNED = "signed"  # computed and signed: the renter can have it; the on-chain commit is queued
REJECTED = "rejected"  # dispatched, but the chain does not show it funded for us: nothing released
_COLUMNS = ("job_id, status, pid, root, item_count, deadline, error, attempts, updated_at, result_digest, "
            "signature, job, window_end, commit_by")
# Added after the first release: (name, type), added to an older database on open.
_ADDED_COLUMNS = (("result_digest", "BLOB"), ("signature", "TEXT"), ("job", "TEXT"), ("window_end", "INTEGER"),
                  ("commit_by", "INTEGER"))


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
    result_digest: bytes | None = None
    signature: str | None = None  # the provider's EIP-712 signature over the JobResult (0x-hex)
    job: str | None = None  # the job as dispatched (EscrowJob's JSON; older records: lower-case addresses)
    window_end: int | None = None  # the challenge window's end (chain time), from the commit
    commit_by: int | None = None  # the chain time by which the signed result promises the commit

    def dispatched(self) -> EscrowJob | None:
        return EscrowJob.from_json(json.loads(self.job)) if self.job else None


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
        present = {row[1] for row in db.execute("PRAGMA table_info(jobs)")}
        for name, kind in _ADDED_COLUMNS:
            if name not in present:
                db.execute(f"ALTER TABLE jobs ADD COLUMN {name} {kind}")

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
        row = self._connect().execute(f"SELECT {_COLUMNS} FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        return JobRecord(*row) if row else None

    def all(self) -> list[JobRecord]:
        rows = self._connect().execute(f"SELECT {_COLUMNS} FROM jobs ORDER BY job_id").fetchall()
        return [JobRecord(*r) for r in rows]

    def with_status(self, *statuses: str) -> list[JobRecord]:
        marks = ", ".join("?" * len(statuses))
        rows = self._connect().execute(f"SELECT {_COLUMNS} FROM jobs WHERE status IN ({marks}) ORDER BY job_id",
                                       statuses).fetchall()
        return [JobRecord(*r) for r in rows]

    def claim(self, job_id: int, deadline: int, job: EscrowJob | None = None) -> JobRecord:
        """Marks the job as run by this process (keeping `job`, as dispatched); raises JobBusy
        if a live process has it."""
        db = self._connect()
        db.execute("BEGIN IMMEDIATE")
        try:
            row = db.execute("SELECT status, pid FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
            if row and row[0] == RUNNING and row[1] not in (None, os.getpid()) and _alive(row[1]):
                db.execute("ROLLBACK")
                raise JobBusy(job_id, row[1])
            if row is None:
                db.execute("INSERT INTO jobs (job_id, status, pid, deadline, attempts, updated_at, job) "
                           "VALUES (?, ?, ?, ?, 1, ?, ?)", (job_id, RUNNING, os.getpid(), deadline, time.time(),
                                                            _job_json(job)))
            elif row[0] in (RUNNING, FAILED, REJECTED):
                db.execute("UPDATE jobs SET status = ?, pid = ?, attempts = attempts + 1, updated_at = ? "
                           "WHERE job_id = ?", (RUNNING, os.getpid(), time.time(), job_id))
            else:  # computed, signed or committed: keep what is known, only take ownership
                db.execute("UPDATE jobs SET pid = ?, updated_at = ? WHERE job_id = ?",
                           (os.getpid(), time.time(), job_id))
            if job is not None:
                db.execute("UPDATE jobs SET job = ? WHERE job_id = ?", (_job_json(job), job_id))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        record = self.get(job_id)
        assert record is not None
        return record

    def update(self, job_id: int, status: str, *, root: bytes | None = None, item_count: int | None = None,
               error: str | None = None, deadline: int | None = None, result_digest: bytes | None = None,
               signature: str | None = None, commit_by: int | None = None) -> None:
        # One statement, so one transaction: a value given as None keeps the stored one.
        self._connect().execute(_UPSERT, (job_id, status, root, item_count, error, deadline, result_digest,
                                          signature, commit_by, time.time(), status in (RUNNING, COMPUTED)))

    def update_many(self, job_ids: list[int], status: str, window_ends: dict[int, int] | None = None) -> None:
        """Moves every job in `job_ids` (a mined batch) to `status` in one transaction, with the
        challenge window ends of a commit."""
        now, ends = time.time(), window_ends or {}
        db = self._connect()
        db.execute("BEGIN")
        try:
            db.executemany(_UPSERT, [(job_id, status, None, None, None, None, None, None, None, now,
                                      status in (RUNNING, COMPUTED)) for job_id in job_ids])
            db.executemany("UPDATE jobs SET window_end = ? WHERE job_id = ?",
                           [(end, job_id) for job_id, end in ends.items() if job_id in job_ids])
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def orphaned(self) -> list[int]:
        """Jobs started here whose process is gone before they were committed (a killed worker)."""
        return [r.job_id for r in self.with_status(RUNNING, COMPUTED) if r.pid is None or not _alive(r.pid)]


def _job_json(job: EscrowJob | None) -> str | None:
    return json.dumps(job.to_json(), sort_keys=True) if job is not None else None


# An insert or an update of one job; a value given as None keeps the stored one, and a job that
# is no longer running or computed is held by nobody (its pid cleared).
_UPSERT = ("INSERT INTO jobs (job_id, status, root, item_count, error, deadline, result_digest, signature, "
           "commit_by, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(job_id) DO UPDATE SET "
           "status = excluded.status, root = COALESCE(excluded.root, root), "
           "item_count = COALESCE(excluded.item_count, item_count), error = COALESCE(excluded.error, error), "
           "deadline = COALESCE(excluded.deadline, deadline), "
           "result_digest = COALESCE(excluded.result_digest, result_digest), "
           "signature = COALESCE(excluded.signature, signature), "
           "commit_by = COALESCE(excluded.commit_by, commit_by), updated_at = excluded.updated_at, "
           "pid = CASE WHEN ? THEN pid END")
