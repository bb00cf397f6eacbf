from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Path, Query
from sqlalchemy import select
from sqlalchemy.orm import selectinload

from backend import models as m
from backend.api.deps import BackendDep, DbDep, SignedInDep
from backend.api.schemas import (
    ADDRESS_PATTERN,
    MiningReport,
    PogRoundPublic,
    ProviderProfileUpdate,
    ProviderPublic,
)
from backend.auth import _aware, utcnow
from backend.errors import Forbidden, NotFound
from backend.jobs import provider_facts
from backend.matching import Candidate, mining_floor, reputation
from protocol import availability

router = APIRouter(prefix="/providers", tags=["providers"])
AddressPath = Annotated[str, Path(pattern=ADDRESS_PATTERN)]


def to_public(p: m.Provider, stale_after_s: float | None = None, min_stake: int | None = None) -> ProviderPublic:
    stake, profile = p.stake, p.profile
    seen = _aware(profile.last_seen_at) if profile and profile.last_seen_at else None
    silent = seen is not None and stale_after_s is not None and utcnow() - seen > timedelta(seconds=stale_after_s)
    facts = provider_facts(p, stake, min_stake, int(seen.timestamp()) if seen and silent else None)
    why = availability.why_not(facts)
    rep = reputation(Candidate(p.address, None, 0, False, True, 0, 0, None, frozenset(), False,
                               p.challenges_won, p.challenges_lost))
    return ProviderPublic(
        address=p.address, gpu_model=p.gpu_model, gpu_count=p.gpu_count, gpu_class=p.gpu_class,
        tflops=(p.tflops_milli / 1000) if p.tflops_milli and p.pog_passed else None, pog_passed=p.pog_passed,
        pog_round_id=p.pog_round_id, price_per_gpu_hour=p.price_per_gpu_hour,
        price_per_job_unit=p.price_per_job_unit, reputation=round(rep, 4),
        challenges_won=p.challenges_won, challenges_lost=p.challenges_lost, jobs_finalized=p.jobs_finalized,
        metadata_uri=p.metadata_uri, stake_bonded=stake.bonded if stake else 0,
        cached_models=list(profile.cached_models) if profile else [],
        private_ok=profile.private_ok if profile else False,
        latency_ms=profile.latency_ms if profile else None,
        mining_floor_wei_per_hour=mining_floor(p, profile),
        miner=profile.miner if profile else None,
        hashrate=profile.hashrate if profile else None,
        last_seen_at=seen, agent_silent=silent,
        stake_slashed=stake.slashed if stake else 0,
        active=availability.active(facts), available=not why, why_not=why,
    )


@router.get("", response_model=list[ProviderPublic])
def list_providers(
    db: DbDep,
    backend: BackendDep,
    verified: Annotated[bool | None, Query(description="only providers whose last PoG round passed")] = None,
    gpu_class: Annotated[str | None, Query(max_length=32)] = None,
    active: bool | None = None,
    available: Annotated[bool | None, Query(description=(
        "only providers a renter can count on now (empty why_not): active, verified by a Proof of GPU "
        "round it was not slashed since, and whose agent is not silent (not crashed)"))] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> list[ProviderPublic]:
    query = select(m.Provider).order_by(m.Provider.registered_block, m.Provider.address).options(
        selectinload(m.Provider.stake), selectinload(m.Provider.profile))
    if verified is not None:
        query = query.where(m.Provider.pog_passed.is_(True) if verified else m.Provider.pog_passed.isnot(True))
    if gpu_class is not None:
        query = query.where(m.Provider.gpu_class == gpu_class)
    min_stake = backend.min_provider_stake()
    rows = [to_public(p, backend.settings.provider_stale_s, min_stake) for p in db.scalars(query)]
    if active is not None:  # on-chain activity includes the stake, which the row alone does not say
        rows = [r for r in rows if r.active is active]
    if available is not None:
        rows = [r for r in rows if r.available is available]
    return rows[offset:offset + limit]


@router.post("/{address}/heartbeat", status_code=204, responses={401: {}, 403: {}, 404: {}})
def heartbeat(address: AddressPath, signer: SignedInDep, db: DbDep) -> None:
    """The provider agent says it is alive (signed in as the provider), every heartbeat. A
    provider silent for longer than the backend's bound (UNCHAINED_BACKEND_PROVIDER_STALE_S) is
    shown unavailable and not offered to renters."""
    _, profile = _own_profile(db, signer, address)
    profile.last_seen_at = profile.updated_at = utcnow()
    db.add(profile)
    db.commit()


@router.get("/{address}", response_model=ProviderPublic, responses={404: {}})
def get_provider(address: AddressPath, db: DbDep, backend: BackendDep) -> ProviderPublic:
    provider = db.get(m.Provider, address.lower())
    if provider is None:
        raise NotFound("provider", address)
    return to_public(provider, backend.settings.provider_stale_s, backend.min_provider_stake())


@router.get("/{address}/pog", response_model=list[PogRoundPublic])
def provider_pog_history(address: AddressPath, db: DbDep,
                         limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> list[PogRoundPublic]:
    """The provider's Proof-of-GPU rounds, newest first (the dashboard's history chart)."""
    rows = db.scalars(select(m.PogRound).options(selectinload(m.PogRound.devices))
                      .where(m.PogRound.provider == address.lower())
                      .order_by(m.PogRound.round_id.desc()).limit(limit))
    return [PogRoundPublic.model_validate(r) for r in rows]


@router.put("/{address}/profile", response_model=ProviderPublic, responses={401: {}, 403: {}, 404: {}})
def update_profile(address: AddressPath, body: ProviderProfileUpdate, signer: SignedInDep, db: DbDep) -> ProviderPublic:
    """What only the provider can tell (signed in as itself): cached models, private execution,
    latency and its mining-yield floor."""
    provider, profile = _own_profile(db, signer, address)
    profile.cached_models = sorted(set(body.cached_models))
    profile.private_ok = body.private_ok
    profile.latency_ms = body.latency_ms
    profile.mining_floor_wei_per_hour = (int(body.mining_floor_wei_per_hour)
                                         if body.mining_floor_wei_per_hour is not None else None)
    profile.updated_at = utcnow()
    db.add(profile)
    db.commit()
    return to_public(provider)


def _own_profile(db, signer: str, address: str) -> tuple[m.Provider, m.ProviderProfile]:  # type: ignore[no-untyped-def]
    """The signed-in provider's row and its (possibly new) off-chain profile."""
    address = address.lower()
    if signer != address:
        raise Forbidden(f"signed in as {signer}, not {address}")
    provider = db.get(m.Provider, address)
    if provider is None:
        raise NotFound("provider", address)
    profile = db.get(m.ProviderProfile, address) or m.ProviderProfile(address=address, cached_models=[],
                                                                       private_ok=False)
    return provider, profile


@router.post("/{address}/mining", response_model=ProviderPublic, responses={401: {}, 403: {}, 404: {}})
def report_mining(address: AddressPath, body: MiningReport, signer: SignedInDep, db: DbDep) -> ProviderPublic:
    """The provider agent's mining report (signed in as the provider): its yield per GPU-hour is
    the floor under its prices; the same figure is also published on-chain in its metadata."""
    provider, profile = _own_profile(db, signer, address)
    profile.mining_floor_wei_per_hour = int(body.miningYieldWeiPerGpuHour)
    profile.miner, profile.hashrate = body.miner, body.hashrate
    profile.updated_at = utcnow()
    db.add(profile)
    db.commit()
    return to_public(provider)
