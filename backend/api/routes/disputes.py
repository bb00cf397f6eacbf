from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from sqlalchemy import select

from backend import models as m
from backend.api.deps import DbDep
from backend.api.schemas import ADDRESS_PATTERN, ChallengePublic, DisputePublic
from backend.errors import NotFound

router = APIRouter(tags=["disputes"])
IdPath = Annotated[int, Path(ge=0, le=2**63 - 1)]


@router.get("/disputes", response_model=list[DisputePublic])
def list_disputes(
    db: DbDep,
    provider: Annotated[str | None, Query(pattern=ADDRESS_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> list[DisputePublic]:
    """Committee disputes (escalated job challenges) and their votes and verdicts."""
    query = select(m.Dispute).order_by(m.Dispute.dispute_id.desc())
    if provider:
        query = query.where(m.Dispute.provider == provider.lower())
    return [DisputePublic.model_validate(r) for r in db.scalars(query.limit(limit).offset(offset))]


@router.get("/disputes/{dispute_id}", response_model=DisputePublic, responses={404: {}})
def get_dispute(dispute_id: IdPath, db: DbDep) -> DisputePublic:
    row = db.get(m.Dispute, dispute_id)
    if row is None:
        raise NotFound("dispute", dispute_id)
    return DisputePublic.model_validate(row)


@router.get("/challenges", response_model=list[ChallengePublic])
def list_challenges(
    db: DbDep,
    provider: Annotated[str | None, Query(pattern=ADDRESS_PATTERN)] = None,
    kind: Annotated[str | None, Query(pattern=r"^(pog|job)$")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> list[ChallengePublic]:
    """Challenges of PoG rounds and job results, the source of providers' reputation."""
    query = select(m.Challenge).order_by(m.Challenge.challenge_id.desc())
    if provider:
        query = query.where(m.Challenge.provider == provider.lower())
    if kind:
        query = query.where(m.Challenge.kind == kind)
    return [ChallengePublic.model_validate(r) for r in db.scalars(query.limit(limit).offset(offset))]


@router.get("/challenges/{challenge_id}", response_model=ChallengePublic, responses={404: {}})
def get_challenge(challenge_id: IdPath, db: DbDep) -> ChallengePublic:
    row = db.get(m.Challenge, challenge_id)
    if row is None:
        raise NotFound("challenge", challenge_id)
    return ChallengePublic.model_validate(row)
