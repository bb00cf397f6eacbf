from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, Response

from backend import lease_images
from backend.api.deps import BINARY_BODY, BackendDep, DbDep, SignedInDep, receive_upload
from backend.api.schemas import HASH_PATTERN, LeaseImageStored

router = APIRouter(prefix="/lease-images", tags=["leases"])
HashPath = Annotated[str, Path(pattern=HASH_PATTERN)]


@router.post("", response_model=LeaseImageStored, status_code=201, responses={401: {}, 413: {}, 422: {}},
             openapi_extra=BINARY_BODY)
async def upload_lease_image(request: Request, owner: SignedInDep, backend: BackendDep, db: DbDep) -> LeaseImageStored:
    """Uploads a lease image (the body: a tar archive, plain or compressed, of a root file
    system); its id is keccak256 of the bytes, which the renter names in the LeaseKey it signs
    (PUT /leases/{id}/key). Private: served only to you and to the provider of your lease that
    names it. At most the backend's `max_lease_image_bytes`."""
    upload = await receive_upload(request, backend.blobs, backend.settings.max_lease_image_bytes, "lease image")
    try:
        row = await run_in_threadpool(lease_images.store_lease_image, db, owner, upload)
    finally:
        upload.discard()
    backend.metrics.upload_bytes.labels("lease_image").inc(upload.size)
    return LeaseImageStored(content_hash=row.content_hash, size=row.size)


@router.get("/{content_hash}", response_class=Response,
            responses={200: {"content": {"application/octet-stream": {}}}, 401: {}, 404: {}})
def download_lease_image(content_hash: HashPath, viewer: SignedInDep, backend: BackendDep, db: DbDep) -> Response:
    """The image's bytes, for its uploader and for the provider of a lease whose renter bound it
    (the provider's agent checks them against the hash); 404 for anybody else."""
    row = lease_images.image_for(db, content_hash, viewer)
    return FileResponse(backend.blobs.path(row.content_hash), media_type="application/octet-stream")
