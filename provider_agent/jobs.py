"""Taking a dispatched job to a signed result in the renter's hands, with the chain work behind it.

`JobService.process(job)` takes the job as the backend dispatched it (protocol.escrow_job.EscrowJob)
and may be called any number of times for the same job (a redelivered Celery message, a
restarted worker): the local record and the chain decide what is left to do, and the escrow
accepts one commit per job, so a job is committed at most once.

The critical path has no chain read and no transaction: fetch and check the spec, the model and
every input; run the model in a limited child; write every output and the digests to disk; sign
the result (protocol.job_result: EIP-712 under JobEscrow's domain); hand the backend the signed
result and every output with its proof against the signed root. The chain is read beside the work
(one concurrent read started with it): the operator is trusted for availability only, so nothing
is released (no signed result, no outputs, no failure report) for a job the chain does not show
funded and addressed to us with the dispatched spec; such a job is recorded `rejected` and its
outputs deleted. The signed job joins the committer's queue (provider_agent.committer), which
sends `commitResults` and `finalizeJobsAndWithdraw` in batches from one thread; commit accepts implicitly,
so no acceptJob is sent. The signature binds the provider: a commit that differs from it, or no
commit by the deadline, can be slashed with it. So the agent signs only what it can honour: the
result carries `commitBy` (chain time now, as read beside the work plus the time since, plus the
commit margin: the committer's latency and batching interval), and it signs only when commitBy
is before the deadline, its stake is bonded at the minimum and nothing of it is unbonding (the
same read, Staking.isBondedFor). A job it cannot honour so is failed on-chain (the renter
refunded) with no result released. A computation that took long is checked again just before
signing.

A job that cannot be done (unknown model, a model that does not load, malformed inputs, a model
that raises, hangs or runs out of memory) is recorded as failed with its reason, reported to the
backend, and failed on-chain at once with `failJob(jobId, reason)`: the escrow refunds the renter
in the same transaction, so nobody waits for the deadline. A job whose deadline has already
passed is refunded with `refundExpired` instead; `refund_failed` (every heartbeat) retries
whichever applies for failed jobs whose refund did not go through yet.

The outputs go to the backend signed in as the provider (`backend_client`), after the signed
result, once; if that fails, the upload is left pending and the worker retries it in a task of
its own with Celery's countdown (never a sleep inside the job's task); `pending_uploads` lists
such jobs at the worker's start. An `uploaded` marker in the job's output directory records that
the backend holds every item.
"""

from __future__ import annotations

import itertools
import logging
import math
import shutil
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from client.backend_http import ApiError, BackendRefused, BackendUnavailable
from client.errors import TransactionReverted
from client.escrow_jobs import JobView
from protocol.enums import ChallengeKind, JobStatus
from protocol.escrow_job import EscrowJob
from protocol.ids import ChallengeId, JobId
from protocol.job_result import JobResult, SignedJobResult
from protocol.jobs import MAX_OUTPUTS_BODY_BYTES, JobSpec, JobSpecError, base64_size, request_groups
from protocol.merkle import MerkleTree, keccak256
from provider_agent import ProviderAgentError
from provider_agent.backend_client import BackendClient
from provider_agent.cache import ContentCache, ContentError, ContentUnavailable
from provider_agent.chain import ProviderChain
from provider_agent.runner import BadJobInput, JobFailed, Limits, run_inference
from provider_agent.state import COMMITTED, COMPUTED, FAILED, FINALIZED, REFUNDED, REJECTED, SIGNED, JobStore

logger = logging.getLogger(__name__)


def _upload_cost(item: tuple[int, bytes, tuple]) -> int:
    """An output's share of a several-items JSON body: base64 bytes, hex siblings, JSON."""
    return base64_size(len(item[1])) + 80 * (len(item[2]) + 1)


MAX_FAILURE_REASON_BYTES = 256  # JobEscrow.MAX_FAILURE_REASON_BYTES


