"""Auditing committed jobs: sample, prove, re-execute, challenge, and carry the challenge through.

For every job whose result is committed and whose challenge window is still open (found from
ResultCommitted events, so a restarted verifier sees the same jobs), once per job:
1. the spec is fetched from the backend and checked against the on-chain specHash;
2. k items are sampled (`sampling.sample_size`: a provider who corrupted 10% of its items is
   caught with probability 0.99); each sampled output must be uploaded, hash to its digest and
   prove inclusion under the on-chain output root;
3. the sampled items are re-executed (whole batches, in a limited child) and compared under the
   spec's tolerance.
An unprovable output or a mismatch, or an output still missing half way through the window
(the provider uploads after its commit), files `challengeJob` with the minimum bond and the
contract's maximum k (the contract draws the challenged indices; more draws make it likelier
that they hit a bad item). Once the provider answers, the revealed digests are judged the way a
committee member judges them (`judge_answer`); a fault found there escalates to the committee,
none lets the challenge settle. Our own failures (backend or node down, the model failing here)
are retried with backoff, then given up: they never cost a bond.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

import numpy as np
from eth_typing import HexStr
from hexbytes import HexBytes

from client.backend_http import BackendRefused, BackendUnavailable
from client.contracts import emitted
from client.errors import NodeUnavailable, TransactionReverted
from client.escrow_jobs import JobView, read_job, read_job_views
from client.watched_ids import WatchedIds
from protocol.enums import ChallengeKind, ChallengeStatus, JobStatus
from protocol.errors import ProtocolError
from protocol.ids import ChallengeId, JobId
from protocol.inference import batches_holding
from protocol.jobs import JobSpec, JobSpecError, decode_output, encode_output, output_digest, within_tolerance
from protocol.merkle import leaf_hash, verify_inclusion
from verifier import VerifierError
from verifier.audit_draw import AuditDraw
from verifier.backend_client import VerifierBackend
from verifier.chain import VerifierChain
from verifier.reexec import Batch, ReexecFailed, ReexecLimits, reexecute
from verifier.sampling import MAX_K, sample_items, sample_size
from verifier.watch import COMMITTED_JOB, JOB_CHALLENGE, answer_events, watch_chain

logger = logging.getLogger(__name__)


class AuditError(VerifierError):
    """An audit step failed for a reason of ours (not evidence against the provider)."""


class SpecMismatch(AuditError):
    """The backend's spec does not hash to the job's on-chain specHash."""


class OutputsPending(VerifierError):
    """Sampled outputs are not uploaded yet, early in the window: the provider uploads them
    after its commit (and retries while the backend catches up), so this is no evidence yet."""

    def __init__(self, job_id: int, missing: tuple[int, ...], grace_end: int) -> None:
        super().__init__(f"job {job_id}: outputs {list(missing)} not uploaded yet; waiting until {grace_end}")


class ReportFields(TypedDict):
    """An audit's evidence as VerifierBackend.report takes it (its keyword arguments)."""

    indices: list[int]
    expected: list[str | None]
    received: list[str | None]


@dataclass(frozen=True)
class Evidence:
    """What one audit or judgement found, item by item (hex digests, for the log)."""

    missing: tuple[int, ...] = ()  # no output uploaded
    unprovable: tuple[int, ...] = ()  # output does not hash to its digest or prove inclusion
    mismatched: tuple[tuple[int, str, str], ...] = ()  # (index, expected digest, received digest)
    note: str = ""  # a fault of the whole result (e.g. the wrong item count)
    checked: tuple[int, ...] = ()  # every index judged

    def report_fields(self) -> ReportFields:
        """The evidence as the backend's report takes it: the faulty indices with the expected
        and received digests (null where an item is missing or unprovable), or the checked
        indices alone when all is well."""
        faulty: dict[int, tuple[str | None, str | None]] = {i: (None, None) for i in self.missing + self.unprovable}
        faulty.update({i: (expected, received) for i, expected, received in self.mismatched})
        if not faulty:
            return {"indices": list(self.checked), "expected": [], "received": []}
        order = sorted(faulty)
        return {"indices": order, "expected": [faulty[i][0] for i in order],
                "received": [faulty[i][1] for i in order]}

    @property
    def faulty(self) -> bool:
        return bool(self.missing or self.unprovable or self.mismatched or self.note)

    def describe(self) -> str:
        parts = [self.note] if self.note else []
        if self.missing:
            parts.append(f"missing {list(self.missing)}")
        if self.unprovable:
            parts.append(f"unprovable {list(self.unprovable)}")
        for index, expected, received in self.mismatched:
            parts.append(f"item {index}: expected {expected} received {received}")
        return "; ".join(parts) or "every item matches"


