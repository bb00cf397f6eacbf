"""Jobs: specs by specHash, results with per-item proofs, and provider output uploads that are
accepted only when they prove inclusion under the job's result root.

The result reaches the renter before the chain has it: the provider hands over its signed
JobResult (protocol.job_result) as soon as the job is computed, and its outputs with proofs
against the signed root; the commit follows in a batch. A signed result is taken only from the
job's provider, signed by that provider under JobEscrow's domain, and once per job. When the
commit is indexed, the committed root is the one items are checked against, and whether it is
the signed one is recorded (projections): a difference is what the renter slashes with."""

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
from backend.storage import BlobStore, Upload, content_hash
from protocol import availability
from protocol.errors import ProtocolError
from protocol.job_result import EscrowDomain, JobResultError, SignedJobResult
from protocol.jobs import MAX_ITEMS_PER_READ, JobSpec, JobSpecError
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


def result_root(job: m.Job) -> tuple[str, int] | None:
    """The root and item count items are checked against: the committed ones once the chain has
    them (the authority), else the provider's signed ones; None when neither exists yet."""
    if job.output_root is not None and job.item_count is not None:
        return job.output_root, job.item_count
    if job.signed_output_root is not None and job.signed_item_count is not None:
        return job.signed_output_root, job.signed_item_count
    return None


def store_signed_result(session: Session, job_id: int, sender: str, doc: object, domain: EscrowDomain) -> m.Job:
    """Keeps the provider's signed result for the renter (idempotent for the same result)."""
    job = get_job(session, job_id)
    if sender != job.provider:
        raise Forbidden(f"only job {job_id}'s provider {job.provider} delivers its result")
    try:
        signed = SignedJobResult.from_json(doc)
        signer = signed.signer(domain)
    except JobResultError as exc:
        raise BadInput(f"signed result: {exc}") from exc
    if signed.result.job_id != job_id:
        raise BadInput(f"signed result is for job {signed.result.job_id}, not {job_id}")
    if signer.lower() != job.provider or signed.provider.lower() != job.provider:
        raise Forbidden(f"job {job_id}'s result is signed by {signer.lower()}, not its provider {job.provider}")
    r = signed.result
    fields = (r.output_root.lower(), r.item_count, r.result_digest.lower(), r.commit_by)
    if job.result_signature is not None:
        if (job.signed_output_root, job.signed_item_count, job.signed_result_digest, job.signed_commit_by) != fields:
            raise BadInput(f"job {job_id} already has a different signed result")
        return job
    job.signed_output_root, job.signed_item_count, job.signed_result_digest, job.signed_commit_by = fields
    job.result_signature, job.result_available_at = signed.signature.lower(), utcnow()
    if job.output_root is not None:  # the commit was indexed first
        job.commit_matches_signed = job.commit_is_signed_result()
    session.commit()
    log.info("job %s: signed result %s over %s items from provider %s", job_id, r.output_root, r.item_count,
             job.provider)
    return job


