from __future__ import annotations

from fastapi import APIRouter

from backend import jobs as service
from backend.api.deps import DbDep
from backend.api.schemas import Quote, QuoteRequest
from backend.matching import Request

router = APIRouter(tags=["jobs"])


@router.post("/quotes", response_model=list[Quote])
def quotes(body: QuoteRequest, db: DbDep) -> list[Quote]:
    """Providers able to run the job, best first: verified class, price, queue, cached model,
    latency, privacy and reputation (backend/matching.py)."""
    request = Request(model=body.model, items=body.items, private=body.private,
                      max_price_wei=int(body.max_price_wei) if body.max_price_wei else None,
                      gpu_classes=frozenset(body.gpu_classes) if body.gpu_classes else None)
    return [Quote(provider=r.candidate.address, price_wei=str(r.price_wei), score=round(r.score, 6),
                  gpu_class=r.candidate.gpu_class, reasons=list(r.reasons))
            for r in service.quote(db, request)]
