from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Annotated

from fastapi import APIRouter, Header, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, Response
from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload
from web3 import Web3

from backend import jobs as service
from backend import models as m
from backend.errors import Conflict, NotFound
from backend.job_signals import RECHECK_S
from backend.api.deps import (
    BINARY_BODY,
    BackendDep,
    DbDep,
    PartyFilterDep,
    SignedInDep,
    decode_base64,
    parse_json_body,
    read_body,
    receive_upload,
)
from backend.api.schemas import (
    HASH_PATTERN,
    FailureReport,
    FundingTx,
    InputItem,
    InputsPage,
    JobPublic,
    JobResultPublic,
    JobSpecStored,
    OutputItem,
    OutputsPage,
    OutputStored,
    OutputsUpload,
    ResultDelivered,
    ResultDelivery,
    ResultItem,
    SignedResultShown,
)
from backend.runtime import Backend
from protocol.jobs import MAX_ITEMS_PER_READ, MAX_OUTPUTS_BODY_BYTES, MAX_RESULT_BODY_BYTES, MAX_SPEC_BYTES, JobSpec

router = APIRouter(prefix="/jobs", tags=["jobs"])
JobIdPath = Annotated[int, Path(ge=0, le=2**63 - 1)]
ItemPath = Annotated[int, Path(ge=0, le=2**31 - 1)]
ItemsQuery = Annotated[list[int], Query(description=(
    f"the items, repeated (index=0&index=3), at most {MAX_ITEMS_PER_READ}; none: every item of the job"))]


def to_public(job: m.Job) -> JobPublic:
    public = JobPublic.model_validate(job)
    spec, dispatch, report = job.spec_record, job.dispatch, job.failure_report
    # The on-chain reason is the record (the provider signed it with the refund); an off-chain
    # report covers a failure the provider could not put on-chain (e.g. past the deadline).
    failure = job.failure_reason or (f"{report.kind}: {report.error}" if report else None)
    return public.model_copy(update={"spec": json.loads(spec.canonical) if spec else None,
                                     "dispatched_to": dispatch.queue if dispatch else None,
                                     "failure": failure})


@router.get("", response_model=list[JobPublic])
def list_jobs(db: DbDep, filters: PartyFilterDep) -> list[JobPublic]:
    query = filters.apply(select(m.Job).order_by(m.Job.job_id.desc()), m.Job).options(
        selectinload(m.Job.spec_record), selectinload(m.Job.dispatch), selectinload(m.Job.failure_report))
    return [to_public(j) for j in db.scalars(query)]


@router.post("/specs", response_model=JobSpecStored, status_code=201, responses={413: {}, 422: {}},
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": {
                 "type": "object", "description": "a JobSpec document (protocol/jobs.py), version 1"}}}}})
async def store_spec(request: Request, backend: BackendDep, db: DbDep) -> JobSpecStored:
    """Validates a job spec and stores its canonical JSON under its specHash (what the escrow
    records), so the provider and verifiers can read what the renter funded."""
    raw = await read_body(request, MAX_SPEC_BYTES, "job spec")
    row, _ = await run_in_threadpool(service.store_spec, db, raw)
    return JobSpecStored(spec_hash=row.spec_hash, canonical=row.canonical, item_count=row.item_count)


@router.get("/specs/{spec_hash}", response_model=JobSpecStored, responses={404: {}})
def get_spec(spec_hash: Annotated[str, Path(pattern=HASH_PATTERN)], db: DbDep) -> JobSpecStored:
    row = service.get_spec(db, spec_hash)
    return JobSpecStored(spec_hash=row.spec_hash, canonical=row.canonical, item_count=row.item_count)


@router.get("/specs/{spec_hash}/funding-tx", response_model=FundingTx, responses={404: {}, 503: {}})
def funding_tx(spec_hash: Annotated[str, Path(pattern=HASH_PATTERN)], backend: BackendDep, db: DbDep) -> FundingTx:
    """The unsigned createJob transaction that funds a stored spec (provider, price and deadline
    come from the spec itself). The renter's wallet shows, signs and sends it; the backend
    never signs for anyone."""
    spec = JobSpec.parse(service.get_spec(db, spec_hash).canonical)
    chain = backend.chain()
    escrow = chain.contract("JobEscrow")
    data = escrow.encode_abi("createJob", args=[Web3.to_checksum_address(spec.provider), spec.spec_hash,
                                                spec.price_wei, spec.deadline])
    return FundingTx(to=escrow.address, data=data, value=str(spec.price_wei), chain_id=chain.deployment.chain_id)


@router.get("/{job_id}", response_model=JobPublic, responses={404: {}})
def get_job(job_id: JobIdPath, db: DbDep) -> JobPublic:
    return to_public(service.get_job(db, job_id))


MAX_RESULT_WAIT_S = 30.0  # a long poll's bound: a client waiting longer asks again
MAX_RESULT_WAITERS = 1000  # long polls held at once; past it a request answers at once (each rereads every RECHECK_S)
WaitQuery = Annotated[float, Query(ge=0, le=MAX_RESULT_WAIT_S, description=(
    "seconds to wait for the result when the job is not indexed yet or has none: the answer comes as soon as "
    "the provider's signed (or the committed) result is stored, else after this long as without it"))]


