"""Hands funded jobs to their provider's Celery queue.

The backend only produces: it sends tasks by name (protocol.tasks) and never imports the
provider agent. A job is dispatched once: the Dispatch row is committed before the message is
sent, and the message carries the job as JobCreated announced it (protocol.escrow_job.EscrowJob),
so the provider starts at once and checks the chain beside its work. A header of it
(CONTENT_HEADER) carries the job's spec and the renter's inputs while they fit in
MAX_INLINE_CONTENT_BYTES (the provider's queue is readable by that provider alone, who may fetch
them anyway), so a small job needs no fetch before it runs. If the broker is down the row stays
without a task id and `retry_pending` sends it later, from the indexed job. `sweep` finds funded
jobs with no row at all (a replica that indexed JobCreated and died before dispatching) and
dispatches them; a new leader (backend.leader) sweeps first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from backend import models as m
from backend.auth import utcnow
from client.broker import QueueApps
from client.log_follower import Event
from client.task_auth import TaskAuth
from backend.errors import NotFound
from backend.hub import IN_QUERY_HASHES, inputs_held
from backend.storage import BlobStore
from protocol.escrow_job import EscrowJob
from protocol.jobs import JobSpec
from protocol.tasks import (CONTENT_HEADER, MAX_INLINE_CONTENT_BYTES, TASK_LEASE, TASK_RUN_JOB, inline_content,
                            provider_queue)

log = logging.getLogger(__name__)

UNSETTLED = ("funded", "cancel requested", "accepted")  # a provider may still commit these (models.Job.status)


def make_celery(broker_url: str, auth: Callable[[], TaskAuth]) -> QueueApps:
    """The backend's senders, one per provider queue (on that provider's key prefix), signing
    with the dispatch key; they never wait for replies."""
    return QueueApps("unchained-backend", broker_url, auth, results=False, max_retries=2,
                     broker_connection_retry_on_startup=False, broker_connection_timeout=3)


class Dispatcher:
    def __init__(self, celery: QueueApps, factory: sessionmaker[Session], blobs: BlobStore | None = None) -> None:
        self.celery = celery
        self.factory = factory
        self.blobs = blobs  # None: dispatches carry no content
        # Whether a row may wait without a task id: at start (a previous run may have left some)
        # and after a refused send. The indexer asks after every pass; the table is read only then.
        self._maybe_pending = True
        self.broker_refused = False  # the last send failed: the leader may step down

    def on_new_events(self, events: Sequence[Event]) -> None:
        """Indexer hook: every newly confirmed JobCreated is a funded job to dispatch; a lease
        that starts or ends is told to its provider (its miner yields the GPUs, then resumes)."""
        for event in events:
            if event.contract == "JobEscrow" and event.name == "JobCreated":
                self.dispatch(EscrowJob.from_created(event.args))
            elif event.contract == "LeaseManager" and event.name == "LeaseStarted":
                self.notify_lease(int(event.args["leaseId"]), str(event.args["provider"]))
            elif event.contract == "LeaseManager" and event.name == "LeaseEnded":
                provider = self._lease_provider(int(event.args["leaseId"]))  # the hook runs after the commit
                if provider is not None:
                    self.notify_lease(int(event.args["leaseId"]), provider)

    def notify_lease(self, lease_id: int, provider: str) -> None:
        """Best effort: the task reads the lease from the chain, so a repeat is harmless, and a
        lost message only delays the miner's pause until the provider's next look."""
        try:
            self.celery.for_provider(provider).send_task(TASK_LEASE, args=[lease_id], queue=provider_queue(provider))
        except Exception:  # kombu raises OperationalError and friends
            log.exception("lease %s: broker unavailable, provider %s not told", lease_id, provider)
            return
        log.info("lease %s: told provider %s", lease_id, provider)

    def _lease_provider(self, lease_id: int) -> str | None:
        with self.factory() as session:
            lease = session.get(m.Lease, lease_id)
            return lease.provider if lease is not None else None

    def dispatch(self, job: EscrowJob) -> str | None:
        queue = provider_queue(job.provider)
        try:
            with self.factory.begin() as session:  # read first: SQLite's write lock only for the insert
                content = self._inline(session, job)
                session.add(m.Dispatch(job_id=job.id, queue=queue))
        except IntegrityError:
            log.info("job %s already dispatched", job.id)
            return None
        return self._send(job, content)

    def _send(self, job: EscrowJob, content: dict[str, bytes]) -> str | None:
        job_id, provider = job.id, job.provider.lower()
        queue = provider_queue(provider)
        try:
            result = self.celery.for_provider(provider).send_task(
                TASK_RUN_JOB, args=[job.to_json()], queue=queue, task_id=f"run-job-{job_id}",
                headers={CONTENT_HEADER: inline_content(content)} if content else None)
        except Exception:  # kombu raises OperationalError and friends: keep the row, retry later
            log.exception("job %s: broker unavailable, will retry dispatch to %s", job_id, queue)
            self._maybe_pending = self.broker_refused = True
            return None
        self.broker_refused = False
        with self.factory.begin() as session:
            row = session.get(m.Dispatch, job_id)
            if row is not None:
                row.task_id, row.queued_at = result.id, utcnow()
        task_id: str = result.id
        log.info("job %s dispatched to %s (task %s)", job_id, queue, task_id)
        return task_id

    def _inline(self, session: Session, job: EscrowJob) -> dict[str, bytes]:
        """The job's spec and, in the spec's order, the inputs its renter uploaded here, while
        the total fits in MAX_INLINE_CONTENT_BYTES; whatever is left out the provider fetches."""
        if self.blobs is None:
            return {}
        spec_hash = "0x" + job.spec_hash.hex()  # as the backend stores and serves it
        record = session.get(m.JobSpecRecord, spec_hash)
        if record is None:
            return {}
        items = {spec_hash: record.canonical.encode()}
        total = len(items[spec_hash])
        names = list(dict.fromkeys(JobSpec.parse(record.canonical).inputs))  # in order, each once
        for start in range(0, len(names), IN_QUERY_HASHES):
            chunk = names[start:start + IN_QUERY_HASHES]
            held = inputs_held(session, chunk, job.renter.lower())
            for name in (n for n in chunk if n in held):
                try:
                    data = self.blobs.path(name).read_bytes()
                except (NotFound, OSError):
                    return items
                if total + len(data) > MAX_INLINE_CONTENT_BYTES:
                    return items
                items[name], total = data, total + len(data)
        return items

    def retry_pending(self) -> int:
        """Sends the dispatches the broker refused (or a previous run left unsent)."""
        if not self._maybe_pending:
            return 0
        self._maybe_pending = False  # a send that fails again sets it back
        with self.factory() as session:
            pending = session.scalars(select(m.Job).join(m.Dispatch, m.Dispatch.job_id == m.Job.job_id)
                                      .where(m.Dispatch.task_id.is_(None))).all()
            jobs = [job_of(j) for j in pending]
            contents = [self._inline(session, job) for job in jobs]
        return sum(self._send(job, content) is not None for job, content in zip(jobs, contents))

    def sweep(self) -> int:
        """Dispatches every funded job that has no dispatch row (indexed by a replica that died
        before dispatching it), then whatever waits without a task id. Returns the sends."""
        with self.factory() as session:
            stranded = session.scalars(select(m.Job).outerjoin(m.Dispatch, m.Dispatch.job_id == m.Job.job_id)
                                       .where(m.Job.status.in_(UNSETTLED), m.Dispatch.job_id.is_(None))).all()
            jobs = [job_of(j) for j in stranded]
        if jobs:
            log.warning("sweep: %d funded job(s) were never dispatched: %s", len(jobs), [j.id for j in jobs])
        sent = sum(self.dispatch(job) is not None for job in jobs)
        self._maybe_pending = True
        return sent + self.retry_pending()


def job_of(row: m.Job) -> EscrowJob:
    """The TASK_RUN_JOB payload from an indexed job (the row keeps JobCreated's arguments)."""
    return EscrowJob.from_created({"jobId": row.job_id, "renter": row.renter, "provider": row.provider,
                                   "token": row.token, "price": row.price, "specHash": row.spec_hash,
                                   "deadline": row.deadline})
