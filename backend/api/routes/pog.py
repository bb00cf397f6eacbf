from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from sqlalchemy import select

from backend import models as m
from backend.api.deps import DbDep
from backend.api.schemas import ADDRESS_PATTERN, PogRoundPublic
from backend.errors import NotFound

router = APIRouter(prefix="/pog", tags=["proof of GPU"])


@router.get("/rounds", response_model=list[PogRoundPublic])
def list_rounds(
    db: DbDep,
    provider: Annotated[str | None, Query(pattern=ADDRESS_PATTERN)] = None,
    status: Annotated[str | None, Query(max_length=16)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> list[PogRoundPublic]:
    query = select(m.PogRound).order_by(m.PogRound.round_id.desc())
    if provider:
        query = query.where(m.PogRound.provider == provider.lower())
    if status:
        query = query.where(m.PogRound.status == status)
    return [PogRoundPublic.model_validate(r) for r in db.scalars(query.limit(limit).offset(offset))]


@router.get("/rounds/{round_id}", response_model=PogRoundPublic, responses={404: {}})
def get_round(round_id: Annotated[int, Path(ge=0, le=2**63 - 1)], db: DbDep) -> PogRoundPublic:
    row = db.get(m.PogRound, round_id)
    if row is None:
        raise NotFound("PoG round", round_id)
    return PogRoundPublic.model_validate(row)
