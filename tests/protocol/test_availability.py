"""The one availability rule (protocol.availability) on its facts: a slash after the last passed
Proof of GPU, above the minimum stake, makes a provider unavailable until a new round passes."""

from __future__ import annotations

from dataclasses import replace

from protocol import availability
from protocol.availability import ProviderFacts

ETH = 10**18
FIT = ProviderFacts(registered=True, deactivated=False, stake=5 * ETH, minimum=ETH, slashed=0, pog_round_id=7,
                    pog_passed=True, pog_at=100, slashed_at=None)


def test_a_slash_since_the_last_passed_round_is_a_reason_until_a_new_round_passes() -> None:
    assert availability.why_not(FIT) == []
    slashed = replace(FIT, stake=4 * ETH, slashed=ETH, slashed_at=120)
    assert availability.active(slashed)  # the chain's isActive: still enough stake
    assert availability.why_not(slashed) == ["slashed after its last passed Proof of GPU (round 7): not trusted "
                                             "again before it passes a new one"]
    assert availability.why_not(replace(slashed, slashed_at=100)) != []  # in the record's own block: after it
    assert availability.why_not(replace(slashed, pog_round_id=8, pog_at=121)) == []


def test_below_the_minimum_the_stake_says_it_and_a_silent_agent_is_named() -> None:
    drained = replace(FIT, stake=0, slashed=ETH, slashed_at=120)
    assert availability.why_not(drained) == ["slashed 1 ETH: stake 0 ETH below the minimum 1 ETH"]
    silent = replace(FIT, silent_since=1_700_000_000)
    assert availability.why_not(silent) == ["its agent has not sent a heartbeat since 2023-11-14 22:13:20 UTC "
                                            "(crashed or stopped)"]
    assert availability.why_not(replace(FIT, registered=False)) == ["not registered on-chain"]
    assert availability.why_not(replace(FIT, pog_passed=None, pog_at=None)) == ["never passed a Proof of GPU round"]
