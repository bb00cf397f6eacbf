from __future__ import annotations

from fastapi import APIRouter

from backend import jobs as service
from backend.api.deps import BackendDep, DbDep
from backend.api.schemas import Quote, QuoteExplanation, QuoteRequest
from backend.matching import Request

router = APIRouter(tags=["jobs"])


def _request(body: QuoteRequest) -> Request:
    return Request(model=body.model, items=body.items, private=body.private,
                   max_price_wei=int(body.max_price_wei) if body.max_price_wei else None,
                   gpu_classes=frozenset(body.gpu_classes) if body.gpu_classes else None)


@router.post("/quotes", response_model=list[Quote])
def quotes(body: QuoteRequest, backend: BackendDep, db: DbDep) -> list[Quote]:
    """Providers able to run the job, best first: verified class, price, queue, cached model,
    latency, privacy and reputation (backend/matching.py). A provider whose agent stopped
    sending heartbeats is left out."""
    return [Quote(provider=r.candidate.address, price_wei=str(r.price_wei), score=round(r.score, 6),
                  gpu_class=r.candidate.gpu_class, reasons=list(r.reasons))
            for r in service.quote(db, _request(body), backend.settings.provider_stale_s,
                                         backend.min_provider_stake())]


@router.post("/quotes/explain", response_model=QuoteExplanation)
def explain(body: QuoteRequest, backend: BackendDep, db: DbDep) -> QuoteExplanation:
    """Why no provider fits: none registered, none active, none running (stale heartbeats),
    none verified yet (Proof-of-GPU pending), none of the wanted class, none private-capable, or
    the price (with the cheapest fitting price)."""
    why = service.why_no_quote(db, _request(body), backend.settings.provider_stale_s, backend.min_provider_stake())
    if why is None:
        return QuoteExplanation(fits=True)
    return QuoteExplanation(fits=False, reason=why.reason, message=why.message,
                            cheapest_price_wei=str(why.cheapest_price_wei) if why.cheapest_price_wei is not None
                            else None)
