"""The market's offers as a renter shops them: the backend's list of providers, with what moves
money read from the chain.

The backend indexes providers and knows what only it can know (the agent's last heartbeat, the
reputation from challenges); the chain decides the rest. A backend siding with a provider could
show a lower price, a larger stake, a passed Proof of GPU or free GPUs that are not there, so
those come from the contracts, in one batch of reads. Whether a provider is available, and why
not, is protocol.availability's rule, the one the backend's /providers and matcher apply: here
on the chain's facts, with the backend's word only on what the chain cannot know (a silent agent).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from client import blocks
from client.chain import ChainContext
from client.contracts import ViewCall, read_batched
from client.log_follower import events_between
from protocol import availability
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
    views = [ViewCall(registry, "providerOf"), ViewCall(registry, "pogStatusOf"), ViewCall(staking, "stakeOf"),
             ViewCall(leases, "availableGpusOf")]
    addresses = [chain.web3.to_checksum_address(r["address"]) for r in rows]
    requests = [v.request(a) for a in addresses for v in views]
    values = read_batched(chain.web3, requests, [v.decode for _ in addresses for v in views])
    minimum = registry.functions.minProviderStake().call()
    slashes = _slashes(chain, set(addresses))
    offers = []
    for i, (row, address) in enumerate(zip(rows, addresses, strict=True)):
        provider, pog, stake, free = values[i * len(views):(i + 1) * len(views)]
        pog_at = pog.timestamp or None
        last_seen = _unix(row.get("last_seen_at"))
        slash = slashes.get(address)
        why = availability.why_not(availability.ProviderFacts(
            registered=bool(provider.registeredAt), deactivated=provider.deactivated, stake=stake, minimum=minimum,
            slashed=slash.total if slash else 0, pog_round_id=pog.roundId or None,
            pog_passed=pog.passed if pog_at else None, pog_at=slash.pog_block if slash else None,
            slashed_at=slash.block if slash else None,
            # The backend alone hears heartbeats.
            silent_since=last_seen if row.get("agent_silent") else None))
        offers.append(Offer(
            address=address, gpu_model=_text(provider.gpuModel), gpu_class=_text(pog.gpuClass) if pog.passed else None,
            tflops=pog.tflopsMilli / 1000 if pog.passed else None, gpus=len(provider.uuidHashes), free_gpus=free,
            price_per_gpu_hour=provider.pricePerGpuHour, price_per_job_unit=provider.pricePerJobUnit, stake=stake,
            reputation=float(row.get("reputation", 0.0)), challenges_won=int(row.get("challenges_won", 0)),
            challenges_lost=int(row.get("challenges_lost", 0)), pog_round_id=pog.roundId or None,
            pog_passed=pog.passed if pog_at else None, pog_at=pog_at, slashed_at=slash.at if slash else None,
            last_seen=last_seen, available=not why, why_not=why))
    return offers


@dataclass(frozen=True)
class _Slash:
    block: int  # of its latest slash
    at: int  # that block's unix time
    total: int  # wei lost to slashes, all told
    pog_block: int  # of its last PoG record, or any block before the slash when that record is older


def _slashes(chain: ChainContext, providers: set[str]) -> dict[str, _Slash]:
    """The slashes of `providers`, from Staking's Slashed events, and where each one's last PoG
    record lies against its latest slash: ordered by block, as the backend orders them (two
    blocks can share a second). Slashes are rare, so one read of them all, then the PoG records
    since the earliest of them and one header per slashed provider."""
    web3 = chain.web3
    latest: dict[str, int] = {}
    total: dict[str, int] = {}
    staking = chain.deployment.contract("Staking")
    for e in events_between(web3, chain.deployment, {"Staking": ["Slashed"]}, staking.block):
        offender = web3.to_checksum_address(e.args["offender"])
        if offender in providers and e.args["slashed"]:
            latest[offender] = max(latest.get(offender, 0), e.block_number)
            total[offender] = total.get(offender, 0) + e.args["slashed"]
    if not latest:
        return {}
    since = min(latest.values())
    recorded = events_between(web3, chain.deployment, {"ProviderRegistry": ["PogStatusRecorded"]}, since)
    records: dict[str, int] = {web3.to_checksum_address(e.args["provider"]): e.block_number for e in recorded}
    return {a: _Slash(block, blocks.timestamp(web3, block), total[a], records.get(a, since - 1))
            for a, block in latest.items()}


__all__ = ["Offer", "list_offers"]
