"""Request dependencies as Annotated aliases.

A dependency that does no blocking work is `async def`: FastAPI runs a plain `def` one in the
thread pool, and each such trip (a queue, a thread's wake-up, the answer handed back to the event
loop) cost about 0.25 ms of CPU, several per request, on these machines."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ValidationError
from sqlalchemy import Select
from sqlalchemy.orm import Session

from backend.api.schemas import ADDRESS_PATTERN

from backend.auth import authenticate
from backend.errors import BadInput, TooLarge, Unauthenticated
from backend.runtime import Backend
from backend.storage import BlobStore, Upload

ModelT = TypeVar("ModelT", bound=BaseModel)
_bearer = HTTPBearer(auto_error=False, description="session token from POST /auth/login (Sign-In with Ethereum)")


async def get_backend(request: Request) -> Backend:
    backend: Backend = request.app.state.backend
    return backend


BackendDep = Annotated[Backend, Depends(get_backend)]


async def get_db(backend: BackendDep) -> AsyncIterator[Session]:
    session = backend.factory()  # no I/O yet: a connection is taken at the first query, in the pool's thread
    try:
        yield session
    finally:
        await run_in_threadpool(session.close)  # hands the connection back (a rollback): I/O, off the loop


DbDep = Annotated[Session, Depends(get_db)]
BearerDep = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


async def optional_address(backend: BackendDep, db: DbDep, credentials: BearerDep) -> str | None:
    if credentials is None:
        return None
    token = credentials.credentials
    if (address := backend.sessions.address(token)) is not None:
        return address
    return await run_in_threadpool(authenticate, db, backend.settings, token, backend.sessions)


async def required_address(address: Annotated[str | None, Depends(optional_address)]) -> str:
    if address is None:
        raise Unauthenticated("sign in first: GET /auth/nonce, then POST /auth/login")
    return address


ViewerDep = Annotated[str | None, Depends(optional_address)]
SignedInDep = Annotated[str, Depends(required_address)]


async def receive_upload(request: Request, blobs: BlobStore, limit: int, what: str) -> Upload:
    """The request body as an Upload, refused as soon as it passes `limit` (Content-Length is
    checked first, then the stream is counted, since a client may lie or send no length)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise TooLarge(what, int(declared), limit)
    return await blobs.receive(request.stream(), limit, what)


async def read_body(request: Request, limit: int, what: str) -> bytes:
    """A small request body (job specs) in memory, with the same limit rules."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise TooLarge(what, int(declared), limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLarge(what, size, limit)
        chunks.append(chunk)
    return b"".join(chunks)


def parse_json_body(raw: bytes, schema: type[ModelT], what: str) -> ModelT:
    """`raw` as `schema`, refused in one line (field: reason; ...), as every other refusal."""
    try:
        return schema.model_validate_json(raw)
    except ValidationError as exc:
        raise BadInput(f"{what}: " + "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                               for e in exc.errors())) from None


def decode_base64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError as exc:  # binascii's error for text that is not base64
        raise BadInput(f"{what}: {exc}") from None


BINARY_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    }
}


@dataclass(frozen=True)
class PartyFilter:
    """The filters and paging that every list of deals (jobs, leases) offers."""

    renter: str | None
    provider: str | None
    status: str | None
    limit: int
    offset: int

    def apply(self, query: Select[Any], model: Any) -> Select[Any]:
        if self.renter:
            query = query.where(model.renter == self.renter.lower())
        if self.provider:
            query = query.where(model.provider == self.provider.lower())
        if self.status:
            query = query.where(model.status == self.status)
        return query.limit(self.limit).offset(self.offset)


async def party_filter(
    renter: Annotated[str | None, Query(pattern=ADDRESS_PATTERN)] = None,
    provider: Annotated[str | None, Query(pattern=ADDRESS_PATTERN)] = None,
    status: Annotated[str | None, Query(max_length=16)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> PartyFilter:
    return PartyFilter(renter, provider, status, limit, offset)


PartyFilterDep = Annotated[PartyFilter, Depends(party_filter)]
