"""When to run Proof-of-GPU rounds: one per provider per interval, at a random offset.

The random delay keeps a provider from knowing when its next round comes (it cannot keep a GPU
free only around a known time); a bound on concurrent rounds keeps the verifier's own timing
honest; transient failures (network, RPC) are retried with exponential backoff before the round
counts as failed. A provider under lease is not re-benchmarked (its GPUs belong to the renter),
but its last committed roots stay challengeable on-chain.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import Enum

from verifier import VerifierError

logger = logging.getLogger(__name__)


class TransientRoundError(VerifierError):
    """A round could not run for a reason that may pass (RPC down, timeout); worth a retry."""


@dataclass(frozen=True)
class ProviderState:
    """What the scheduler needs to know of a provider (read from the registry and leases)."""

    address: str
    active: bool
    leased: bool
    # A round has been recorded for it on-chain (passed or failed); a new provider (False) is
    # benchmarked at once.
    recorded: bool = True


class Outcome(Enum):
    PASSED = "passed"
    FAILED = "failed"  # the provider failed the round (a verdict, not an error of ours)
    GAVE_UP = "gave_up"  # transient errors outlasted the retries; no verdict
    RETRY = "retry"  # a transient error; retried later


@dataclass(frozen=True)
class RoundReport:
    provider: str
    outcome: Outcome
    attempt: int
    detail: str = ""


@dataclass
class _Plan:
    next_at: float
    attempt: int = 0


RunRound = Callable[[str], bool]  # provider -> passed; raises TransientRoundError to retry


@dataclass
class PogScheduler:
    run_round: RunRound
    interval_s: float = 6 * 3600.0
    jitter_s: float = 3600.0  # each round lands uniformly in [due, due + jitter]
    max_concurrent: int = 2
    max_retries: int = 3
    backoff_s: float = 30.0  # first retry delay; doubles on each retry
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.SystemRandom)
    _plans: dict[str, _Plan] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        if self.max_concurrent < 1 or self.max_retries < 0 or self.interval_s <= 0:
            raise VerifierError("scheduler needs max_concurrent >= 1, max_retries >= 0, interval_s > 0")

    def next_round_at(self, provider: str) -> float | None:
        plan = self._plans.get(provider)
        return plan.next_at if plan else None

    def due(self, providers: Iterable[ProviderState]) -> list[str]:
        """Providers whose round is due now, earliest first. A provider with no round on record is
        due at once when first seen (a new provider cannot take jobs until it passes, so it must not wait
        an interval); one with a round on record seen for the first time (e.g. after our restart) is planned at
        a random point of the coming jitter window; leased and inactive ones are skipped and
        planned again one interval on."""
        now = self.clock()
        due = []
        for p in providers:
            plan = self._plans.get(p.address)
            if plan is None:
                plan = self._plans[p.address] = _Plan(now if not p.recorded else now + self.rng.uniform(0, self.jitter_s))
                if p.recorded:
                    continue
            if plan.next_at > now:
                continue
            if p.leased or not p.active:
                logger.info("provider %s skipped (%s)", p.address, "leased" if p.leased else "inactive")
                plan.next_at = self._after_interval(now)
                plan.attempt = 0
                continue
            due.append(p.address)
        return sorted(due, key=lambda a: self._plans[a].next_at)

    def tick(self, providers: Iterable[ProviderState]) -> list[RoundReport]:
        """Runs the rounds that are due, at most max_concurrent at a time."""
        due = self.due(providers)
        if not due:
            return []
        with ThreadPoolExecutor(max_workers=self.max_concurrent) as pool:
            return list(pool.map(self._run_one, due))

    def _run_one(self, provider: str) -> RoundReport:
        plan = self._plans[provider]
        attempt = plan.attempt
        try:
            passed = self.run_round(provider)
        except TransientRoundError as exc:
            if attempt >= self.max_retries:
                logger.warning("provider %s: round given up after %d retries: %s", provider, attempt, exc)
                plan.next_at, plan.attempt = self._after_interval(self.clock()), 0
                return RoundReport(provider, Outcome.GAVE_UP, attempt, str(exc))
            delay = self.backoff_s * 2**attempt
            logger.info("provider %s: transient error (%s); retry %d in %.0f s", provider, exc, attempt + 1, delay)
            plan.next_at, plan.attempt = self.clock() + delay, attempt + 1
            return RoundReport(provider, Outcome.RETRY, attempt, str(exc))
        plan.next_at, plan.attempt = self._after_interval(self.clock()), 0
        outcome = Outcome.PASSED if passed else Outcome.FAILED
        logger.info("provider %s: round %s", provider, outcome.value)
        return RoundReport(provider, outcome, attempt)

    def _after_interval(self, now: float) -> float:
        return now + self.interval_s + self.rng.uniform(0, self.jitter_s)