@dataclass
class JobReexecutor:
    """Re-executes items of a job with its own model and inputs, fetched from the backend."""

    backend: VerifierBackend
    limits: ReexecLimits
    work_dir: Path
    # Outputs already computed, by (spec hash, item): the spec fixes the model and inputs, so an
    # audit's results serve the later judgement of the provider's answer (and a committee vote)
    # without starting the model again inside a challenge's short windows.
    cache_items: int = 4096
    # Models by content hash, the most recent first: a market runs few models over many jobs,
    # and each audit fetched its job's model again (a request and the model's bytes each time).
    model_cache_bytes: int = 512 << 20
    _outputs: OrderedDict[tuple[bytes, int], np.ndarray] = field(default_factory=OrderedDict, repr=False)
    _models: OrderedDict[bytes, bytes] = field(default_factory=OrderedDict, repr=False)
    # Audits run in parallel (JobAuditor.parallel): the caches are shared, and one model runs at a
    # time, since each run beside another would start a warm template of its own (a torch import).
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _run_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def spec(self, job_id: int, spec_hash: bytes) -> JobSpec:
        raw = self.backend.content(spec_hash)  # checked against the hash, so it is the funded spec
        try:
            spec = JobSpec.parse(raw)
        except JobSpecError as exc:
            raise SpecMismatch(f"job {job_id}: spec 0x{spec_hash.hex()} does not parse: {exc}") from exc
        if spec.spec_hash != spec_hash:
            raise SpecMismatch(f"job {job_id}: spec is not canonical for 0x{spec_hash.hex()}")
        return spec

    def run(self, job_id: int, spec: JobSpec, indices: list[int]) -> dict[int, np.ndarray]:
        """Outputs of `indices` (whole batches are run; only `indices` are returned)."""
        with self._lock:
            missing = sorted({i for i in indices if (spec.spec_hash, i) not in self._outputs})
        outputs = {}
        if missing:
            ranges = batches_holding(missing, spec.batch_size, len(spec.inputs))
            model = self.model(bytes.fromhex(spec.model[2:]))
            inputs = self.backend.inputs(job_id, {i: bytes.fromhex(spec.inputs[i][2:]) for r in ranges for i in r})
            batches = [Batch(r.start, tuple(inputs[i] for i in r)) for r in ranges]
            with self._run_lock:
                outputs = reexecute(job_id, model, spec.model_format, batches, self.limits,
                                    self.work_dir / str(job_id))
        with self._lock:
            for i, output in outputs.items():
                self._outputs[(spec.spec_hash, i)] = output
            result = {}
            for i in indices:
                self._outputs.move_to_end((spec.spec_hash, i))
                result[i] = self._outputs[(spec.spec_hash, i)]
            while len(self._outputs) > self.cache_items:
                self._outputs.popitem(last=False)
        return result

    def model(self, content_hash: bytes) -> bytes:
        """The model's bytes (checked against their hash when fetched), kept up to
        model_cache_bytes; one larger than that is fetched for each use."""
        with self._lock:
            if (data := self._models.get(content_hash)) is not None:
                self._models.move_to_end(content_hash)
                return data
        data = self.backend.content(content_hash)
        if len(data) <= self.model_cache_bytes:
            with self._lock:
                self._models[content_hash] = data
                while sum(map(len, self._models.values())) > self.model_cache_bytes:
                    self._models.popitem(last=False)
        return data


def check_outputs(backend: VerifierBackend, reexec: JobReexecutor, job_id: int, spec: JobSpec, root: bytes,
                  item_count: int, indices: list[int], revealed: dict[int, bytes] | None = None) -> Evidence:
    """Judges items of a committed job: each must have an uploaded output that hashes to its
    digest (the revealed one when given), proves inclusion under `root`, and matches our own
    re-execution under the spec's tolerance."""
    result = backend.result(job_id)
    missing, unprovable, proven = [], [], {}
    uploaded = []
    for index in sorted(set(indices)):
        item = result.items.get(index)
        digest = revealed.get(index) if revealed is not None else (item.digest if item else None)
        if item is None or item.digest is None or digest is None:
            missing.append(index)
            continue
        uploaded.append((index, item, digest))
    outputs = backend.outputs(job_id, [index for index, _, _ in uploaded])
    for index, item, digest in uploaded:
        data = outputs.get(index)
        if data is None:  # listed in the result, gone from the answer: as good as not uploaded
            missing.append(index)
            continue
        try:
            if output_digest(data) != digest:
                raise ProtocolError(f"output hashes to 0x{output_digest(data).hex()}, not 0x{digest.hex()}")
            verify_inclusion(leaf_hash(digest), index, item_count, list(item.proof), root)
            proven[index] = (data, decode_output(data))
        except (ProtocolError, JobSpecError) as exc:
            logger.info("job %s item %s: unprovable output: %s", job_id, index, exc)
            unprovable.append(index)
    mismatched = []
    if proven:
        ours = reexec.run(job_id, spec, sorted(proven))
        for index, (data, received) in proven.items():
            if not within_tolerance(received, ours[index], spec.tolerance_ppm):
                expected = "0x" + output_digest(encode_output(ours[index])).hex()
                mismatched.append((index, expected, "0x" + output_digest(data).hex()))
    return Evidence(tuple(missing), tuple(unprovable), tuple(mismatched), checked=tuple(sorted(set(indices))))


