"""The FastAPI application: routes, error mapping, metrics, and the indexer in the background."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.api import docs, errors
from backend.api.routes import (auth, dashboard, disputes, health, jobs, lease_images, leases, models, pog, providers,
                                quotes)
from backend.runtime import Backend
from backend.settings import Settings, get_settings

log = logging.getLogger(__name__)


class RequestMetrics:
    """Counts every HTTP request by method, route and status, and times it by route. A plain
    ASGI middleware: Starlette's `@app.middleware("http")` runs each request through a task group
    and memory streams, which cost more CPU than most of our routes themselves."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client gets if the app raises before answering

        async def send_with_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_with_status)
        finally:
            backend: Backend | None = getattr(scope["app"].state, "backend", None)
            if backend is not None:
                route = getattr(scope.get("route"), "path", "unmatched")
                backend.metrics.requests.labels(scope["method"], route, str(status)).inc()
                backend.metrics.latency.labels(route).observe(time.perf_counter() - started)


def create_app(settings: Settings | None = None) -> FastAPI:
    """An app over its own Backend; the indexer thread runs when settings.run_indexer is set."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        backend = Backend.open(settings)
        app.state.backend = backend
        if settings.run_indexer:
            backend.start_indexer()
        try:
            yield
        finally:
            backend.close()

    app = FastAPI(
        title="Unchained marketplace",
        version="1",
        description="GPU compute marketplace with on-chain settlement: providers, Proof-of-GPU rounds, jobs, "
                    "results with Merkle proofs, the model hub, leases and disputes. State is an index of the "
                    "chain; money moves only through the contracts.",
        lifespan=lifespan,
        docs_url=None,  # served below from the swagger-ui-bundle package: no CDN, works offline
        redoc_url=None,
    )
    errors.install(app)

    app.add_middleware(RequestMetrics)
    for module in (health, auth, providers, pog, quotes, jobs, models, leases, lease_images, disputes, dashboard):
        app.include_router(module.router)
    docs.install(app)
    return app
