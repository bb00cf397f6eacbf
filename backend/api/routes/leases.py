from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from sqlalchemy import select

from backend import models as m
from backend.api.deps import DbDep
from backend.api.schemas import ADDRESS_PATTERN, LeasePublic
from backend.errors import NotFound

router = APIRouter(prefix="/leases", tags=["leases"])


@router.get("", response_model=list[LeasePublic])
def list_leases(
    db: DbDep,
    renter: Annotated[str | None, Query(pattern=ADDRESS_PATTERN)] = None,
    provider: Annotated[str | None, Query(pattern=ADDRESS_PATTERN)] = None,
    status: Annotated[str | None, Query(max_length=16)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> list[LeasePublic]:
    query = select(m.Lease).order_by(m.Lease.lease_id.desc())
    if renter:
        query = query.where(m.Lease.renter == renter.lower())
    if provider:
        query = query.where(m.Lease.provider == provider.lower())
    if status:
        query = query.where(m.Lease.status == status)
    return [LeasePublic.model_validate(r) for r in db.scalars(query.limit(limit).offset(offset))]


@router.get("/{lease_id}", response_model=LeasePublic, responses={404: {}})
def get_lease(lease_id: Annotated[int, Path(ge=0, le=2**63 - 1)], db: DbDep) -> LeasePublic:
    row = db.get(m.Lease, lease_id)
    if row is None:
        raise NotFound("lease", lease_id)
    return LeasePublic.model_validate(row)