def failure_reason(text: str) -> str:
    """`text` ("kind: message") as JobEscrow.failJob takes it: 256 bytes of UTF-8 at most, never
    half a character. A multi-line message (a TorchScript traceback) keeps its kind and its last
    line, which names the error itself; the whole text goes to the backend's failure report."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if len(lines) > 1:
        kind = lines[0].split(":", 1)[0]
        text = f"{kind}: {lines[-1]}"
    return text.encode()[:MAX_FAILURE_REASON_BYTES].decode(errors="ignore")


class UnknownJob(ProviderAgentError):
    def __init__(self, job_id: int) -> None:
        super().__init__(f"job {job_id} does not exist on this chain")
        self.job_id = job_id


class NotOurJob(ProviderAgentError):
    def __init__(self, job_id: int, provider: str) -> None:
        super().__init__(f"job {job_id} is for provider {provider}, not us")
        self.job_id = job_id


class DispatchMismatch(ProviderAgentError):
    """A dispatched job that the chain does not show as dispatched (not funded, other terms)."""

    def __init__(self, job_id: int, why: str) -> None:
        super().__init__(f"job {job_id} as dispatched is not on-chain: {why}")
        self.job_id = job_id


class OutputsMissing(ProviderAgentError):
    """A challenge names a job whose outputs this agent does not hold."""

    def __init__(self, job_id: int) -> None:
        super().__init__(f"no kept outputs for job {job_id}")
        self.job_id = job_id


class UploadFailed(ProviderAgentError):
    """The backend could not take a job's outputs now (transient); the upload stays pending."""

    def __init__(self, job_id: int, cause: ApiError) -> None:
        super().__init__(f"job {job_id}: output upload failed: {cause}")
        self.job_id = job_id


class UploadRefused(ProviderAgentError):
    """The backend refuses a job's outputs as such (a proof it rejects, another account)."""

    def __init__(self, job_id: int, cause: ApiError) -> None:
        super().__init__(f"job {job_id}: output upload refused: {cause}")
        self.job_id = job_id


@dataclass(frozen=True)
class JobOutcome:
    job_id: int
    status: str  # signed | already-committed | failed | refunded
    root: str | None = None
    item_count: int | None = None
    error: str | None = None
    tx_hash: str | None = None
    seconds: float | None = None
    uploaded: bool | None = None  # None: no backend to upload to, or no outputs kept here

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class Activity:
    """Hooks the mining supervisor and telemetry attach to: called around every model run."""

    started: list[Callable[[int], None]] = field(default_factory=list)
    finished: list[Callable[[int, int, float], None]] = field(default_factory=list)  # job, items, seconds


class OutputStore:
    """Each job's encoded outputs and digests, kept for challenges and uploads."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def job_dir(self, job_id: int) -> Path:
        return self.root / str(job_id)

    def save(self, job_id: int, outputs: list[bytes], digests: list[bytes]) -> None:
        final = self.job_dir(job_id)
        tmp = self.root / f".{job_id}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for i, data in enumerate(outputs):
            (tmp / f"{i}.out").write_bytes(data)
        (tmp / "digests.bin").write_bytes(b"".join(digests))
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)  # all or nothing: a half-written job dir is never read

    def digests(self, job_id: int) -> list[bytes] | None:
        path = self.job_dir(job_id) / "digests.bin"
        if not path.exists():
            return None
        raw = path.read_bytes()
        return [raw[i:i + 32] for i in range(0, len(raw), 32)]

    def output(self, job_id: int, index: int) -> bytes:
        return (self.job_dir(job_id) / f"{index}.out").read_bytes()

    def mark_uploaded(self, job_id: int) -> None:
        (self.job_dir(job_id) / "uploaded").touch()

    def uploaded(self, job_id: int) -> bool:
        return (self.job_dir(job_id) / "uploaded").exists()


# A chain view older than this (a long computation) is read again before a result is signed.
VIEW_FRESH_S = 5.0


@dataclass(frozen=True)
class ChainView:
    """The chain's word on a dispatched job, read beside the work: the job, the chain's time, and
    whether our stake can back a signed result (minimum bonded, nothing unbonding)."""

    job: JobView | None  # None: no such job on the escrow (or its events are not readable yet)
    now: int
    bonded: bool = True
    read_at: float = field(default_factory=time.monotonic)  # when the read began (time.monotonic)

    def now_estimate(self) -> int:
        """The chain's time now: the block time read plus the seconds since (rounded up)."""
        return self.now + math.ceil(time.monotonic() - self.read_at)

    @property
    def status(self) -> JobStatus:
        return JobStatus.NONE if self.job is None else self.job.status


