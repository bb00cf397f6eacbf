"""The indexer's pass pacer (backend.runtime.PassPacer): a lone block right after a pass is indexed
at once; a sustained burst is still paced at one pass per interval."""

from __future__ import annotations

import pytest

from backend.runtime import PASS_BURST, PassPacer

INTERVAL = 0.1


def test_a_block_right_after_a_pass_is_not_rested() -> None:
    # The renter bench's case: the previous job's commit woke a pass, the next job's funding
    # arrives 5 ms later. A fixed rest after every pass held it for the rest of the 100 ms.
    pacer = PassPacer(INTERVAL)
    assert pacer.take(10.0) == 0.0
    assert pacer.take(10.005) == 0.0


def test_a_sustained_burst_is_paced_at_one_pass_per_interval() -> None:
    pacer = PassPacer(INTERVAL)
    now, passes, rested = 0.0, 0, 0.0
    while now < 10.0:  # a new block ready every 1 ms for 10 s
        rest = pacer.take(now)
        rested += rest
        now += rest + 0.001  # the pass itself takes 1 ms
        passes += 1
    assert rested > 0
    assert 10.0 / INTERVAL <= passes <= 10.0 / INTERVAL + PASS_BURST + 1


def test_the_burst_refills_after_a_quiet_spell() -> None:
    pacer = PassPacer(INTERVAL)
    rests = [pacer.take(0.0) for _ in range(PASS_BURST)]
    assert rests == [0.0] * PASS_BURST
    assert pacer.take(0.0) == pytest.approx(INTERVAL)  # the burst is spent: one interval's rest
    assert pacer.take(0.1 + PASS_BURST * INTERVAL) == 0.0  # credit back after the quiet spell


def test_no_interval_never_rests() -> None:
    pacer = PassPacer(0.0)
    assert all(pacer.take(0.0) == 0.0 for _ in range(100))