def revealed_digests(chain: VerifierChain, challenge_id: int) -> dict[int, bytes]:
    """The digests the provider revealed on-chain for a challenge: index -> digest, read from
    its `respond` transaction (the contract verified their inclusion before accepting it)."""
    manager = chain.contract("ChallengeManager")
    answers = answer_events(chain, challenge_id)
    if not answers:
        raise AuditError(f"challenge {challenge_id}: no ChallengeAnswered event")
    tx = chain.web3.eth.get_transaction(HexStr(answers[0].tx_hash))
    _, args = manager.decode_function_input(tx["input"])
    indices = manager.functions.challengeIndices(challenge_id).call()
    return {int(i): bytes(HexBytes(leaf)) for i, leaf in zip(indices, args["leaves"], strict=True)}


def judge_answer(chain: VerifierChain, backend: VerifierBackend, reexec: JobReexecutor,
                 challenge_id: int) -> tuple[int, Evidence]:
    """Whether an answered job challenge shows a fault: the revealed items are judged like an
    audit's samples (uploaded, same digest as revealed, re-executed within tolerance).
    Returns (job id, evidence). Used by the challenger and by committee members alike."""
    c = chain.contract("ChallengeManager").functions.challenge(challenge_id).call()
    if c.kind != ChallengeKind.JOB:
        raise AuditError(f"challenge {challenge_id} is not a job challenge")
    job_id = c.subject
    job = read_job(chain.contract("JobEscrow"), job_id, chain.deployment.contract("JobEscrow").block)
    spec = reexec.spec(job_id, job.spec_hash)
    revealed = revealed_digests(chain, challenge_id)
    return job_id, check_outputs(backend, reexec, job_id, spec, c.root, c.leafCount, list(revealed), revealed)


def audit_order(due: list[tuple[JobId, JobView]],
                must_audit: Callable[[tuple[JobId, JobView]], bool]) -> list[tuple[JobId, JobView]]:
    """A tick's audits in the order the pool takes them: every job that must be audited, then the
    others (capacity left over), each group by the end of its window (the closest first). Those the
    pool does not reach before their windows close are skipped by the audit itself."""
    def closing(entry: tuple[JobId, JobView]) -> int:
        return entry[1].challengeWindowEnd
    drawn = sorted((e for e in due if must_audit(e)), key=closing)
    return drawn + sorted((e for e in due if not must_audit(e)), key=closing)


@dataclass
class _Retry:
    attempts: int = 0
    next_at: float = 0.0


