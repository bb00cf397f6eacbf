"""How many items of a job to re-execute: enough to catch a corrupted fraction with confidence."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from verifier import VerifierError

MAX_K = 64  # ChallengeManager's bound on challenged leaves


def sample_size(item_count: int, corrupted: float = 0.10, confidence: float = 0.99) -> int:
    """The smallest k with (1 - corrupted)^k <= 1 - confidence (independent uniform draws),
    capped by the item count (then every item is checked) and by the contract's maximum.

    At 10% and 0.99 this is 44: a provider who corrupted 10% of its items escapes 44 draws with
    probability 0.9^44 = 0.0097.
    """
    if item_count < 1:
        raise VerifierError(f"a job has at least one item, not {item_count}")
    if not (0 < corrupted < 1 and 0 < confidence < 1):
        raise VerifierError("corrupted and confidence must lie strictly between 0 and 1")
    k = math.ceil(math.log(1 - confidence) / math.log(1 - corrupted))
    return min(k, item_count, MAX_K)


def sample_items(item_count: int, k: int, rng: random.Random) -> Sequence[int]:
    """k item indices drawn uniformly; every item when k covers them all."""
    if k >= item_count:
        return range(item_count)
    return sorted(rng.sample(range(item_count), k))
