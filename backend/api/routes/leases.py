from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Path
from sqlalchemy import select

from backend import models as m
from backend.api.deps import BackendDep, DbDep, PartyFilterDep
from backend.api.schemas import LeaseAccessIn, LeaseKeyIn, LeasePublic
from backend.errors import Conflict, Forbidden, NotFound
from backend.lease_images import holds_image
from protocol.lease_access import LeaseAccess, LeaseDomain, LeaseKey, LeaseMessageError, verify

log = logging.getLogger(__name__)
router = APIRouter(prefix="/leases", tags=["leases"])
LeaseIdPath = Annotated[int, Path(ge=0, le=2**63 - 1)]


@router.get("", response_model=list[LeasePublic])
def list_leases(db: DbDep, filters: PartyFilterDep) -> list[LeasePublic]:
    query = filters.apply(select(m.Lease).order_by(m.Lease.lease_id.desc()), m.Lease)
    return [LeasePublic.model_validate(r) for r in db.scalars(query)]


@router.get("/{lease_id}", response_model=LeasePublic, responses={404: {}})
def get_lease(lease_id: LeaseIdPath, db: DbDep) -> LeasePublic:
    row = db.get(m.Lease, lease_id)
    if row is None:
        raise NotFound("lease", lease_id)
    return LeasePublic.model_validate(row)


def _active_lease(db: DbDep, lease_id: int) -> m.Lease:
    row = db.get(m.Lease, lease_id)
    if row is None:
        raise NotFound("lease", lease_id)  # also while the indexer has not seen LeaseStarted yet
    if row.status != "active":
        raise Conflict(f"lease {lease_id} has ended")
    return row


def _domain(backend: BackendDep) -> LeaseDomain:
    chain = backend.chain()
    return LeaseDomain(chain.deployment.chain_id, chain.contract("LeaseManager").address)


@router.put("/{lease_id}/key", status_code=204, responses={403: {}, 404: {}, 409: {}})
def put_key(lease_id: LeaseIdPath, body: LeaseKeyIn, backend: BackendDep, db: DbDep) -> None:
    """The renter binds its SSH public key and image to its lease (EIP-712 LeaseKey signed by the
    renter's wallet); the provider re-checks the signature against the chain before accepting
    them. The image must be one the renter uploaded (POST /lease-images): naming another's, or
    bytes nobody uploaded, is refused. Once bound, key and image stay: different ones are refused."""
    row = _active_lease(db, lease_id)
    try:
        key = LeaseKey(lease_id, body.sshPublicKey.strip(), body.image)
        verify(_domain(backend), key, bytes.fromhex(body.signature[2:]), row.renter)
    except LeaseMessageError as exc:
        raise Forbidden(str(exc)) from exc
    if key.has_image and not holds_image(db, key.image, row.renter):
        raise Forbidden(f"lease {lease_id}: image {key.image} was not uploaded by the lease's renter")
    if row.ssh_public_key is not None and (row.ssh_public_key, row.image) != (key.ssh_public_key, key.image):
        raise Conflict(f"lease {lease_id} already has an SSH key and image")
    row.ssh_public_key, row.image, row.key_signature = key.ssh_public_key, key.image, body.signature
    db.commit()
    log.info("lease %s: SSH key and image %s bound by renter %s", lease_id, key.image, row.renter)


@router.put("/{lease_id}/access", status_code=204, responses={403: {}, 404: {}, 409: {}})
def put_access(lease_id: LeaseIdPath, body: LeaseAccessIn, backend: BackendDep, db: DbDep) -> None:
    """The provider publishes where the lease's machine answers (EIP-712 LeaseAccess signed by the
    lease's provider); the renter checks the signature and pins the host key."""
    row = _active_lease(db, lease_id)
    try:
        access = LeaseAccess(lease_id, body.host, body.port, body.user, body.hostKeyFingerprint)
        verify(_domain(backend), access, bytes.fromhex(body.signature[2:]), row.provider)
    except LeaseMessageError as exc:
        raise Forbidden(str(exc)) from exc
    row.access, row.access_signature = access.message(), body.signature
    db.commit()
    log.info("lease %s: connection details from provider %s (port %s)", lease_id, row.provider, access.port)
