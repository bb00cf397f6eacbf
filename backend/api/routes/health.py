from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response
from sqlalchemy import text

from backend import models as m
from backend.api.deps import BackendDep, DbDep
from backend.api.schemas import DeploymentPublic, Health
from backend.errors import ChainUnavailable

router = APIRouter(tags=["operations"])


@router.get("/health", response_model=Health)
def health(backend: BackendDep, db: DbDep) -> Health:
    """Liveness plus what the index knows: a missing node degrades the status, not the answer."""
    db.execute(text("SELECT 1"))
    chain_id = head = indexed = None
    status = "ok"
    try:
        chain = backend.chain()
        chain_id = chain.deployment.chain_id
        head = chain.web3.eth.block_number
        cursor = db.get(m.IndexerCursor, chain_id)
        indexed = cursor.last_block if cursor else None
    except (ChainUnavailable, OSError, ValueError):
        status = "degraded: chain unreachable"
    return Health(status=status, database="ok", chain_id=chain_id, head_block=head, indexed_block=indexed)


@router.get("/deployment", response_model=DeploymentPublic, responses={503: {}})
def deployment(backend: BackendDep) -> DeploymentPublic:
    """The deployment this backend indexes: the dashboard checks the wallet's chain against it
    and reads the escrow and lease balances from the chain itself."""
    deployed = backend.chain().deployment
    return DeploymentPublic(chain_id=deployed.chain_id,
                            contracts={name: c.address for name, c in deployed.contracts.items()})


@router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
def metrics(backend: BackendDep, db: DbDep) -> Response:
    """Prometheus text format."""
    if backend.indexer is not None:
        cursor = db.get(m.IndexerCursor, backend.indexer.chain_id)
        if cursor is not None:
            backend.metrics.indexed_block.set(cursor.last_block)
    return Response(backend.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")