@router.get("/{job_id}/result", response_model=JobResultPublic, responses={404: {}, 409: {}})
async def get_result(job_id: JobIdPath, backend: BackendDep, db: DbDep, wait: WaitQuery = 0) -> JobResultPublic:
    """The output root and item count (on-chain once committed; before that, as the provider
    signed them, with the signature), and for every uploaded item its digest and inclusion proof:
    anyone can check an item against the root without trusting this server. With `wait`, a long
    poll: the renter sees the result when it arrives, not at its next poll."""
    if wait <= 0 or backend.signals.waiting() >= MAX_RESULT_WAITERS:
        return await run_in_threadpool(_result, backend, db, job_id)
    deadline = time.monotonic() + wait
    loop_and_event = backend.signals.watch(job_id)  # before the read: a result stored after it wakes us
    try:
        while True:
            try:
                return await run_in_threadpool(_result, backend, db, job_id)
            except (NotFound, Conflict):  # not indexed yet, or no result yet
                left = deadline - time.monotonic()
                if left <= 0:
                    raise
            event = loop_and_event[1]
            try:
                await asyncio.wait_for(event.wait(), min(left, RECHECK_S))
            except TimeoutError:  # a result stored by another replica signals nothing here
                pass
            event.clear()
    finally:
        backend.signals.unwatch(job_id, loop_and_event)


def _result(backend: Backend, db: Session, job_id: int) -> JobResultPublic:
    db.rollback()  # a new transaction: a waiter's earlier read neither hides nor caches a later commit
    job = service.get_job(db, job_id)
    items = service.result_items(db, job)
    root, item_count = service.result_root(job) or ("", 0)
    signed = None
    # The four are stored together (service.store_signed_result): a result is shown signed whole or not at all.
    if (job.result_signature is not None and job.signed_output_root is not None and job.signed_item_count is not None
            and job.signed_result_digest is not None):
        signed = SignedResultShown(jobId=job.job_id, outputRoot=job.signed_output_root,
                                   itemCount=job.signed_item_count, resultDigest=job.signed_result_digest,
                                   commitBy=job.signed_commit_by or 0, provider=job.provider,
                                   signature=job.result_signature, binding=bool(job.signed_result_binding()))
    base = backend.settings.base_url
    return JobResultPublic(
        job_id=job.job_id, output_root=root, item_count=item_count, committed=job.output_root is not None,
        signed=signed, result_available_at=job.result_available_at, commit_matches_signed=job.commit_matches_signed,
        items=[ResultItem(index=i.index, digest=i.digest, proof=i.proof, size=i.size,
                          url=f"{base}/jobs/{job_id}/outputs/{i.index}" if i.digest else None) for i in items],
    )


@router.put("/{job_id}/signed-result", response_model=ResultDelivered,
            responses={401: {}, 403: {}, 404: {}, 409: {}, 413: {}, 422: {}})
async def deliver_signed_result(job_id: JobIdPath, request: Request, signer: SignedInDep, backend: BackendDep,
                                db: DbDep) -> ResultDelivered:
    """The job's provider hands over its EIP-712-signed result (protocol/job_result.py) as soon
    as it is computed, before the batched commit: the renter can fetch the outputs (checked
    against the signed root) at once. The signature must recover to the job's provider
    (`ResultDelivery`). `outputs` (optional, at most MAX_RESULT_BODY_BYTES of JSON in all) are stored after the
    result as PUT /jobs/{id}/outputs stores them: one request for a job of small outputs."""
    body = parse_json_body(await read_body(request, MAX_RESULT_BODY_BYTES, "signed result"), ResultDelivery,
                           "signed result")
    items = _output_items(body.outputs)
    signed = body.model_dump(exclude={"outputs"})

    def store() -> list[m.JobOutput]:
        service.store_signed_result(db, job_id, signer, signed, backend.chain().escrow_domain())
        return service.store_outputs(db, backend.blobs, job_id, signer, items) if items else []

    rows = await run_in_threadpool(store)
    backend.signals.notify([job_id])  # stored and committed: long polls on this result answer now
    return ResultDelivered(**signed, outputs=_outputs_stored(backend, job_id, items, rows))


@router.put("/{job_id}/outputs/{index}", response_model=OutputStored, status_code=201,
            responses={401: {}, 403: {}, 404: {}, 409: {}, 413: {}, 422: {}}, openapi_extra=BINARY_BODY)
