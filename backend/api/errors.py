"""One handler maps domain errors to HTTP status codes; the message is the error's text."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from backend.errors import (
    BackendError,
    BadInput,
    ChainUnavailable,
    Conflict,
    DispatchError,
    Forbidden,
    NotFound,
    StorageUnavailable,
    TooLarge,
    Unauthenticated,
)
from backend.model_check import CheckBusy

log = logging.getLogger(__name__)

STATUS: dict[type[BackendError], int] = {
    NotFound: 404,
    BadInput: 422,
    TooLarge: 413,
    Unauthenticated: 401,
    Forbidden: 403,
    Conflict: 409,
    ChainUnavailable: 503,
    DispatchError: 503,
    CheckBusy: 503,
    StorageUnavailable: 503,
}


async def _handle(request: Request, exc: Exception) -> JSONResponse:
    status = next((code for kind, code in STATUS.items() if isinstance(exc, kind)), 500)
    if status >= 500:
        log.error("%s %s: %s", request.method, request.url.path, exc)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"detail": str(exc)}, status_code=status, headers=headers)


def install(app: FastAPI) -> None:
    app.add_exception_handler(BackendError, _handle)
