"""The provider's background sender of settlement transactions: commits and finalizations in batches.

The renter has a job's result as soon as it is signed (provider_agent.jobs); the chain work follows
here, off the critical path, from one thread whose transactions all go through the provider's one
`client.tx.TxSender` (it owns the nonce, shared with the heartbeat's challenge answers). Each round:

- every signed job (the local record, so a restart resumes signed-but-uncommitted jobs) is
  committed with `commitResults`, up to MAX_BATCH per transaction;
- every committed job whose challenge window is over and that no challenge holds is finalized
  with `finalizeJobsAndWithdraw`, in the same batches: the pay reaches the provider's wallet in
  the finalizing transaction, with no withdrawal of its own.

Both calls are all or nothing on-chain. A batch that reverts is split in halves until the entry
that the escrow refuses is alone, so one bad job never holds back the others. A lone commit the
escrow refuses is looked up: already committed (a batch of ours mined after its receipt timed out)
is recorded as such, never sent again; otherwise the job is recorded failed with the escrow's
reason, and `refund_failed` refunds its renter. The escrow itself accepts one commit per job,
so nothing is committed twice.

A round runs `gather_s` after a job is signed (`wake`) and every `interval_s` (finalizations,
retries after an unreachable node).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TypeVar

from client.errors import ClientError, TransactionReverted
from protocol.enums import JobStatus
from protocol.escrow_job import ZERO32, EscrowJob
from protocol.ids import JobId
from protocol.job_result import JobResult
from provider_agent import ProviderAgentError
from provider_agent.jobs import JobService
from provider_agent.state import COMMITTED, FAILED, FINALIZED, REFUNDED, SIGNED, JobRecord

logger = logging.getLogger(__name__)

MAX_BATCH = 64  # JobEscrow.MAX_BATCH_SIZE
T = TypeVar("T")


class Committer:
    def __init__(self, jobs: JobService, interval_s: float = 5.0, batch_size: int = MAX_BATCH,
                 gather_s: float = 0.25) -> None:
        self.jobs = jobs
        self.interval_s = interval_s
        self.batch_size = batch_size
        self.gather_s = gather_s
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        jobs.signed.append(lambda _job_id: self.wake())

    # -- the thread ------------------------------------------------------------------------

    def start(self) -> Committer:
        """Starts the background thread (once); a round runs at once for what a restart left."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="committer", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        """Ends the thread (waiting at most `timeout_s` for its round), then commits what is
        signed: a result signed and never committed can be slashed once its job's deadline passes."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():  # a round still waits for its receipt: it goes on alone
                logger.warning("committer: still in a round after %.0f s; signed jobs left to it", timeout_s)
                return
            self._thread = None
        self._guarded(self.commit_signed)

    def wake(self) -> None:
        self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            self._guarded(self.run_once)
            if self._wake.wait(self.interval_s):
                # Woken by a signed job: its reply to the renter goes out first (a round is tens of
                # milliseconds of Python that would share the interpreter with it), and the jobs
                # signed meanwhile go in the same commit.
                self._stop.wait(self.gather_s)

    def _guarded(self, round_: Callable[[], object]) -> None:
        try:
            round_()
        except (ClientError, ProviderAgentError, OSError) as exc:  # the node is down: next round
            logger.warning("committer: round failed, again in %.1f s: %s", self.interval_s, exc)
        except Exception:  # never let the thread die: a dead committer leaves signed jobs unpaid
            logger.exception("committer: round failed, again in %.1f s", self.interval_s)

    def run_once(self) -> tuple[list[int], list[int]]:
        """One round: (jobs committed now, jobs finalized now)."""
        return self.commit_signed(), self.finalize_due()

    # -- commits ---------------------------------------------------------------------------

    def commit_signed(self) -> list[int]:
        """Commits every signed job, in batches. Returns the jobs committed now."""
        pending = [(record.dispatched() or self._dispatched(record), self._result(record))
                   for record in self.jobs.store.with_status(SIGNED)]
        return [job_id for batch in _chunks(pending, self.batch_size) for job_id in self._commit(batch)]

    def _commit(self, batch: Sequence[tuple[EscrowJob, JobResult]]) -> list[int]:
        ids: list[int] = [job.id for job, _ in batch]
        try:
            receipt = self.jobs.chain.commit_results([job for job, _ in batch], [result for _, result in batch])
        except TransactionReverted as exc:
            if len(batch) > 1:
                logger.warning("commitResults of jobs %s refused (%s); split to find the bad entry", ids, exc)
                half = len(batch) // 2
                return self._commit(batch[:half]) + self._commit(batch[half:])
            self._commit_refused(*batch[0], exc)
            return []
        self.jobs.store.update_many(ids, COMMITTED, self.jobs.chain.window_ends(receipt))
        logger.info("jobs %s: results committed (tx %s)", ids, receipt["transactionHash"].hex())
        return ids

    def _commit_refused(self, job: EscrowJob, result: JobResult, exc: TransactionReverted) -> None:
        onchain = self.jobs.chain.job(job.id)
        if onchain.status in (JobStatus.COMMITTED, JobStatus.FINALIZED):
            if "0x" + onchain.output_root.hex() != result.output_root:
                logger.error("job %s: the chain holds root 0x%s, not the signed %s", job.id,
                             onchain.output_root.hex(), result.output_root)
            self.jobs.store.update(job.id, FINALIZED if onchain.status == JobStatus.FINALIZED else COMMITTED)
            logger.info("job %s: already committed on-chain", job.id)
        elif onchain.status == JobStatus.REFUNDED:
            self.jobs.store.update(job.id, REFUNDED)
            logger.error("job %s: refunded before our commit (%s)", job.id, exc)
        else:
            self.jobs.store.update(job.id, FAILED, error=f"commit-refused: {exc}")
            logger.error("job %s: the escrow refuses its commit; the renter is refunded: %s", job.id, exc)

    def _result(self, record: JobRecord) -> JobResult:
        """The result to commit, as signed (a record kept before results carried commitBy is
        still committed: the commit takes the root, count and digest only)."""
        assert record.root is not None and record.result_digest is not None, f"job {record.job_id}: signed, no result"
        return JobResult(record.job_id, "0x" + record.root.hex(), record.item_count or 0,
                         "0x" + record.result_digest.hex(), record.commit_by or 0)

    def _dispatched(self, record: JobRecord) -> EscrowJob:
        """The job as dispatched, from the chain for a record kept before the dispatch carried it."""
        return replace(self.jobs.chain.job(JobId(record.job_id)).job, output_root=ZERO32, item_count=0,
                       result_digest=ZERO32)

    # -- finalizations ---------------------------------------------------------------------

    def finalize_due(self) -> list[int]:
        """Finalizes (permissionless, but the provider is the one waiting for the money) every
        committed job whose challenge window is over and that no challenge holds, in batches;
        records the jobs the chain has settled either way. Returns the jobs finalized now. Only
        jobs whose recorded window is over (or unknown) are read from the chain, and as we
        committed them: their slots in one round trip, events only for a slot that holds another
        hash (or a record too old to hold the job)."""
        chain = self.jobs.chain
        now = chain.now()
        over = [record for record in self.jobs.store.with_status(COMMITTED)
                if record.window_end is None or now >= record.window_end]
        held = [self._committed(record) for record in over]
        known = chain.jobs_as_held([job for job in held if job is not None])
        unknown = [chain.job(JobId(record.job_id)) for record, job in zip(over, held) if job is None]
        due = []
        for job in known + unknown:
            if job.status == JobStatus.COMMITTED and not job.frozen and now >= job.challengeWindowEnd:
                due.append(job.job)
            elif job.status == JobStatus.FINALIZED:
                self.jobs.store.update(job.job.id, FINALIZED)
            elif job.status == JobStatus.REFUNDED:  # a challenge found the provider at fault
                self.jobs.store.update(job.job.id, REFUNDED)
        return [job_id for batch in _chunks(due, self.batch_size) for job_id in self._finalize(batch)]

    @staticmethod
    def _committed(record: JobRecord) -> EscrowJob | None:
        """The job with the result we committed, as the escrow hashes it; None for a record kept
        before records held the dispatched job."""
        dispatched = record.dispatched()
        if dispatched is None or record.root is None or record.item_count is None or record.result_digest is None:
            return None
        return dispatched.committed(record.root, record.item_count, record.result_digest)

    def _finalize(self, batch: Sequence[EscrowJob]) -> list[int]:
        ids: list[int] = [job.id for job in batch]
        try:
            receipt = self.jobs.chain.finalize_jobs(batch)
        except TransactionReverted as exc:
            if len(batch) > 1:
                half = len(batch) // 2
                return self._finalize(batch[:half]) + self._finalize(batch[half:])
            # settled by someone else meanwhile, or a challenge opened: read again next round
            logger.info("job %s: finalize refused: %s", ids[0], exc)
            return []
        self.jobs.store.update_many(ids, FINALIZED)
        logger.info("jobs %s: finalized (tx %s)", ids, receipt["transactionHash"].hex())
        return ids


def _chunks(items: Sequence[T], size: int) -> list[Sequence[T]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


__all__ = ["MAX_BATCH", "Committer"]