async def upload_output(
    job_id: JobIdPath, index: ItemPath, request: Request, signer: SignedInDep, backend: BackendDep, db: DbDep,
    x_merkle_proof: Annotated[str, Header(max_length=32 * 67, description=(
        "comma-separated 0x-hex sibling hashes of the item's digest, bottom-up"))] = "",
) -> OutputStored:
    """The provider uploads one item's output bytes; they are accepted only if keccak256 of the
    bytes, with the proof, rebuilds the job's result root (committed on-chain, else signed)."""
    siblings = service.parse_proof(x_merkle_proof)
    upload = await receive_upload(request, backend.blobs, backend.settings.max_output_bytes, "output")
    try:
        row = await run_in_threadpool(service.store_output, db, job_id, index, signer, upload, siblings)
    finally:
        upload.discard()  # bytes that do not prove inclusion leave nothing behind
    backend.metrics.upload_bytes.labels("output").inc(upload.size)
    return OutputStored(job_id=job_id, index=index, digest=row.digest, size=row.size)


@router.put("/{job_id}/outputs", response_model=list[OutputStored], status_code=201,
            responses={401: {}, 403: {}, 404: {}, 409: {}, 413: {}, 422: {}})
async def upload_outputs(job_id: JobIdPath, request: Request, signer: SignedInDep, backend: BackendDep,
                         db: DbDep) -> list[OutputStored]:
    """The provider uploads several items' outputs at once (`OutputsUpload`: base64 bytes and the
    inclusion proof of each, at most MAX_OUTPUTS_BODY_BYTES of JSON): one request for a job of
    small outputs instead of one per item. All are checked under the job's result root before any
    is stored."""
    body = parse_json_body(await read_body(request, MAX_OUTPUTS_BODY_BYTES, "outputs"), OutputsUpload, "outputs")
    items = _output_items(body.items)
    rows = await run_in_threadpool(service.store_outputs, db, backend.blobs, job_id, signer, items)
    return _outputs_stored(backend, job_id, items, rows)


def _output_items(items: list[OutputItem]) -> list[tuple[int, bytes, list[bytes]]]:
    """Several-items bodies' outputs as the service stores them: (index, bytes, proof siblings)."""
    return [(item.index, decode_base64(item.data, "outputs: item data"), service.parse_proof(",".join(item.proof)))
            for item in items]


def _outputs_stored(backend: Backend, job_id: int, items: list[tuple[int, bytes, list[bytes]]],
                    rows: list[m.JobOutput]) -> list[OutputStored]:
    backend.metrics.upload_bytes.labels("output").inc(sum(len(data) for _, data, _ in items))
    return [OutputStored(job_id=job_id, index=row.item_index, digest=row.digest, size=row.size) for row in rows]


@router.post("/{job_id}/failure", status_code=204, responses={401: {}, 403: {}, 404: {}})
def report_failure(job_id: JobIdPath, body: FailureReport, signer: SignedInDep, db: DbDep) -> None:
    """The job's provider reports that it cannot run the job (the refund itself is on-chain)."""
    service.record_failure(db, job_id, signer, body.kind, body.error)


@router.get("/{job_id}/outputs/{index}", response_class=Response, responses={
    200: {"content": {"application/octet-stream": {}}}, 401: {}, 403: {}, 404: {}})
def download_output(job_id: JobIdPath, index: ItemPath, viewer: SignedInDep, backend: BackendDep,
                    db: DbDep) -> Response:
    """One item's output bytes, for the job's renter or provider, or a staked verifier."""
    path = service.output_path(db, backend.blobs, job_id, index, viewer,
                               lambda who: backend.chain().is_staked_verifier(who))
    return FileResponse(path, media_type="application/octet-stream")


@router.get("/{job_id}/outputs", response_model=OutputsPage, responses={401: {}, 403: {}, 404: {}, 409: {}, 422: {}})
def download_outputs(job_id: JobIdPath, viewer: SignedInDep, backend: BackendDep, db: DbDep,
                     index: ItemsQuery = []) -> OutputsPage:  # noqa: B006 (FastAPI copies defaults)
    """Several items' outputs with their proofs in one answer, for whoever may download them one
    by one: as many as fit in about 4 MiB of JSON, the rest listed in `left` to ask again for."""
    page = service.outputs_page(db, backend.blobs, job_id, index, viewer,
                                lambda who: backend.chain().is_staked_verifier(who))
    return OutputsPage(items=[OutputItem(index=item.index, data=_base64(item.data), proof=item.proof)
                              for item in page.items], missing=page.missing, left=page.left)


@router.get("/{job_id}/inputs", response_model=InputsPage, responses={401: {}, 403: {}, 404: {}, 422: {}})
def download_inputs(job_id: JobIdPath, viewer: SignedInDep, backend: BackendDep, db: DbDep,
                    index: ItemsQuery = []) -> InputsPage:  # noqa: B006 (FastAPI copies defaults)
    """Several items' inputs in one answer, for the job's provider and staked verifiers (those who
    run its model; anyone checks each against the spec's hash): as many as fit in about 4 MiB of
    JSON, the rest listed in `left` to ask again for."""
    page = service.inputs_page(db, backend.blobs, job_id, index, viewer,
                               lambda who: backend.chain().is_staked_verifier(who))
    return InputsPage(items=[InputItem(index=item.index, content_hash=item.content_hash, data=_base64(item.data))
                             for item in page.items], missing=page.missing, left=page.left)


def _base64(data: bytes) -> str:
    return base64.b64encode(data).decode()
