"""The market's offers as a renter shops them: the backend's list of providers, with what moves
money read from the chain.

The backend indexes providers and knows what only it can know (the agent's last heartbeat, the
reputation from challenges); the chain decides the rest. A backend siding with a provider could
show a lower price, a larger stake, a passed Proof of GPU or free GPUs that are not there, so
those come from the contracts, in one batch of reads. A provider is available when the matcher
would offer it (backend/matching.py): active on-chain (registered, not deactivated, at least the
minimum stake), its last PoG round passed, its agent heard recently; and, on top, not slashed
since that round (a PoG challenge the provider lost slashes it without touching its PoG status).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from client import blocks
from client.chain import ChainContext
from client.contracts import ViewCall, read_batched
from client.log_follower import events_between
from renter.client import BackendClient

PROVIDERS_PAGE = 500  # the backend's largest page of /providers


@dataclass(frozen=True)
class Offer:
    """One provider's offer; amounts in wei, times in unix seconds (None: never)."""

    address: str
    gpu_model: str  # what the provider claims, from its registration on-chain
    gpu_class: str | None  # what its last passed PoG round identified
    tflops: float | None
    gpus: int
    free_gpus: int  # not leased now
    price_per_gpu_hour: int
    price_per_job_unit: int
    stake: int
    reputation: float
    challenges_won: int
    challenges_lost: int
    pog_round_id: int | None
    pog_passed: bool | None  # None: never ran a round
    pog_at: int | None
    slashed_at: int | None  # the latest slash of its stake
    last_seen: int | None  # the agent's last heartbeat, as the backend heard it
    available: bool
    why_not: list[str]  # empty when available

    def as_json(self) -> dict[str, Any]:
        doc = asdict(self)
        for key in ("price_per_gpu_hour", "price_per_job_unit", "stake"):
            doc[key] = str(doc[key])
        return doc


def _text(raw: bytes) -> str:
    return raw.rstrip(b"\0").decode(errors="replace")


def _unix(iso: str | None) -> int | None:
    from datetime import datetime

    return int(datetime.fromisoformat(iso).timestamp()) if iso else None


def list_offers(client: BackendClient, chain: ChainContext) -> list[Offer]:
    """Every provider the backend lists, its money and proof read from the chain."""
    rows = client.get("/providers", limit=PROVIDERS_PAGE)
    registry, staking, leases = (chain.contract(n) for n in ("ProviderRegistry", "Staking", "LeaseManager"))
    views = [ViewCall(registry, "providerOf"), ViewCall(registry, "pogStatusOf"), ViewCall(registry, "isActive"),
             ViewCall(staking, "stakeOf"), ViewCall(leases, "availableGpusOf")]
    addresses = [chain.web3.to_checksum_address(r["address"]) for r in rows]
    requests = [v.request(a) for a in addresses for v in views]
    values = read_batched(chain.web3, requests, [v.decode for _ in addresses for v in views])
    minimum = registry.functions.minProviderStake().call()
    slashed = _last_slashes(chain, set(addresses))
    offers = []
    for i, (row, address) in enumerate(zip(rows, addresses, strict=True)):
        provider, pog, active, stake, free = values[i * len(views):(i + 1) * len(views)]
        pog_at = pog.timestamp or None
        last_seen = _unix(row.get("last_seen_at"))
        why = _why_not(provider, pog, active, stake, minimum, slashed.get(address), row, last_seen)
        offers.append(Offer(
            address=address, gpu_model=_text(provider.gpuModel), gpu_class=_text(pog.gpuClass) if pog.passed else None,
            tflops=pog.tflopsMilli / 1000 if pog.passed else None, gpus=len(provider.uuidHashes), free_gpus=free,
            price_per_gpu_hour=provider.pricePerGpuHour, price_per_job_unit=provider.pricePerJobUnit, stake=stake,
            reputation=float(row.get("reputation", 0.0)), challenges_won=int(row.get("challenges_won", 0)),
            challenges_lost=int(row.get("challenges_lost", 0)), pog_round_id=pog.roundId or None,
            pog_passed=pog.passed if pog_at else None, pog_at=pog_at, slashed_at=slashed.get(address),
            last_seen=last_seen, available=not why, why_not=why))
    return offers


def _last_slashes(chain: ChainContext, providers: set[str]) -> dict[str, int]:
    """When each of `providers` was last slashed (unix seconds of the block), from Staking's
    Slashed events: slashes are rare, so one read of them all, then one header per slashed provider."""
    latest: dict[str, int] = {}
    staking = chain.deployment.contract("Staking")
    for e in events_between(chain.web3, chain.deployment, {"Staking": ["Slashed"]}, staking.block):
        offender = chain.web3.to_checksum_address(e.args["offender"])
        if offender in providers and e.args["slashed"]:
            latest[offender] = max(latest.get(offender, 0), e.block_number)
    return {a: blocks.timestamp(chain.web3, block) for a, block in latest.items()}


def _why_not(provider: Any, pog: Any, active: bool, stake: int, minimum: int, slashed_at: int | None,
             row: dict[str, Any], last_seen: int | None) -> list[str]:
    """Why a renter cannot count on this provider now, in words (empty: it is available)."""
    from client.units import eth, iso

    why = []
    if not provider.registeredAt:  # only the backend lists it
        return ["not registered on-chain"]
    if provider.deactivated:
        why.append("deactivated by its owner")
    elif not active and stake < minimum:
        cause = f"slashed at {iso(slashed_at)}, " if slashed_at else ""
        why.append(f"{cause}stake {eth(stake)} below the minimum {eth(minimum)}")
    if not pog.timestamp:
        why.append("never passed a Proof of GPU round")
    elif not pog.passed:
        why.append(f"failed its last Proof of GPU (round {pog.roundId}, {iso(pog.timestamp)})")
    elif slashed_at and slashed_at >= pog.timestamp and active:
        why.append(f"slashed at {iso(slashed_at)}, after its last passed Proof of GPU (round {pog.roundId}): "
                   "not trusted again before it passes a new one")
    # The backend alone hears heartbeats; it calls an agent silent past its bound (when it still
    # takes the provider as active: otherwise the chain's reason above says more).
    if active and row.get("active", True) and not row.get("available", True):
        why.append(f"its agent is silent since {iso(last_seen)}" if last_seen else "its agent never sent a heartbeat")
    return why


__all__ = ["Offer", "list_offers"]
