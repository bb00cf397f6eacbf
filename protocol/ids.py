"""Ids the contracts hand out, one NewType each, and the wei amounts they hold, defined once for
every party (pure: no I/O).

Each is the uint256 counter of its contract (JobEscrow, ChallengeManager, ProofOfGpu,
LeaseManager, DisputeCommittee); distinct types keep a job id from being passed where a
challenge id is meant.
"""

from __future__ import annotations

from typing import NewType

JobId = NewType("JobId", int)
ChallengeId = NewType("ChallengeId", int)
RoundId = NewType("RoundId", int)
LeaseId = NewType("LeaseId", int)
DisputeId = NewType("DisputeId", int)
Wei = NewType("Wei", int)  # an amount of ETH in wei, as the contracts hold it

__all__ = ["ChallengeId", "DisputeId", "JobId", "LeaseId", "RoundId", "Wei"]
