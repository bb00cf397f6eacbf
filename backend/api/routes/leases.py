from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from sqlalchemy import select

from backend import models as m
from backend.api.deps import DbDep, PartyFilterDep
from backend.api.schemas import LeasePublic
from backend.errors import NotFound

router = APIRouter(prefix="/leases", tags=["leases"])


@router.get("", response_model=list[LeasePublic])
def list_leases(db: DbDep, filters: PartyFilterDep) -> list[LeasePublic]:
    query = filters.apply(select(m.Lease).order_by(m.Lease.lease_id.desc()), m.Lease)
    return [LeasePublic.model_validate(r) for r in db.scalars(query)]


@router.get("/{lease_id}", response_model=LeasePublic, responses={404: {}})
def get_lease(lease_id: Annotated[int, Path(ge=0, le=2**63 - 1)], db: DbDep) -> LeasePublic:
    row = db.get(m.Lease, lease_id)
    if row is None:
        raise NotFound("lease", lease_id)
    return LeasePublic.model_validate(row)
