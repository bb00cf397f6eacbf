"""Taking a paid job from the escrow to a committed Merkle root, idempotently.

`JobService.process(job_id)` may be called any number of times for the same job (a redelivered
Celery message, a restarted worker): the chain's job status and the local record decide what is
left to do, and the escrow accepts one commit per job, so a job is committed at most once.
Order of work: read the job on-chain; fetch and check the spec, the model and every input
(before accepting, so a job we cannot run is never taken); accept; run the model in a limited
child; write every output and the digests to disk; then commit. Outputs are on disk before the
commit, so a worker killed after committing still answers challenges.

A job that cannot be done is recorded as failed with its reason and reported to the backend;
the renter's refund is `refundExpired`, which the escrow allows once the deadline has passed
(`refund_failed` calls it for every failed job that is due).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from protocol.jobs import JobSpec, JobSpecError
from protocol.merkle import MerkleTree, keccak256
from provider_agent import ProviderAgentError
from provider_agent.cache import ContentCache, ContentError
from provider_agent.chain import ChainRevert, ChallengeId, JobId, JobStatus, ProviderChain
from provider_agent.runner import BadJobInput, JobFailed, Limits, run_inference
from provider_agent.state import COMMITTED, COMPUTED, FAILED, REFUNDED, JobStore

logger = logging.getLogger(__name__)

JOB_CHALLENGE_KIND = 2  # IChallengeManager.Kind.Job


class NotOurJob(ProviderAgentError):
    def __init__(self, job_id: int, provider: str) -> None:
        super().__init__(f"job {job_id} is for provider {provider}, not us")
        self.job_id = job_id


class OutputsMissing(ProviderAgentError):
    """A challenge names a job whose outputs this agent does not hold."""

    def __init__(self, job_id: int) -> None:
        super().__init__(f"no kept outputs for job {job_id}")
        self.job_id = job_id


@dataclass(frozen=True)
class JobOutcome:
    job_id: int
    status: str  # committed | already-committed | failed | refunded | skipped
    root: str | None = None
    item_count: int | None = None
    error: str | None = None
    tx_hash: str | None = None
    seconds: float | None = None

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


class JobService:
    def __init__(self, chain: ProviderChain, cache: ContentCache, store: JobStore, outputs: OutputStore,
                 limits: Limits, work_root: Path, backend_url: str | None = None,
                 activity: Activity | None = None) -> None:
        self.chain = chain
        self.cache = cache
        self.store = store
        self.outputs = outputs
        self.limits = limits
        self.work_root = work_root
        self.backend_url = backend_url.rstrip("/") if backend_url else None
        self.activity = activity or Activity()

    def process(self, job_id: JobId) -> JobOutcome:
        job = self.chain.job(job_id)
        if job.status == JobStatus.NONE:
            raise ChainRevert(f"job {job_id}", "unknown job")
        if job.provider.lower() != self.chain.address.lower():
            raise NotOurJob(job_id, job.provider)
        if job.status in (JobStatus.COMMITTED, JobStatus.FINALIZED):
            self.store.update(job_id, COMMITTED, root=job.output_root, item_count=job.item_count)
            logger.info("job %s: already committed on-chain (root 0x%s); nothing to do", job_id, job.output_root.hex())
            return JobOutcome(job_id, "already-committed", "0x" + job.output_root.hex(), job.item_count)
        if job.status == JobStatus.REFUNDED:
            self.store.update(job_id, REFUNDED)
            return JobOutcome(job_id, "refunded")
        record = self.store.claim(job_id, job.deadline)
        if self.chain.now() >= job.deadline:
            return self._fail_and_refund(job_id, JobFailed(job_id, "the deadline passed before the result"))
        try:
            spec = self._spec(job_id, job.spec_hash)
            if job.status == JobStatus.FUNDED:
                self.chain.accept_job(job_id)
            digests = self.outputs.digests(job_id) if record.status == COMPUTED else None
            seconds = None
            if digests is None:
                digests, seconds = self._compute(job_id, spec)
        except JobFailed as failure:
            return self._fail_and_refund(job_id, failure)
        tree = MerkleTree.from_leaves(digests)
        self.store.update(job_id, COMPUTED, root=tree.root, item_count=len(digests))
        try:
            receipt = self.chain.commit_result(job_id, tree.root, len(digests), keccak256(b"".join(digests)))
        except ChainRevert:
            # A commit that raced ours (an earlier attempt's transaction mined after all) is fine.
            if self.chain.job(job_id).status in (JobStatus.COMMITTED, JobStatus.FINALIZED):
                self.store.update(job_id, COMMITTED)
                return JobOutcome(job_id, "already-committed", "0x" + tree.root.hex(), len(digests))
            raise
        self.store.update(job_id, COMMITTED)
        self._upload(job_id, len(digests))
        return JobOutcome(job_id, "committed", "0x" + tree.root.hex(), len(digests),
                          tx_hash=receipt.transactionHash.hex(), seconds=seconds)

    def _spec(self, job_id: int, spec_hash: bytes) -> JobSpec:
        try:
            spec = JobSpec.parse(self.cache.read("0x" + spec_hash.hex()))
        except ContentError as exc:
            raise BadJobInput(job_id, f"spec: {exc}") from exc
        except JobSpecError as exc:
            raise BadJobInput(job_id, f"malformed spec: {exc}") from exc
        if spec.provider != self.chain.address.lower():
            raise BadJobInput(job_id, f"the spec names provider {spec.provider}")
        try:  # everything is fetched and hash-checked before the job is accepted
            self.cache.path(spec.model)
            for name in spec.inputs:
                self.cache.path(name)
        except ContentError as exc:
            raise BadJobInput(job_id, str(exc)) from exc
        return spec

    def _compute(self, job_id: int, spec: JobSpec) -> tuple[list[bytes], float]:
        from protocol.jobs import output_digest

        for hook in self.activity.started:
            hook(job_id)
        items, seconds = 0, 0.0
        try:
            run = run_inference(job_id, self.cache.path(spec.model), spec.model_format,
                                [self.cache.path(h) for h in spec.inputs], spec.batch_size, self.limits,
                                self.work_root / str(job_id))
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
        self.report(f"/jobs/{job_id}/failure", {"jobId": job_id, "kind": failure.kind, "error": failure.message})
        refunded = self.refund_failed()
        status = "refunded" if job_id in refunded else "failed"
        return JobOutcome(job_id, status, error=f"{failure.kind}: {failure.message}")

    def refund_failed(self) -> list[int]:
        """Calls refundExpired for every failed job whose deadline has passed; returns them."""
        now, done = self.chain.now(), []
        for record in self.store.all():
            if record.status != FAILED or record.deadline is None or now < record.deadline:
                continue
            job = self.chain.job(JobId(record.job_id))
            if job.status in (JobStatus.FUNDED, JobStatus.ACCEPTED):
                receipt = self.chain.refund_expired(JobId(record.job_id))
                logger.info("job %s: renter refunded (tx %s)", record.job_id, receipt.transactionHash.hex())
            if job.status in (JobStatus.FUNDED, JobStatus.ACCEPTED, JobStatus.REFUNDED):
                self.store.update(record.job_id, REFUNDED)
                done.append(record.job_id)
        return done

    def answer_challenge(self, challenge_id: ChallengeId) -> str:
        """Reveals the challenged items' digests with inclusion proofs; returns the tx hash."""
        c = self.chain.challenge(challenge_id)
        if c["kind"] != JOB_CHALLENGE_KIND:
            raise ProviderAgentError(f"challenge {challenge_id} is not a job challenge")
        job_id = c["subject"]
        digests = self.outputs.digests(job_id)
        if digests is None:
            raise OutputsMissing(job_id)
        tree = MerkleTree.from_leaves(digests)
        if tree.root != c["root"]:
            raise ProviderAgentError(f"challenge {challenge_id}: kept outputs of job {job_id} do not match "
                                     f"the committed root 0x{c['root'].hex()}")
        indices = self.chain.challenge_indices(challenge_id)
        receipt = self.chain.respond(challenge_id, [digests[i] for i in indices],
                                     [list(tree.proof(i)) for i in indices])
        logger.info("challenge %s on job %s answered: %d items revealed", challenge_id, job_id, len(indices))
        return receipt.transactionHash.hex()

    def _upload(self, job_id: int, item_count: int) -> None:
        """Sends the outputs to the backend (best effort: they stay on disk for challenges)."""
        if not self.backend_url:
            return
        try:
            files = {str(i): self.outputs.output(job_id, i) for i in range(item_count)}
            with httpx.Client(timeout=60) as client:
                for index, data in files.items():
                    client.put(f"{self.backend_url}/jobs/{job_id}/outputs/{index}", content=data).raise_for_status()
        except httpx.HTTPError as exc:
            logger.warning("job %s: output upload failed (%s); outputs kept on disk", job_id, exc)

    def report(self, path: str, body: dict) -> None:
        if not self.backend_url:
            return
        try:
            httpx.post(self.backend_url + path, content=json.dumps(body), timeout=10,
                       headers={"content-type": "application/json"})
        except httpx.HTTPError as exc:
            logger.warning("report to %s failed: %s", path, exc)

