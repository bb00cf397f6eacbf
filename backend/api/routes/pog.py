from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Path, Query
from sqlalchemy import delete, select
from sqlalchemy.orm import selectinload

from backend import models as m
from backend.api.deps import BackendDep, DbDep, SignedInDep
from backend.api.schemas import ADDRESS_PATTERN, PogDevicePublic, PogDevicesIn, PogRoundPublic
from backend.errors import BadInput, Forbidden, NotFound

log = logging.getLogger(__name__)
router = APIRouter(prefix="/pog", tags=["proof of GPU"])
RoundIdPath = Annotated[int, Path(ge=0, le=2**63 - 1)]


@router.get("/rounds", response_model=list[PogRoundPublic])
def list_rounds(
    db: DbDep,
    provider: Annotated[str | None, Query(pattern=ADDRESS_PATTERN)] = None,
    status: Annotated[str | None, Query(max_length=16)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> list[PogRoundPublic]:
    query = select(m.PogRound).options(selectinload(m.PogRound.devices)).order_by(m.PogRound.round_id.desc())
    if provider:
        query = query.where(m.PogRound.provider == provider.lower())
    if status:
        query = query.where(m.PogRound.status == status)
    return [PogRoundPublic.model_validate(r) for r in db.scalars(query.limit(limit).offset(offset))]


@router.get("/rounds/{round_id}", response_model=PogRoundPublic, responses={404: {}})
def get_round(round_id: RoundIdPath, db: DbDep) -> PogRoundPublic:
    row = db.get(m.PogRound, round_id)
    if row is None:
        raise NotFound("PoG round", round_id)
    return PogRoundPublic.model_validate(row)


@router.put("/rounds/{round_id}/devices", response_model=list[PogDevicePublic],
            responses={401: {}, 403: {}, 404: {}, 422: {}})
def record_devices(round_id: RoundIdPath, body: PogDevicesIn, signer: SignedInDep, backend: BackendDep,
                   db: DbDep) -> list[PogDevicePublic]:
    """The round's own verifier records each device: what the prover's NVML reported (a claim)
    and its confidential-computing attestation outcome. Sent again, it replaces the record."""
    indices = [d.gpu_index for d in body.devices]
    if len(set(indices)) != len(indices):
        raise BadInput("each gpu_index once")
    verifier = backend.chain().pog_round_verifier(round_id)
    if verifier is None:
        raise NotFound("PoG round", round_id)
    if verifier != signer.lower():
        raise Forbidden(f"round {round_id} belongs to verifier {verifier}, not {signer.lower()}")
    now = datetime.now(UTC)
    db.execute(delete(m.PogDevice).where(m.PogDevice.round_id == round_id))
    rows = [m.PogDevice(round_id=round_id, verifier=verifier, reported_at=now, **d.model_dump())
            for d in body.devices]
    db.add_all(rows)
    db.commit()
    log.info("verifier %s recorded %s devices of PoG round %s: %s", verifier, len(rows), round_id,
             ", ".join(sorted({r.attestation for r in rows})))
    return [PogDevicePublic.model_validate(r) for r in rows]
