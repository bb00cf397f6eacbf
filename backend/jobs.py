"""Jobs: specs by specHash, results with per-item proofs, and provider output uploads that are
accepted only when they prove inclusion under the output root committed on-chain."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from backend import models as m
from backend.auth import utcnow
from backend.errors import BadInput, Conflict, Forbidden, NotFound
from backend.matching import Candidate, NoMatch, Ranked, Request, explain, mining_floor, rank
from backend.storage import BlobStore, Upload
from protocol.errors import ProtocolError
from protocol.jobs import JobSpec, JobSpecError
from protocol.merkle import MAX_PROOF_DEPTH, leaf_hash, verify_inclusion

log = logging.getLogger(__name__)


def store_spec(session: Session, raw: bytes) -> tuple[m.JobSpecRecord, JobSpec]:
    """Validates a renter's spec and keeps its canonical form under its specHash."""
    try:
        spec = JobSpec.parse(raw)
    except JobSpecError as exc:
        raise BadInput(f"job spec: {exc}") from exc
    digest = "0x" + spec.spec_hash.hex()
    row = session.get(m.JobSpecRecord, digest)
    if row is None:
        row = m.JobSpecRecord(spec_hash=digest, canonical=spec.canonical().decode(), model=spec.model,
                              item_count=len(spec.inputs), created_at=utcnow())
        session.add(row)
        session.commit()
    return row, spec


def get_spec(session: Session, spec_hash: str) -> m.JobSpecRecord:
    row = session.get(m.JobSpecRecord, spec_hash)
    if row is None:
        raise NotFound("job spec", spec_hash)
    return row


def get_job(session: Session, job_id: int) -> m.Job:
    job = session.get(m.Job, job_id)
    if job is None:
        raise NotFound("job", job_id)
    return job


@dataclass(frozen=True)
class ItemResult:
    index: int
    digest: str | None
    proof: list[str] | None
    size: int | None


def result_items(session: Session, job: m.Job) -> list[ItemResult]:
    if job.output_root is None or job.item_count is None:
        raise Conflict(f"job {job.job_id} has no committed result yet (status {job.status})")
    stored = {o.item_index: o for o in session.scalars(select(m.JobOutput).where(m.JobOutput.job_id == job.job_id))}
    return [
        ItemResult(i, stored[i].digest, stored[i].proof, stored[i].size) if i in stored
        else ItemResult(i, None, None, None)
        for i in range(job.item_count)
    ]


def parse_proof(header: str) -> list[bytes]:
    """`X-Merkle-Proof`: comma-separated 0x-hex sibling hashes, bottom-up (may be empty)."""
    parts = [p.strip() for p in header.split(",") if p.strip()]
    if len(parts) > MAX_PROOF_DEPTH:
        raise BadInput(f"proof has {len(parts)} siblings; at most {MAX_PROOF_DEPTH}")
    siblings = []
    for part in parts:
        try:
            raw = bytes.fromhex(part.removeprefix("0x"))
        except ValueError:
            raw = b""
        if len(raw) != 32:
            raise BadInput(f"proof sibling {part[:20]!r} is not 32 bytes of hex")
        siblings.append(raw)
    return siblings


def store_output(session: Session, job_id: int, index: int, uploader: str, upload: Upload,
                 siblings: list[bytes]) -> m.JobOutput:
    job = get_job(session, job_id)
    if uploader != job.provider:
        raise Forbidden(f"only job {job_id}'s provider {job.provider} uploads its outputs")
    if job.output_root is None or job.item_count is None:
        raise Conflict(f"job {job_id} has no result committed on-chain yet")
    if not 0 <= index < job.item_count:
        raise BadInput(f"item {index} is outside 0..{job.item_count - 1}")
    digest = upload.digest
    try:
        verify_inclusion(leaf_hash(bytes.fromhex(digest[2:])), index, job.item_count, siblings,
                         bytes.fromhex(job.output_root[2:]))
    except ProtocolError as exc:
        raise BadInput(f"item {index} does not match the on-chain output root: {exc}") from exc
    upload.keep()
    row = session.get(m.JobOutput, (job_id, index))
    if row is None:
        row = m.JobOutput(job_id=job_id, item_index=index, digest=digest,
                          proof=["0x" + s.hex() for s in siblings], size=upload.size)
        session.add(row)
        session.commit()
    log.info("job %s item %s output %s stored (%s bytes)", job_id, index, digest, upload.size)
    return row


def output_path(session: Session, blobs: BlobStore, job_id: int, index: int, viewer: str,
                is_verifier: Callable[[str], bool] = lambda _: False) -> Path:
    """An item's stored output, for the job's renter and provider and for staked verifiers
    (`is_verifier`, asked last: it reads the chain), who audit it."""
    job = get_job(session, job_id)
    if viewer not in (job.renter, job.provider) and not is_verifier(viewer):
        raise Forbidden(f"job {job_id}'s outputs are for its renter, its provider and staked verifiers")
    row = session.get(m.JobOutput, (job_id, index))
    if row is None:
        raise NotFound(f"output of job {job_id} item", index)
    return blobs.path(row.digest)


def record_failure(session: Session, job_id: int, reporter: str, kind: str, error: str) -> m.JobFailure:
    job = get_job(session, job_id)
    if reporter != job.provider:
        raise Forbidden(f"only job {job_id}'s provider reports its failure")
    row = session.get(m.JobFailure, job_id) or m.JobFailure(job_id=job_id)
    row.kind, row.error, row.reported_at = kind, error, utcnow()
    session.add(row)
    session.commit()
    log.warning("job %s: provider %s reports failure %s: %s", job_id, reporter, kind, error)
    return row


def candidates(session: Session) -> list[Candidate]:
    queues = dict(session.execute(
        select(m.Job.provider, func.count()).where(m.Job.status.in_(("funded", "accepted"))).group_by(m.Job.provider)
    ).all())
    profiles = {p.address: p for p in session.scalars(select(m.ProviderProfile))}
    out = []
    for p in session.scalars(select(m.Provider)):
        profile = profiles.get(p.address)
        out.append(Candidate(
            address=p.address, gpu_class=p.gpu_class, tflops_milli=p.tflops_milli or 0,
            pog_passed=bool(p.pog_passed), active=p.active, price_per_job_unit=p.price_per_job_unit,
            queue_length=queues.get(p.address, 0), latency_ms=profile.latency_ms if profile else None,
            cached_models=frozenset(profile.cached_models) if profile else frozenset(),
            private_ok=profile.private_ok if profile else False, challenges_won=p.challenges_won,
            challenges_lost=p.challenges_lost,
            mining_floor_wei_per_hour=mining_floor(p, profile),
        ))
    return out


def stale_providers(session: Session, stale_after_s: float) -> frozenset[str]:
    """Providers whose agent has sent heartbeats but none for `stale_after_s`: crashed or gone.
    A provider never heard from (no agent heartbeat yet) is not stale: the chain says it is
    registered and active, and nothing says it is down."""
    cutoff = utcnow() - timedelta(seconds=stale_after_s)
    rows = session.scalars(select(m.ProviderProfile.address).where(m.ProviderProfile.last_seen_at.isnot(None),
                                                                   m.ProviderProfile.last_seen_at < cutoff))
    return frozenset(rows)


def quote(session: Session, request: Request, stale_after_s: float | None = None) -> list[Ranked]:
    stale = stale_providers(session, stale_after_s) if stale_after_s is not None else frozenset()
    return rank(request, candidates(session), stale)


def why_no_quote(session: Session, request: Request, stale_after_s: float) -> NoMatch | None:
    return explain(request, candidates(session), stale_providers(session, stale_after_s))
