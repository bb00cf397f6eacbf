from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, Response

from backend import hub
from backend.api.deps import BINARY_BODY, BackendDep, DbDep, SignedInDep, ViewerDep, receive_upload
from backend.api.schemas import ADDRESS_PATTERN, HASH_PATTERN, InputStored, ModelPublic
from protocol.jobs import MODEL_FORMATS

router = APIRouter(tags=["models"])
HashPath = Annotated[str, Path(pattern=HASH_PATTERN)]


@router.post("/models", response_model=ModelPublic, status_code=201, responses={401: {}, 413: {}, 422: {}},
             openapi_extra=BINARY_BODY)
async def upload_model(
    request: Request, owner: SignedInDep, backend: BackendDep, db: DbDep,
    name: Annotated[str, Query(min_length=1, max_length=128)],
    format: Annotated[str, Query(description=f"one of {MODEL_FORMATS}", max_length=16)] = "torchscript",
    private: bool = False,
) -> ModelPublic:
    """Uploads a model file (the body); its id is keccak256 of the bytes. Private models are
    listed and served only to their owner."""
    upload = await receive_upload(request, backend.blobs, backend.settings.max_model_bytes, "model")
    try:
        row = await run_in_threadpool(hub.store_model, db, owner, name, format, private, upload)
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