@dataclass(frozen=True)
class _Fetched:
    """A job's spec and the cached, hash-checked files of its model and inputs."""

    spec: JobSpec
    model: Path
    inputs: list[Path]


class JobService:
    def __init__(self, chain: ProviderChain, cache: ContentCache, store: JobStore, outputs: OutputStore,
                 limits: Limits, backend: BackendClient | None = None,
                 activity: Activity | None = None, commit_margin_s: float = 30.0) -> None:
        self.chain = chain
        self.cache = cache
        self.store = store
        self.outputs = outputs
        self.limits = limits
        self.backend = backend
        self.activity = activity or Activity()
        # Chain seconds from signing to our commit being mined, at worst: the committer's latency
        # and batching interval, a few blocks. A result is signed only with this margin before
        # the deadline, and promises its commit by then (JobResult.commitBy).
        self.commit_margin_s = commit_margin_s
        self.signed: list[Callable[[int], None]] = []  # called with the job id once a result is signed
        # The chain check runs here, beside the work (one at a time is enough: one job runs at a time).
        self._checks = ThreadPoolExecutor(max_workers=2, thread_name_prefix="job-check")

    def process(self, job: EscrowJob) -> JobOutcome:
        job_id, began = job.id, time.monotonic()
        if job.provider.lower() != self.chain.address.lower():
            raise NotOurJob(job_id, job.provider)
        record = self.store.claim(job_id, job.deadline, job)
        # Submitted after the claim: the read's Python would share the interpreter with it.
        if record.status in (SIGNED, COMMITTED, FINALIZED, REFUNDED):
            return self._settle_known(job, record.status, self._read_chain(job))
        check = None
        try:
            fetched = self._fetch(job_id, job.spec_hash)
            check = self._checks.submit(self._read_chain, job)
            digests = self.outputs.digests(job_id) if record.status == COMPUTED else None
            seconds = None
            if digests is None:
                digests, seconds = self._compute(job_id, fetched)
        except JobFailed as failure:
            view = check.result() if check is not None else self._read_chain(job)
            self._require_funded_for_us(job, view)  # a failure report is a release too
            return self._fail_and_refund(job_id, failure)
        tree = MerkleTree.from_leaves(digests)
        self.store.update(job_id, COMPUTED, root=tree.root, item_count=len(digests))
        view = check.result()
        if view.status in (JobStatus.COMMITTED, JobStatus.FINALIZED, JobStatus.REFUNDED):
            return self._settle_known(job, COMPUTED, view)
        self._require_funded_for_us(job, view)
        if time.monotonic() - view.read_at > VIEW_FRESH_S:  # a long run: the job, stake and time again
            view = self._read_chain(job)
            if view.status in (JobStatus.COMMITTED, JobStatus.FINALIZED, JobStatus.REFUNDED):
                return self._settle_known(job, COMPUTED, view)
            self._require_funded_for_us(job, view)
        now = view.now_estimate()
        if now >= job.deadline:
            return self._fail_and_refund(job_id, JobFailed(job_id, "the deadline passed before the result"))
        commit_by = now + math.ceil(self.commit_margin_s)
        if commit_by >= job.deadline:
            return self._fail_and_refund(job_id, JobFailed(
                job_id, f"the deadline ({job.deadline}) leaves no time to commit: the commit could not be "
                        f"promised before {commit_by} (chain time {now} plus a {self.commit_margin_s:.0f} s margin)"))
        if not view.bonded:
            return self._fail_and_refund(job_id, JobFailed(
                job_id, "our stake cannot back a signed result (below the minimum, or unbonding)"))
        result = JobResult(job_id, "0x" + tree.root.hex(), len(digests), "0x" + keccak256(b"".join(digests)).hex(),
                           commit_by)
        signed = SignedJobResult.sign(result, self.chain.escrow_domain(), self.chain.account)
        self.store.update(job_id, SIGNED, result_digest=bytes.fromhex(result.result_digest[2:]),
                          signature=signed.signature, commit_by=commit_by)
        for hook in self.signed:
            hook(job_id)
        logger.info("job %s: result signed %.2f s after the dispatch arrived (root %s over %d items); commit queued, "
                    "promised by %d (deadline %d)", job_id, time.monotonic() - began, result.output_root,
                    result.item_count, commit_by, job.deadline)
        return JobOutcome(job_id, "signed", result.output_root, result.item_count, seconds=seconds,
                          uploaded=self._upload_if_pending(job_id))

    def _read_chain(self, job: EscrowJob) -> ChainView:
        return ChainView(*self.chain.dispatched_job(job))

    def _require_funded_for_us(self, job: EscrowJob, view: ChainView) -> None:
        """Releases nothing for a job the chain does not show funded, ours, with the dispatched
        spec, price and deadline: records it rejected, deletes its outputs and raises."""
        onchain = view.job
        if onchain is None:
            error: ProviderAgentError = UnknownJob(job.id)
        elif onchain.provider.lower() != self.chain.address.lower():
            error = NotOurJob(job.id, onchain.provider)
        elif onchain.status not in (JobStatus.FUNDED, JobStatus.ACCEPTED):
            error = DispatchMismatch(job.id, f"status {onchain.status.name} on-chain, not funded")
        elif (onchain.spec_hash, onchain.deadline, onchain.price) != (job.spec_hash, job.deadline, job.price):
            error = DispatchMismatch(job.id, "spec hash, deadline or price differ from the chain's")
        else:
            return
        self.store.update(job.id, REJECTED, error=str(error))
        shutil.rmtree(self.outputs.job_dir(job.id), ignore_errors=True)
        logger.error("job %s: nothing released: %s", job.id, error)
        raise error

    def _settle_known(self, job: EscrowJob, local: str, view: ChainView) -> JobOutcome:
        """A job found signed, settled or refunded (a redelivery, a restart): nothing is computed
        again. A signed one waits for the committer; a settled one's outputs are offered to the
        backend again: a backend that lost them (a database rebuilt from events) is asked what it
        holds instead of trusting our "uploaded" marker, or verifiers would find them missing."""
        job_id, onchain = job.id, view.job
        if onchain is not None and onchain.status in (JobStatus.COMMITTED, JobStatus.FINALIZED):
            settled = FINALIZED if onchain.status == JobStatus.FINALIZED else COMMITTED
            self.store.update(job_id, settled, root=onchain.output_root, item_count=onchain.item_count)
            logger.info("job %s: already committed on-chain (root 0x%s)", job_id, onchain.output_root.hex())
            return JobOutcome(job_id, "already-committed", "0x" + onchain.output_root.hex(), onchain.item_count,
                              uploaded=self._upload_if_pending(job_id, recheck=True))
        if view.status == JobStatus.REFUNDED:
            self.store.update(job_id, REFUNDED)
            return JobOutcome(job_id, "refunded")
        self._require_funded_for_us(job, view)
        record = self.store.get(job_id)
        assert record is not None and record.root is not None
        for hook in self.signed:  # the committer may have missed it (a restart)
            hook(job_id)
        return JobOutcome(job_id, "signed", "0x" + record.root.hex(), record.item_count,
                          uploaded=self._upload_if_pending(job_id, recheck=True))

    def signed_result(self, job_id: int) -> SignedJobResult | None:
        """The result this agent signed for the job (None: none signed here)."""
        record = self.store.get(job_id)
        if record is None or record.signature is None or record.root is None or record.result_digest is None:
            return None
        if record.commit_by is None:
            return None
        result = JobResult(job_id, "0x" + record.root.hex(), record.item_count or 0, "0x" + record.result_digest.hex(),
                           record.commit_by)
        return SignedJobResult(result, self.chain.address, record.signature)

    def _fetch(self, job_id: int, spec_hash: bytes) -> _Fetched:
        """The job's spec, model and inputs, each fetched and hash-checked (BadJobInput when
        one is not what its hash says or the spec is not for us)."""
        try:
            spec = JobSpec.parse(self.cache.read("0x" + spec_hash.hex()))
        except ContentUnavailable:
            raise  # the backend is down, not the job: the task is retried
        except ContentError as exc:
            raise BadJobInput(job_id, f"spec: {exc}") from exc
        except JobSpecError as exc:
            raise BadJobInput(job_id, f"malformed spec: {exc}") from exc
        if spec.provider != self.chain.address.lower():
            raise BadJobInput(job_id, f"the spec names provider {spec.provider}")
        try:  # everything is fetched and hash-checked before the model runs
            return _Fetched(spec, self.cache.path(spec.model), [self.cache.path(name) for name in spec.inputs])
        except ContentUnavailable:
            raise
        except ContentError as exc:
            raise BadJobInput(job_id, str(exc)) from exc

    def _compute(self, job_id: int, fetched: _Fetched) -> tuple[list[bytes], float]:
        from protocol.jobs import output_digest

        for hook in self.activity.started:
            hook(job_id)
        items, seconds = 0, 0.0
        spec = fetched.spec
        try:
            run = run_inference(job_id, fetched.model, spec.model_format, fetched.inputs, spec.batch_size,
                                self.limits)
            items, seconds = len(run.outputs), run.seconds
        finally:
            for hook in self.activity.finished:
                hook(job_id, items, seconds)
        digests = [output_digest(data) for data in run.outputs]
        self.outputs.save(job_id, run.outputs, digests)
        return digests, run.seconds

    def _fail_and_refund(self, job_id: int, failure: JobFailed) -> JobOutcome:
        logger.warning("job %s failed: %s", job_id, failure)
        self.store.update(job_id, FAILED, error=f"{failure.kind}: {failure.message}")
        if self.backend is not None:
            try:  # informational (the refund is on-chain): a lost report is logged, not retried
                self.backend.report_failure(job_id, failure.kind, failure.message)
            except ApiError as exc:
                logger.warning("job %s: failure report to the backend failed: %s", job_id, exc)
        refunded = self.refund_failed()
        status = "refunded" if job_id in refunded else "failed"
        return JobOutcome(job_id, status, error=f"{failure.kind}: {failure.message}")

    def refund_failed(self) -> list[int]:
        """Refunds the renter of every failed job the escrow still holds: `failJob` with the
        recorded reason (at once), or `refundExpired` once the deadline has passed. A refusal or
        an unreachable node leaves the record failed for the next call. Returns the jobs the
        chain now shows refunded."""
        failed = self.store.with_status(FAILED)
        if not failed:  # every heartbeat calls this: no failed job, no chain read
            return []
        now, done = self.chain.now(), []
        escrow = self.chain.contract("JobEscrow")
        for record in failed:
            job = self.chain.job(JobId(record.job_id))
            if job.status in (JobStatus.FUNDED, JobStatus.ACCEPTED) and not job.frozen:
                try:
                    if now >= job.deadline:
                        receipt = self.chain.refund_expired(JobId(record.job_id))
                    else:
                        reason = failure_reason(record.error or "failed")
                        receipt = self.chain.send(escrow.functions.failJob(job.job.as_tuple(), reason),
                                                  f"failJob {record.job_id}")
                except TransactionReverted as exc:  # e.g. the deadline passed between our read and the tx
                    logger.warning("job %s: refund refused, retried next time: %s", record.job_id, exc.reason)
                    continue
                logger.info("job %s: failed on-chain, renter refunded in full (tx %s)", record.job_id,
                            receipt["transactionHash"].hex())
            elif job.status != JobStatus.REFUNDED:
                continue
            self.store.update(record.job_id, REFUNDED)
            done.append(record.job_id)
        return done

    def answer_challenge(self, challenge_id: ChallengeId) -> str:
        """Reveals the challenged items' digests with inclusion proofs; returns the tx hash."""
        c = self.chain.challenge(challenge_id)
        if c.kind != ChallengeKind.JOB:
            raise ProviderAgentError(f"challenge {challenge_id} is not a job challenge")
        job_id = JobId(c.subject)
        digests = self.outputs.digests(job_id)
        if digests is None:
            raise OutputsMissing(job_id)
        tree = MerkleTree.from_leaves(digests)
        if tree.root != c.root:
            raise ProviderAgentError(f"challenge {challenge_id}: kept outputs of job {job_id} do not match "
                                     f"the committed root 0x{c.root.hex()}")
        indices = self.chain.challenge_indices(challenge_id)
        receipt = self.chain.respond(challenge_id, [digests[i] for i in indices],
                                     [list(tree.proof(i)) for i in indices])
        logger.info("challenge %s on job %s answered: %d items revealed", challenge_id, job_id, len(indices))
        return receipt["transactionHash"].hex()

    def pending_uploads(self) -> list[int]:
        """Signed or committed jobs whose outputs are kept here but not all held by the backend yet."""
        if self.backend is None:
            return []
        return [r.job_id for r in self.store.with_status(SIGNED, COMMITTED)
                if self.outputs.digests(r.job_id) is not None and not self.outputs.uploaded(r.job_id)]

    def _upload_groups(self, job_id: int, tree: MerkleTree,
                       indices: list[int]) -> Iterator[list[tuple[int, bytes, tuple]]]:
        """The items to upload, as (index, bytes, proof), in groups that fit one request of
        several items (PUT /jobs/{id}/outputs, base64 in JSON); a larger item goes alone. Each
        output is read as its group is formed, not all at once."""
        items = ((index, self.outputs.output(job_id, index), tuple(tree.proof(index))) for index in indices)
        return request_groups(items, _upload_cost, MAX_OUTPUTS_BODY_BYTES)

    def _upload_if_pending(self, job_id: int, recheck: bool = False) -> bool | None:
        """Uploads right after signing (`recheck`: whatever the backend lacks, even if all was
        sent once); a failure is logged and leaves the upload pending."""
        if self.backend is None or self.outputs.digests(job_id) is None:
            return None
        if self.outputs.uploaded(job_id) and not recheck:
            return True
        try:
            self.upload_outputs(job_id, fresh=not recheck)
        except UploadFailed as exc:  # the worker's upload task tries again shortly
            logger.warning("%s; outputs kept on disk, upload pending", exc)
            return False
        except UploadRefused as exc:
            logger.error("%s; outputs kept on disk, upload pending", exc)
            return False
        return True

    def upload_outputs(self, job_id: int, fresh: bool = False) -> int:
        """Hands the backend the signed result (when this agent signed one) and every item it
        does not hold yet, each with its inclusion proof under the signed (or committed) root;
        one try (the worker's upload task retries it with a countdown). `fresh`: the result was
        only now delivered, so every item goes without asking what the backend holds (a request
        per job saved; an item it held anyway is stored once). Returns the number of items sent;
        raises UploadFailed (transient) or UploadRefused."""
        if self.backend is None:
            return 0
        digests = self.outputs.digests(job_id)
        if digests is None:
            raise OutputsMissing(job_id)
        tree = MerkleTree.from_leaves(digests)
        try:
            sent = 0
            groups = None
            if fresh:  # nothing asked: every item goes
                groups = self._upload_groups(job_id, tree, list(range(len(digests))))
            if (signed := self.signed_result(job_id)) is not None:
                # The first request's worth of items rides with the result (one request for a job
                # of small outputs), unless it is one item too large to share a body.
                along = next(groups, []) if groups is not None else []
                if sum(map(_upload_cost, along)) > MAX_OUTPUTS_BODY_BYTES:
                    groups, along = itertools.chain([along], groups), []
                if self.backend.deliver_result(signed.to_json(), along):
                    sent += len(along)
                elif along:  # a backend of an earlier version ignored them
                    groups = itertools.chain([along], groups)
            if groups is None:
                held = self.backend.uploaded_items(job_id)
                groups = self._upload_groups(job_id, tree, sorted(set(range(len(digests))) - held))
            for group in groups:
                if len(group) == 1:
                    self.backend.upload_output(job_id, *group[0])
                else:
                    self.backend.upload_outputs(job_id, group)
                sent += len(group)
        except BackendUnavailable as exc:
            raise UploadFailed(job_id, exc) from exc
        except BackendRefused as exc:
            raise UploadRefused(job_id, exc) from exc
        self.outputs.mark_uploaded(job_id)
        logger.info("job %s: %d of %d item outputs uploaded with proofs", job_id, sent, len(digests))
        return sent
