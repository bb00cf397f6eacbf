"""The model hub and job inputs: content-addressed uploads with owners and visibility."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from backend import models as m
from backend.auth import utcnow
from backend.errors import BadInput, Forbidden, NotFound, Unauthenticated
from backend.model_check import ModelChecker, Verdict
from backend.storage import BlobStore, Upload
from protocol.jobs import MODEL_FORMATS, JobSpec, JobSpecError, decode_output

log = logging.getLogger(__name__)

IN_QUERY_HASHES = 500  # content hashes in one query's IN list (SQLite's bound on variables)
_NAME = re.compile(r"^[A-Za-z0-9._\-/ ]{1,128}$")


def store_model(session: Session, owner: str, name: str, fmt: str, private: bool, upload: Upload,
                checker: ModelChecker | None = None) -> m.Model:
    """Keeps a model once it loads as `fmt` (checked in a limited child by `checker`): a file
    no provider could load is refused here, before any job can name it."""
    if not _NAME.match(name):
        raise BadInput("name: 1 to 128 letters, digits, spaces or . _ - /")
    if fmt not in MODEL_FORMATS:
        raise BadInput(f"format: {fmt!r} is not one of {MODEL_FORMATS}")
    if not upload.size:
        raise BadInput("model file is empty")
    if checker is not None:
        verdict = checker.check(upload.temp, fmt, key=("load", upload.digest, fmt))
        if not verdict.ok:
            log.info("model %s refused as %s for %s: %s", upload.digest, fmt, owner, verdict.error)
            raise BadInput(f"the file does not load as a {fmt} model ({verdict.stage}): {verdict.error}")
    digest = upload.keep()
    row = session.get(m.Model, (digest, owner))
    if row is None:
        row = m.Model(content_hash=digest, owner=owner, name=name, format=fmt, size=upload.size, private=private,
                      created_at=utcnow())
        session.add(row)
    else:  # the owner re-uploads the same bytes: a rename or a visibility change
        row.name, row.format, row.private = name, fmt, private
    session.commit()
    log.info("model %s (%s, %s bytes, private=%s) stored for %s", digest, fmt, upload.size, private, owner)
    return row


def visible_models(session: Session, viewer: str | None, owner: str | None = None) -> list[m.Model]:
    query = select(m.Model).order_by(m.Model.created_at.desc(), m.Model.content_hash)
    query = query.where(or_(m.Model.private.is_(False), m.Model.owner == viewer) if viewer
                        else m.Model.private.is_(False))
    if owner:
        query = query.where(m.Model.owner == owner)
    return list(session.scalars(query))


def visible_model(session: Session, content_hash: str, viewer: str | None) -> m.Model:
    """The viewer's own entry, else a public one. A private model of someone else is reported as
    missing, not forbidden, so that its existence does not leak."""
    if viewer and (own := session.get(m.Model, (content_hash, viewer))):
        return own
    public = session.scalars(select(m.Model).where(m.Model.content_hash == content_hash,
                                                   m.Model.private.is_(False))).first()
    if public is None:
        raise NotFound("model", content_hash)
    return public


def store_input(session: Session, owner: str, upload: Upload) -> m.Blob:
    if not upload.size:
        raise BadInput("input is empty")
    row = _input_row(session, owner, upload.keep(), upload.size)
    session.commit()
    return row


def store_inputs(session: Session, blobs: BlobStore, owner: str, items: list[bytes]) -> list[m.Blob]:
    """Several inputs of one owner at once (POST /inputs/batch), in one commit; none is empty."""
    empty = [index for index, data in enumerate(items) if not data]
    if empty:
        raise BadInput(f"inputs: items {empty[:5]} are empty")
    digests = [blobs.put(data) for data in items]
    sizes = dict(zip(digests, map(len, items)))
    # Two queries a chunk for the rows already there, not two gets and an autoflush an item.
    rows: dict[str, m.Blob] = {}
    held: set[str] = set()
    unique = list(sizes)
    for start in range(0, len(unique), IN_QUERY_HASHES):
        chunk = unique[start:start + IN_QUERY_HASHES]
        rows.update((row.content_hash, row) for row in session.scalars(select(m.Blob).where(
            m.Blob.content_hash.in_(chunk))))
        held |= inputs_held(session, chunk, owner)
    for digest, size in sizes.items():
        if digest not in rows:
            rows[digest] = m.Blob(content_hash=digest, owner=owner, size=size, created_at=utcnow())
            session.add(rows[digest])
        if digest not in held:  # uploading the bytes proves holding them
            session.add(m.BlobHolder(content_hash=digest, account=owner))
    session.commit()
    return [rows[digest] for digest in digests]


def _input_row(session: Session, owner: str, digest: str, size: int) -> m.Blob:
    row = session.get(m.Blob, digest)
    if row is None:
        row = m.Blob(content_hash=digest, owner=owner, size=size, created_at=utcnow())
        session.add(row)
    if session.get(m.BlobHolder, (digest, owner)) is None:  # uploading the bytes proves holding them
        session.add(m.BlobHolder(content_hash=digest, account=owner))
    return row


def holds_input(session: Session, content_hash: str, account: str) -> bool:
    return session.get(m.BlobHolder, (content_hash, account)) is not None


def inputs_held(session: Session, content_hashes: Sequence[str], account: str) -> set[str]:
    """Which of `content_hashes` (at most IN_QUERY_HASHES) `account` uploaded, in one query."""
    return set(session.scalars(select(m.BlobHolder.content_hash).where(
        m.BlobHolder.account == account, m.BlobHolder.content_hash.in_(content_hashes))))


def owns_content(session: Session, content_hash: str, account: str) -> bool:
    """Whether `account` pushed `content_hash` as a model or uploaded it as an input."""
    return session.get(m.Model, (content_hash, account)) is not None or holds_input(session, content_hash, account)


def named_by_jobs_of(session: Session, provider: str | None, content_hash: str) -> bool:
    """Whether a job funded for `provider` (None: any job) has a spec naming `content_hash`
    (model or input) that the job's renter owns. Specs are public and anyone may fund a job
    naming any hash: without the renter's ownership, a job would open someone else's private
    model or inputs to a provider who funded it for itself."""
    jobs = select(m.Job.spec_hash, m.Job.renter)
    if provider is not None:
        jobs = jobs.where(m.Job.provider == provider)
    # Only specs whose canonical text holds the hash are parsed (the parse keeps the answer exact):
    # parsing every spec of every job made each fetch dearer as the market grew.
    named = m.JobSpecRecord.canonical.contains(content_hash, autoescape=True)
    rows = session.execute(jobs.join(m.JobSpecRecord, m.JobSpecRecord.spec_hash == m.Job.spec_hash).where(named)
                           .with_only_columns(m.JobSpecRecord.canonical, m.Job.renter))
    for canonical, renter in rows:
        spec = JobSpec.parse(canonical)
        if (content_hash == spec.model or content_hash in spec.inputs) and owns_content(session, content_hash, renter):
            return True
    return False


def input_for(session: Session, content_hash: str, viewer: str) -> m.Blob:
    """Inputs are readable by the uploader and by providers of jobs whose spec names them."""
    row = session.get(m.Blob, content_hash)
    if row is None:
        raise NotFound("input", content_hash)
    if holds_input(session, content_hash, viewer) or named_by_jobs_of(session, viewer, content_hash):
        return row
    raise Forbidden(f"input {content_hash} was not uploaded by you and is in none of your jobs")


MAX_DRY_RUN_ITEMS = 16


def dry_run(session: Session, blobs: BlobStore, checker: ModelChecker, viewer: str, model_hash: str,
            inputs: list[str]) -> Verdict:
    """Runs `inputs` (the viewer's own uploads, or inputs of its jobs) as one batch through a
    model the viewer can see, in a limited child: what `job submit` asks before it pays, so a
    job whose model does not load or refuses its inputs is never funded. Raises NotFound for
    an unknown or invisible model or input."""
    if not 1 <= len(inputs) <= MAX_DRY_RUN_ITEMS:
        raise BadInput(f"inputs: {len(inputs)} items; a dry run takes 1..{MAX_DRY_RUN_ITEMS}")
    model = visible_model(session, model_hash, viewer)
    paths = [blobs.path(input_for(session, h, viewer).content_hash) for h in inputs]
    signatures = []
    for index, path in enumerate(paths):
        try:
            array = decode_output(path.read_bytes(), "input")
        except JobSpecError as exc:
            return Verdict(False, "input", f"input item {index} is not an encoded array: {exc}")
        signatures.append(f"{array.dtype}{list(array.shape)}")
    # The verdict depends on the model and the batch's shapes, not on the values: one child per
    # (model, batch signature), so a renter submitting many jobs of one kind pays for one check.
    return checker.check(blobs.path(model.content_hash), model.format, paths,
                         key=("run", model.content_hash, model.format, *signatures))


@dataclass(frozen=True)
class Content:
    """What GET /blobs/{hash} serves: inline bytes (a job spec) or a stored file."""

    data: bytes | None = None
    digest: str | None = None


def content_for(session: Session, content_hash: str, viewer: str | None,
                is_verifier: Callable[[str], bool] = lambda _: False) -> Content:
    """Any content by its keccak256, for providers fetching a job's spec, model and inputs.

    Job specs and public models are open (a spec's hash is on-chain anyway); inputs and private
    models need a session of their owner, of the provider of a job that names them, or, once
    a job names them, of a staked verifier (`is_verifier`, asked last: it reads the chain),
    who re-executes jobs to audit them."""
    spec = session.get(m.JobSpecRecord, content_hash)
    if spec is not None:
        return Content(data=spec.canonical.encode())
    public = session.scalars(select(m.Model).where(m.Model.content_hash == content_hash,
                                                   m.Model.private.is_(False))).first()
    if public is not None:
        return Content(digest=content_hash)
    if viewer is None:
        raise Unauthenticated(f"{content_hash} is not public content: sign in as its owner or the job's provider")
    owned = owns_content(session, content_hash, viewer)
    exists = (session.get(m.Blob, content_hash) is not None
              or session.scalars(select(m.Model).where(m.Model.content_hash == content_hash)).first() is not None)
    if exists and (owned or named_by_jobs_of(session, viewer, content_hash)
                   or (named_by_jobs_of(session, None, content_hash) and is_verifier(viewer))):
        return Content(digest=content_hash)
    raise NotFound("content", content_hash)  # missing, or someone else's: the same answer
