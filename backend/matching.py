"""Ranking providers for a job.

Hard filters first (a provider that fails one is never offered): active, Proof of GPU passed
and not slashed since (protocol.availability, the rule `unchained provider list` shows), the renter's minimum GPU class, privacy (a private job goes only to providers that declared
private execution), price within the renter's maximum. Then a score where lower is better:

    price_rank + queue penalty + latency penalty - model-cached bonus - reputation bonus

Each term is normalised to [0, 1] over the candidates so no unit dominates; the weights say what
a renter trades for what (a cached model saves a download; a job queue delays the start).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

DATA_JSON = "data:application/json,"

W_PRICE = 1.0
W_QUEUE = 0.6
W_LATENCY = 0.3
W_CACHED = 0.5
W_REPUTATION = 0.8


@dataclass(frozen=True)
class Candidate:
    address: str
    gpu_class: str | None
    tflops_milli: int
    pog_passed: bool
    active: bool
    price_per_job_unit: int  # wei per item
    queue_length: int  # jobs funded or accepted, not yet committed
    latency_ms: int | None
    cached_models: frozenset[str]
    private_ok: bool
    challenges_won: int
    challenges_lost: int
    mining_floor_wei_per_hour: int | None = None
    slashed_since_pog: bool = False  # not trusted before a new PoG round passes


@dataclass(frozen=True)
class Request:
    model: str | None
    items: int
    private: bool = False
    max_price_wei: int | None = None  # for the whole job
    gpu_classes: frozenset[str] | None = None  # acceptable verified classes; None: any


@dataclass(frozen=True)
class Ranked:
    candidate: Candidate
    price_wei: int
    score: float
    reasons: tuple[str, ...]


def mining_floor(provider: Any, profile: Any) -> int | None:
    """The provider's mining yield per GPU-hour: its latest report to the backend, else what it
    published on-chain in its registry metadata (`data:application/json,{"miningYieldWeiPerGpuHour": ...}`)."""
    if profile is not None and profile.mining_floor_wei_per_hour is not None:
        return int(profile.mining_floor_wei_per_hour)
    uri = provider.metadata_uri or ""
    if uri.startswith(DATA_JSON):
        try:
            value = json.loads(uri[len(DATA_JSON):]).get("miningYieldWeiPerGpuHour")
            return int(value) if value is not None and str(value).isdigit() else None
        except (json.JSONDecodeError, AttributeError):
            return None
    return None


def reputation(c: Candidate) -> float:
    """Share of challenges the provider came out of clean, with a prior of one win and one
    loss (Laplace), so a new provider starts at 0.5 and one loss among many wins barely moves."""
    return (c.challenges_won + 1) / (c.challenges_won + c.challenges_lost + 2)


def _norm(values: list[float]) -> list[float]:
    low, high = min(values), max(values)
    return [0.0 if high == low else (v - low) / (high - low) for v in values]


def rank(request: Request, candidates: list[Candidate], stale: frozenset[str] = frozenset()) -> list[Ranked]:
    """Eligible candidates, best first; `stale` providers (no recent heartbeat) are left out."""
    eligible: list[tuple[Candidate, int]] = []
    for c in candidates:
        price = c.price_per_job_unit * request.items
        if not c.active or not c.pog_passed or c.slashed_since_pog or c.address in stale:
            continue
        if request.gpu_classes is not None and c.gpu_class not in request.gpu_classes:
            continue
        if request.private and not c.private_ok:
            continue
        if request.max_price_wei is not None and price > request.max_price_wei:
            continue
        eligible.append((c, price))
    if not eligible:
        return []
    prices = _norm([float(p) for _, p in eligible])
    queues = _norm([float(c.queue_length) for c, _ in eligible])
    worst_latency = max((c.latency_ms or 0) for c, _ in eligible)
    latencies = _norm([float(c.latency_ms if c.latency_ms is not None else worst_latency) for c, _ in eligible])
    ranked = []
    for (c, price), p, q, lat in zip(eligible, prices, queues, latencies, strict=True):
        cached = request.model is not None and request.model in c.cached_models
        rep = reputation(c)
        score = W_PRICE * p + W_QUEUE * q + W_LATENCY * lat - W_CACHED * cached - W_REPUTATION * rep
        reasons = [f"price {price} wei", f"queue {c.queue_length}", f"reputation {rep:.2f}"]
        if cached:
            reasons.append("model cached")
        ranked.append(Ranked(c, price, score, tuple(reasons)))
    ranked.sort(key=lambda r: (r.score, r.price_wei, r.candidate.address))
    return ranked


@dataclass(frozen=True)
class NoMatch:
    """Why no provider fits a request: `reason` is a stable word, `message` says it to a person."""

    reason: str  # no-providers | none-active | none-available | none-verified | none-in-class | none-private | price-too-low
    message: str
    cheapest_price_wei: int | None = None  # for the whole job, among providers that fit otherwise


def explain(request: Request, candidates: list[Candidate], stale: frozenset[str] = frozenset()) -> NoMatch | None:
    """The first hard filter that leaves nobody, in the order rank applies them (None: someone
    fits). `stale` are providers whose agent stopped beating (crashed or gone)."""
    def eth(wei: int) -> str:
        text = f"{Decimal(wei) / Decimal(10**18):.18f}".rstrip("0").rstrip(".")
        return text or "0"

    pool = list(candidates)
    if not pool:
        return NoMatch("no-providers", "no provider is registered yet")
    pool = [c for c in pool if c.active]
    if not pool:
        return NoMatch("none-active", f"none of the {len(candidates)} registered providers is active")
    live = [c for c in pool if c.address not in stale]
    if not live:
        return NoMatch("none-available", f"none of the {len(pool)} active providers is running: their agents "
                                         "stopped sending heartbeats")
    verified = [c for c in live if c.pog_passed]
    if not verified:
        return NoMatch("none-verified", f"no provider is verified yet: {len(live)} running provider(s) await their "
                                        "first Proof-of-GPU round (a verifier runs it within a minute of joining)")
    verified = [c for c in verified if not c.slashed_since_pog]
    if not verified:
        return NoMatch("none-verified", "every verified provider was slashed after its last passed Proof-of-GPU "
                                        "round: none is offered before it passes a new one")
    pool = verified
    if request.gpu_classes is not None:
        pool = [c for c in pool if c.gpu_class in request.gpu_classes]
        if not pool:
            classes = sorted({c.gpu_class or "-" for c in verified})
            return NoMatch("none-in-class", f"no verified provider of class {', '.join(sorted(request.gpu_classes))}; "
                                            f"verified classes: {', '.join(classes)}")
    if request.private:
        pool = [c for c in pool if c.private_ok]
        if not pool:
            return NoMatch("none-private", "no verified provider declares private execution (needed for a private model)")
    cheapest = min(c.price_per_job_unit * request.items for c in pool)
    if request.max_price_wei is not None and cheapest > request.max_price_wei:
        return NoMatch("price-too-low", f"your maximum {eth(request.max_price_wei)} ETH is below the cheapest "
                                        f"fitting provider's price for {request.items} items: {eth(cheapest)} ETH",
                       cheapest)
    return None
