from __future__ import annotations

from functools import lru_cache
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, Response

from backend import hub
from backend.api.deps import (
    BINARY_BODY,
    BackendDep,
    DbDep,
    SignedInDep,
    ViewerDep,
    decode_base64,
    parse_json_body,
    read_body,
    receive_upload,
)
from backend.api.schemas import (
    ADDRESS_PATTERN,
    HASH_PATTERN,
    InputStored,
    InputsUpload,
    ModelCheck,
    ModelCheckRequest,
    ModelPublic,
)
from backend.model_check import CheckLimits, ModelChecker
from backend.settings import Settings
from backend.errors import TooLarge
from protocol.jobs import MAX_INPUTS_BODY_BYTES, MODEL_FORMATS

router = APIRouter(tags=["models"])
HashPath = Annotated[str, Path(pattern=HASH_PATTERN)]


@lru_cache(maxsize=4)
def _checker(limits: CheckLimits) -> ModelChecker:
    return ModelChecker(limits)


def model_checker(settings: Settings) -> ModelChecker:
    """One checker (its slots and verdict cache) per set of limits in this process."""
    return _checker(CheckLimits(settings.model_check_memory_bytes, settings.model_check_timeout_s,
                                settings.model_check_concurrency))


@router.post("/models", response_model=ModelPublic, status_code=201, responses={401: {}, 413: {}, 422: {}},
             openapi_extra=BINARY_BODY)
async def upload_model(
    request: Request, owner: SignedInDep, backend: BackendDep, db: DbDep,
    name: Annotated[str, Query(min_length=1, max_length=128)],
    format: Annotated[str, Query(description=f"one of {MODEL_FORMATS}", max_length=16)] = "torchscript",
    private: bool = False,
) -> ModelPublic:
    """Uploads a model file (the body); its id is keccak256 of the bytes. Private models are
    listed and served only to their owner. The file must load as `format` (checked in a
    limited child process): anything else is refused with 422."""
    upload = await receive_upload(request, backend.blobs, backend.settings.max_model_bytes, "model")
    try:
        row = await run_in_threadpool(hub.store_model, db, owner, name, format, private, upload,
                                      model_checker(backend.settings))
    finally:
        upload.discard()
    backend.metrics.upload_bytes.labels("model").inc(upload.size)
    return ModelPublic.model_validate(row)


@router.get("/models", response_model=list[ModelPublic])
def list_models(viewer: ViewerDep, db: DbDep,
                owner: Annotated[str | None, Query(pattern=ADDRESS_PATTERN)] = None) -> list[ModelPublic]:
    """Public models, plus the caller's private ones when signed in."""
    return [ModelPublic.model_validate(r) for r in hub.visible_models(db, viewer, owner.lower() if owner else None)]


@router.get("/models/{content_hash}", response_model=ModelPublic, responses={404: {}})
def get_model(content_hash: HashPath, viewer: ViewerDep, db: DbDep) -> ModelPublic:
    return ModelPublic.model_validate(hub.visible_model(db, content_hash, viewer))


@router.post("/models/{content_hash}/check", response_model=ModelCheck, responses={401: {}, 403: {}, 404: {},
                                                                                 422: {}, 503: {}})
def check_model(content_hash: HashPath, body: ModelCheckRequest, viewer: SignedInDep, backend: BackendDep,
                db: DbDep) -> ModelCheck:
    """Dry run before paying: runs the given input items (your uploads, 1..16, as one batch)
    through the model in a limited child process. `ok` false says why a provider would fail
    the job (`stage`: load, input or run; `limits`: the check ran out of time or memory here)."""
    verdict = hub.dry_run(db, backend.blobs, model_checker(backend.settings), viewer, content_hash, body.inputs)
    model = hub.visible_model(db, content_hash, viewer)
    return ModelCheck(model=model.content_hash, format=model.format, items=len(body.inputs), ok=verdict.ok,
                      stage=verdict.stage, error=verdict.error or None,
                      output_shape=list(verdict.output_shape) if verdict.output_shape is not None else None,
                      output_dtype=verdict.output_dtype)


@router.get("/models/{content_hash}/content", response_class=Response,
            responses={200: {"content": {"application/octet-stream": {}}}, 404: {}})
def download_model(content_hash: HashPath, viewer: ViewerDep, backend: BackendDep, db: DbDep) -> Response:
    row = hub.visible_model(db, content_hash, viewer)
    return FileResponse(backend.blobs.path(row.content_hash), media_type="application/octet-stream")


@router.post("/inputs", response_model=InputStored, status_code=201, responses={401: {}, 413: {}, 422: {}},
             openapi_extra=BINARY_BODY, tags=["jobs"])
async def upload_input(request: Request, owner: SignedInDep, backend: BackendDep, db: DbDep) -> InputStored:
    """Uploads one job input item; its id (used in the job spec) is keccak256 of the bytes."""
    upload = await receive_upload(request, backend.blobs, backend.settings.max_input_bytes, "input")
    try:
        row = await run_in_threadpool(hub.store_input, db, owner, upload)
    finally:
        upload.discard()
    backend.metrics.upload_bytes.labels("input").inc(upload.size)
    return InputStored(content_hash=row.content_hash, size=row.size)


@router.post("/inputs/batch", response_model=list[InputStored], status_code=201, responses={401: {}, 413: {}, 422: {}},
             tags=["jobs"])
async def upload_inputs(request: Request, owner: SignedInDep, backend: BackendDep, db: DbDep) -> list[InputStored]:
    """Uploads several job input items in one request (`InputsUpload`: base64 bytes, at most
    MAX_INPUTS_BODY_BYTES of JSON, each item within the one-item limit); answers their ids in
    order, as POST /inputs answers one."""
    body = parse_json_body(await read_body(request, MAX_INPUTS_BODY_BYTES, "inputs"), InputsUpload, "inputs")
    items = [decode_base64(text, f"inputs: item {index}") for index, text in enumerate(body.items)]
    limit = backend.settings.max_input_bytes
    for index, data in enumerate(items):
        if len(data) > limit:
            raise TooLarge(f"input item {index}", len(data), limit)
    rows = await run_in_threadpool(hub.store_inputs, db, backend.blobs, owner, items)
    backend.metrics.upload_bytes.labels("input").inc(sum(map(len, items)))
    return [InputStored(content_hash=row.content_hash, size=row.size) for row in rows]


@router.get("/inputs/{content_hash}", response_class=Response, tags=["jobs"],
            responses={200: {"content": {"application/octet-stream": {}}}, 401: {}, 403: {}, 404: {}})
def download_input(content_hash: HashPath, viewer: SignedInDep, backend: BackendDep, db: DbDep) -> Response:
    row = hub.input_for(db, content_hash, viewer)
    return FileResponse(backend.blobs.path(row.content_hash), media_type="application/octet-stream")


@router.get("/blobs/{content_hash}", response_class=Response, tags=["jobs"],
            responses={200: {"content": {"application/octet-stream": {}}}, 401: {}, 404: {}})
def get_content(content_hash: HashPath, viewer: ViewerDep, backend: BackendDep, db: DbDep) -> Response:
    """Content by keccak256 for a provider running a job: the job spec (its specHash), the
    model and the inputs. Specs and public models are open; the rest needs a session of the
    owner, of the provider of a job that names the content, or of a staked verifier."""
    content = hub.content_for(db, content_hash, viewer, lambda who: backend.chain().is_staked_verifier(who))
    if content.data is not None:
        return Response(content.data, media_type="application/json")
    return FileResponse(backend.blobs.path(content_hash), media_type="application/octet-stream")