@dataclass
class JobAuditor:
    """Audits committed jobs and follows the job challenges this verifier opened."""

    chain: VerifierChain
    backend: VerifierBackend
    reexec: JobReexecutor
    rng: random.Random = field(default_factory=random.SystemRandom)
    corrupted: float = 0.10
    confidence: float = 0.99
    max_attempts: int = 5
    backoff_s: float = 5.0
    done: set[int] = field(default_factory=set)
    not_escalating: set[int] = field(default_factory=set)  # answered challenges left to settle
    record: Callable[[str], None] = lambda event: None  # counts outcomes (the service's metrics)
    watch: WatchedIds | None = None  # default: in memory (the service shares its own)
    # Audits at once: an audit mostly waits on the backend (a dozen requests), so one at a time
    # left half the jobs of a busy market unaudited when their windows closed.
    parallel: int = 4
    # Which jobs must be audited (verifier.audit_draw); None: every one. The others are audited
    # only with capacity left over, so a busy market still audits every drawn job in its window.
    draw: AuditDraw | None = None
    _retries: dict[int, _Retry] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.watch is None:
            self.watch = watch_chain(self.chain, None)
        self._audits = ThreadPoolExecutor(max_workers=self.parallel, thread_name_prefix="audit")
        self.escrow = self.chain.contract("JobEscrow")
        self.manager = self.chain.contract("ChallengeManager")

    # -- audits -----------------------------------------------------------------------------

    def committed_jobs(self) -> list[int]:
        """Jobs committed since the cursor and those not done yet (done ones are forgotten)."""
        assert self.watch is not None
        self.watch.refresh()
        ids = self.watch.ids(COMMITTED_JOB)
        self.watch.forget(COMMITTED_JOB, self.done.intersection(ids))
        return [i for i in ids if i not in self.done]

    def tick(self) -> None:
        """Audits every due job once (`parallel` at a time, the oldest first), then moves our own
        job challenges towards their end."""
        now, due = self.chain.now(), []
        ready = [job_id for job_id in self.committed_jobs()
                 if job_id not in self.done and self._retries.get(job_id, _Retry()).next_at <= time.monotonic()]
        # All of them in a few reads (slots batched, one event query per kind), not four per job.
        views = read_job_views(self.escrow, ready, self.chain.deployment.contract("JobEscrow").block)
        for job_id in ready:
            job = views[job_id]
            if job.status != JobStatus.COMMITTED or job.frozen or now >= job.challengeWindowEnd \
                    or self.chain.address in (job.renter, job.provider):
                self.done.add(job_id)  # finished, challenged by someone else, or ours: nothing to audit
                continue
            due.append((JobId(job_id), job))
        audits = [self._audits.submit(self._attempt, job_id, job)
                  for job_id, job in audit_order(due, lambda entry: self.must_audit(*entry))]
        wait(audits)  # all end before an unexpected error ends the tick: none runs into the next
        for audit in audits:
            audit.result()
        for challenge_id in self.own_challenges():
            self.follow_up(ChallengeId(challenge_id))

    def must_audit(self, job_id: int, job: JobView) -> bool:
        """Whether the job was drawn for a mandatory audit (every job without a draw)."""
        return self.draw is None or self.draw.must_audit(self.escrow.address, job_id, job.price, job.itemCount)

    def _attempt(self, job_id: JobId, job: JobView) -> None:
        try:
            evidence = self.audit(job_id, job)
            self.done.add(job_id)
            self.record("challenged" if evidence.faulty else "passed")
            self._retries.pop(job_id, None)
        except (BackendUnavailable, NodeUnavailable, OSError) as exc:
            retry = self._retries.setdefault(job_id, _Retry())
            retry.attempts += 1
            if retry.attempts >= self.max_attempts:
                logger.warning("job %s: audit given up after %d attempts, no bond at risk: %s",
                               job_id, retry.attempts, exc)
                self.done.add(job_id)
                self.record("given-up")
            else:
                retry.next_at = time.monotonic() + self.backoff_s * 2 ** (retry.attempts - 1)
                logger.info("job %s: audit deferred (attempt %d): %s", job_id, retry.attempts, exc)
        except OutputsPending as exc:
            self._retries.setdefault(job_id, _Retry()).next_at = time.monotonic() + self.backoff_s
            logger.info("%s", exc)
        except (ReexecFailed, BackendRefused, AuditError) as exc:
            logger.warning("job %s: cannot audit, no challenge: %s", job_id, exc)
            self.done.add(job_id)
            self.record("unauditable")

    def audit(self, job_id: JobId, job: JobView) -> Evidence:
        """One audit of a committed job; challenges it on evidence of a fault."""
        spec = self.reexec.spec(job_id, job.specHash)
        item_count = job.itemCount
        if item_count != len(spec.inputs):
            evidence = Evidence(note=f"committed {item_count} items, the spec has {len(spec.inputs)}")
        else:
            indices = list(sample_items(item_count, sample_size(item_count, self.corrupted, self.confidence),
                                        self.rng))
            # An item counts as missing only if it was missing when the result was read, and the
            # re-execution after that read may outlast the grace: judge the grace at the read.
            read_at = self.chain.now()
            evidence = check_outputs(self.backend, self.reexec, job_id, spec, job.outputRoot, item_count, indices)
            grace_end = job.committedAt + (job.challengeWindowEnd - job.committedAt) // 2
            if evidence.missing and not (evidence.unprovable or evidence.mismatched) and read_at < grace_end:
                raise OutputsPending(job_id, evidence.missing, grace_end)
            logger.info("job %s: audited items %s of %d: %s", job_id, indices, item_count, evidence.describe())
        if evidence.faulty:
            self._challenge(job, evidence)
        else:
            self.backend.report("job", job_id, "passed", detail=evidence.describe(), **evidence.report_fields())
        return evidence

    def _challenge(self, job: JobView, evidence: Evidence) -> None:
        job_id = job.job.id
        bond = self.manager.functions.minBond().call()
        try:
            receipt = self.chain.send(self.manager.functions.challengeJob(job.job.as_tuple(), MAX_K), value=bond)
        except TransactionReverted as exc:  # window closed or someone challenged first
            logger.warning("job %s: challenge refused: %s (evidence: %s)", job_id, exc, evidence.describe())
            return
        event = emitted(self.manager, "JobChallenged", receipt)[0]["args"]
        tx = receipt["transactionHash"].hex()
        logger.warning("job %s: challenged as challenge %s, k=%d, bond %s wei, tx %s; evidence: %s",
                       job_id, event["challengeId"], MAX_K, bond, tx, evidence.describe())
        self.backend.report("job", job_id, "challenged", challenge_id=event["challengeId"], tx_hashes=[tx],
                            detail=evidence.describe(), **evidence.report_fields())

    # -- our challenges ---------------------------------------------------------------------

    def own_challenges(self) -> list[int]:
        """Job challenges this verifier opened that have not ended (found on-chain: a restarted
        verifier finishes them)."""
        assert self.watch is not None
        self.watch.refresh()
        ids = self.watch.ids(JOB_CHALLENGE)
        live = [i for i in ids if self.manager.functions.challenge(i).call().status
                in (ChallengeStatus.OPEN, ChallengeStatus.ANSWERED)]
        self.watch.forget(JOB_CHALLENGE, set(ids) - set(live))
        return live

    def follow_up(self, challenge_id: ChallengeId) -> None:
        """Claims a timeout, escalates a fault found in the
        answer, or settles an answer we find right; waits otherwise."""
        c = self.manager.functions.challenge(challenge_id).call()
        status, deadline, job_id = c.status, c.responseDeadline, c.subject
        now = self.chain.now()
        try:
            if status == ChallengeStatus.OPEN and now > deadline:
                receipt = self.chain.send(self.manager.functions.claimTimeout(challenge_id))
                self.record("timeout-claimed")
                logger.warning("challenge %s: provider %s did not answer; timeout claimed, tx %s",
                               challenge_id, c.provider, receipt["transactionHash"].hex())
                self.backend.report("job", job_id, "timeout_claimed", challenge_id=challenge_id,
                                    tx_hashes=[receipt["transactionHash"].hex()],
                                    detail=f"provider {c.provider} did not answer by {deadline}")
            elif status == ChallengeStatus.ANSWERED:
                window_end = c.answeredAt + self.manager.functions.escalationWindow().call()
                if now <= window_end:
                    if challenge_id not in self.not_escalating:
                        self._judge_and_escalate(challenge_id)
                else:
                    receipt = self.chain.send(self.manager.functions.settle(challenge_id))
                    self.record("settled")
                    logger.info("challenge %s: answer stood, settled, tx %s", challenge_id,
                                receipt["transactionHash"].hex())
                    self.backend.report("job", job_id, "settled", challenge_id=challenge_id,
                                        tx_hashes=[receipt["transactionHash"].hex()], detail="the answer stood")
        except TransactionReverted as exc:
            logger.warning("challenge %s: %s", challenge_id, exc)

    def _judge_and_escalate(self, challenge_id: ChallengeId) -> None:
        try:
            job_id, evidence = judge_answer(self.chain, self.backend, self.reexec, challenge_id)
        except (BackendUnavailable, NodeUnavailable, OSError) as exc:
            logger.info("challenge %s: answer not judged yet: %s", challenge_id, exc)
            return
        except (ReexecFailed, BackendRefused, AuditError) as exc:
            logger.warning("challenge %s: cannot judge the answer, it will settle: %s", challenge_id, exc)
            self.not_escalating.add(challenge_id)
            return
        if not evidence.faulty:
            self.not_escalating.add(challenge_id)
            self.record("answer-right")
            logger.info("challenge %s (job %s): the revealed items are right (%s); not escalated",
                        challenge_id, job_id, evidence.describe())
            return
        receipt = self.chain.send(self.manager.functions.escalate(challenge_id))
        self.record("escalated")
        logger.warning("challenge %s (job %s): escalated to the committee, tx %s; evidence: %s",
                       challenge_id, job_id, receipt["transactionHash"].hex(), evidence.describe())
        self.backend.report("job", job_id, "escalated", challenge_id=challenge_id,
                            tx_hashes=[receipt["transactionHash"].hex()], detail=evidence.describe(),
                            **evidence.report_fields())


__all__ = ["AuditError", "Evidence", "JobAuditor", "JobReexecutor", "audit_order", "check_outputs", "judge_answer",
           "revealed_digests"]
