"""The FastAPI application: routes, error mapping, metrics, and the indexer in the background."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request, Response

from backend.api import docs, errors
from backend.api.routes import auth, dashboard, disputes, health, jobs, leases, models, pog, providers, quotes
from backend.runtime import Backend
from backend.settings import Settings, get_settings

log = logging.getLogger(__name__)


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

    @app.middleware("http")
    async def count(request: Request, call_next):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        response: Response = await call_next(request)
        route = getattr(request.scope.get("route"), "path", "unmatched")
        backend: Backend | None = getattr(request.app.state, "backend", None)
        if backend is not None:
            backend.metrics.requests.labels(request.method, route, str(response.status_code)).inc()
            backend.metrics.latency.labels(route).observe(time.perf_counter() - started)
        return response

    for module in (health, auth, providers, pog, quotes, jobs, models, leases, disputes, dashboard):
        app.include_router(module.router)
    docs.install(app)
    return app