def result_items(session: Session, job: m.Job) -> list[ItemResult]:
    found = result_root(job)
    if found is None:
        raise Conflict(f"job {job.job_id} has no result yet (status {job.status})")
    item_count = found[1]
    stored = {o.item_index: o for o in session.scalars(select(m.JobOutput).where(m.JobOutput.job_id == job.job_id))}
    return [
        ItemResult(i, stored[i].digest, stored[i].proof, stored[i].size) if i in stored
        else ItemResult(i, None, None, None)
        for i in range(item_count)
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
    root, item_count = _output_root(session, job_id, uploader)
    _check_output(job_id, root, item_count, index, upload.digest, siblings)
    upload.keep()
    row = _output_row(session, job_id, index, upload.digest, siblings, upload.size)
    session.commit()
    return row


def store_outputs(session: Session, blobs: BlobStore, job_id: int, uploader: str,
                  items: list[tuple[int, bytes, list[bytes]]]) -> list[m.JobOutput]:
    """Several items' outputs of one job in one request, all or nothing: every item is checked
    under the result's root before any is stored."""
    root, item_count = _output_root(session, job_id, uploader)
    for index, data, siblings in items:
        _check_output(job_id, root, item_count, index, content_hash(data), siblings)
    # One query for the items already stored (a request's items are a range, mostly new), not a
    # get and an autoflush per item.
    indices = [index for index, _, _ in items]
    stored = set(session.scalars(select(m.JobOutput.item_index).where(
        m.JobOutput.job_id == job_id, m.JobOutput.item_index.between(min(indices), max(indices)))))
    rows: dict[int, m.JobOutput] = {}
    for index, data, siblings in items:
        if index not in rows:  # an index given twice is stored once
            rows[index] = (session.get_one(m.JobOutput, (job_id, index)) if index in stored else
                           _new_output_row(session, job_id, index, blobs.put(data), siblings, len(data)))
    session.commit()
    return [rows[index] for index in indices]


def _output_root(session: Session, job_id: int, uploader: str) -> tuple[str, int]:
    job = get_job(session, job_id)
    if uploader != job.provider:
        raise Forbidden(f"only job {job_id}'s provider {job.provider} uploads its outputs")
    found = result_root(job)
    if found is None:
        raise Conflict(f"job {job_id} has no signed or committed result yet")
    return found


def _check_output(job_id: int, root: str, item_count: int, index: int, digest: str, siblings: list[bytes]) -> None:
    if not 0 <= index < item_count:
        raise BadInput(f"item {index} is outside 0..{item_count - 1}")
    try:
        verify_inclusion(leaf_hash(bytes.fromhex(digest[2:])), index, item_count, siblings, bytes.fromhex(root[2:]))
    except ProtocolError as exc:
        raise BadInput(f"item {index} does not match the result's output root: {exc}") from exc


def _output_row(session: Session, job_id: int, index: int, digest: str, siblings: list[bytes],
                size: int) -> m.JobOutput:
    """The item's output row, added unless stored already."""
    return session.get(m.JobOutput, (job_id, index)) or _new_output_row(session, job_id, index, digest, siblings, size)


def _new_output_row(session: Session, job_id: int, index: int, digest: str, siblings: list[bytes],
                    size: int) -> m.JobOutput:
    row = m.JobOutput(job_id=job_id, item_index=index, digest=digest, proof=["0x" + s.hex() for s in siblings],
                      size=size)
    session.add(row)
    log.info("job %s item %s output %s stored (%s bytes)", job_id, index, digest, size)
    return row


def output_path(session: Session, blobs: BlobStore, job_id: int, index: int, viewer: str,
                is_verifier: Callable[[str], bool] = lambda _: False) -> Path:
    """An item's stored output, for the job's renter and provider and for staked verifiers
    (`is_verifier`, asked last: it reads the chain), who audit it."""
    _output_reader(session, job_id, viewer, is_verifier)
    row = session.get(m.JobOutput, (job_id, index))
    if row is None:
        raise NotFound(f"output of job {job_id} item", index)
    return blobs.path(row.digest)


def _output_reader(session: Session, job_id: int, viewer: str, is_verifier: Callable[[str], bool]) -> m.Job:
    job = get_job(session, job_id)
    if viewer not in (job.renter, job.provider) and not is_verifier(viewer):
        raise Forbidden(f"job {job_id}'s outputs are for its renter, its provider and staked verifiers")
    return job


# Several items in one answer (GET /jobs/{id}/outputs, GET /jobs/{id}/inputs): at most this many
# bytes of items per answer (4 MiB once in base64, as PUT /jobs/{id}/outputs takes), and at least
# one item, so that asking again for what was left always moves on.
PAGE_BYTES = 3 * 1024 * 1024


@dataclass(frozen=True)
class PageItem:
    index: int
    content_hash: str  # keccak256 of `data`: an output's digest, an input's name in the spec
    data: bytes
    proof: list[str]  # an output's inclusion proof (0x-hex siblings); empty for an input


@dataclass(frozen=True)
class Page:
    """Items of one job in one answer, in index order; the asked indices that hold nothing
    (`missing`) and those left for another request (`left`)."""

    items: list[PageItem]
    missing: list[int]
    left: list[int]


def outputs_page(session: Session, blobs: BlobStore, job_id: int, indices: list[int], viewer: str,
                 is_verifier: Callable[[str], bool] = lambda _: False) -> Page:
    """The uploaded outputs of `indices` (all the job's items when empty) with their proofs, for
    whoever may read them one by one; an item not uploaded (yet) is missing."""
    job = _output_reader(session, job_id, viewer, is_verifier)
    found = result_root(job)
    if found is None:
        raise Conflict(f"job {job_id} has no result yet (status {job.status})")
    asked = _asked(indices, found[1])
    rows = {row.item_index: row for row in session.scalars(
        select(m.JobOutput).where(m.JobOutput.job_id == job_id, m.JobOutput.item_index.in_(asked)))}
    return _page(asked, {i: (row.digest, row.size, row.proof) for i, row in rows.items()}, blobs)


def inputs_page(session: Session, blobs: BlobStore, job_id: int, indices: list[int], viewer: str,
                is_verifier: Callable[[str], bool] = lambda _: False) -> Page:
    """The inputs of `indices` (all the job's items when empty) as its spec names them, for the
    job's provider and staked verifiers: those who run its model. One check of the job for all
    items, where GET /blobs/{hash} looks for a job naming each input; an input the backend does
    not hold is missing."""
    job = get_job(session, job_id)
    if viewer != job.provider and not is_verifier(viewer):
        raise Forbidden(f"job {job_id}'s inputs are for its provider and staked verifiers")
    spec = JobSpec.parse(get_spec(session, job.spec_hash).canonical)
    asked = _asked(indices, len(spec.inputs))
    names = {i: spec.inputs[i] for i in asked}
    # Only what the job's renter uploaded: a job naming someone else's inputs lends nothing.
    held = {row.content_hash: row.size for row in session.scalars(
        select(m.Blob).join(m.BlobHolder, m.BlobHolder.content_hash == m.Blob.content_hash)
        .where(m.Blob.content_hash.in_(set(names.values())), m.BlobHolder.account == job.renter))}
    return _page(asked, {i: (name, held[name], []) for i, name in names.items() if name in held}, blobs)


def _asked(indices: list[int], item_count: int) -> list[int]:
    if len(indices) > MAX_ITEMS_PER_READ:
        raise BadInput(f"index: {len(indices)} items asked; at most {MAX_ITEMS_PER_READ} per request")
    outside = [i for i in indices if not 0 <= i < item_count]
    if outside:
        raise BadInput(f"index: {outside[:5]} outside the job's {item_count} items")
    return sorted(set(indices)) if indices else list(range(item_count))


def _page(asked: list[int], stored: dict[int, tuple[str, int, list[str]]], blobs: BlobStore) -> Page:
    items: list[PageItem] = []
    left: list[int] = []
    size = 0
    for index in (i for i in asked if i in stored):
        digest, item_size, proof = stored[index]
        if left or (items and size + item_size > PAGE_BYTES):
            left.append(index)
            continue
        items.append(PageItem(index, digest, blobs.path(digest).read_bytes(), proof))
        size += item_size
    return Page(items, [i for i in asked if i not in stored], left)


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


def provider_facts(p: m.Provider, stake: m.Stake | None, min_stake: int | None,
                   silent_since: int | None = None) -> availability.ProviderFacts:
    """The indexed provider as the availability rule takes it; its PoG record and latest slash
    timed by block number."""
    return availability.ProviderFacts(
        registered=True, deactivated=not p.active, stake=stake.bonded if stake else 0, minimum=min_stake,
        slashed=stake.slashed if stake else 0, pog_round_id=p.pog_round_id, pog_passed=p.pog_passed,
        pog_at=p.pog_block, slashed_at=stake.slashed_block if stake else None, silent_since=silent_since)


def candidates(session: Session, min_stake: int | None = None) -> list[Candidate]:
    queues = dict(session.execute(
        select(m.Job.provider, func.count())
        .where(m.Job.status.in_(("funded", "cancel requested", "accepted"))).group_by(m.Job.provider)
    ).all())
    profiles = {p.address: p for p in session.scalars(select(m.ProviderProfile))}
    stakes = {s.account: s for s in session.scalars(select(m.Stake))}
    out = []
    for p in session.scalars(select(m.Provider)):
        profile = profiles.get(p.address)
        facts = provider_facts(p, stakes.get(p.address), min_stake)
        out.append(Candidate(
            address=p.address, gpu_class=p.gpu_class, tflops_milli=p.tflops_milli or 0,
            pog_passed=bool(p.pog_passed), active=availability.active(facts),
            price_per_job_unit=p.price_per_job_unit,
            queue_length=queues.get(p.address, 0), latency_ms=profile.latency_ms if profile else None,
            cached_models=frozenset(profile.cached_models) if profile else frozenset(),
            private_ok=profile.private_ok if profile else False, challenges_won=p.challenges_won,
            challenges_lost=p.challenges_lost,
            mining_floor_wei_per_hour=mining_floor(p, profile),
            slashed_since_pog=availability.slashed_since_pog(facts),
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


def quote(session: Session, request: Request, stale_after_s: float | None = None,
          min_stake: int | None = None) -> list[Ranked]:
    stale = stale_providers(session, stale_after_s) if stale_after_s is not None else frozenset()
    return rank(request, candidates(session, min_stake), stale)


def why_no_quote(session: Session, request: Request, stale_after_s: float,
                 min_stake: int | None = None) -> NoMatch | None:
    return explain(request, candidates(session, min_stake), stale_providers(session, stale_after_s))
