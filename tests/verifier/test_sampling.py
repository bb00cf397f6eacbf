import math
import random

import pytest

from verifier import VerifierError
from verifier.sampling import sample_items, sample_size


def test_sample_size_catches_ten_percent_corruption_with_99_percent_confidence():
    k = sample_size(10_000)
    assert k == 44
    assert 0.9**k <= 0.01 < 0.9 ** (k - 1)


def test_small_jobs_are_checked_in_full_and_k_respects_the_contract_bound():
    assert sample_size(7) == 7
    assert list(sample_items(7, 7, random.Random(0))) == list(range(7))
    assert sample_size(10**6, corrupted=0.01) == 64


def test_sampling_catches_a_ten_percent_cheater_at_the_promised_rate():
    rng = random.Random(42)
    items, k = 1000, sample_size(1000)
    corrupted = set(rng.sample(range(items), items // 10))
    trials = 2000
    caught = sum(any(i in corrupted for i in sample_items(items, k, rng)) for _ in range(trials))
    # Without replacement the catch rate is at least the with-replacement bound 1 - 0.9^44.
    assert caught / trials >= 0.99 - 3 * math.sqrt(0.0099 / trials)


@pytest.mark.parametrize("args", [(0,), (10, 0.0), (10, 0.1, 1.0)])
def test_nonsense_inputs_are_refused(args):
    with pytest.raises(VerifierError):
        sample_size(*args)
