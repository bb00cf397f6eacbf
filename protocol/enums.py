"""The contracts' enums, one list each, in Solidity's declaration order (pure: no I/O).

ABIs carry an enum as a bare uint8 (its name survives only in `internalType`), so the member
names live here, once. `tests/protocol/test_enums.py` parses every `enum X { ... }` under
contracts/ and fails when a member is added, removed, renamed or moved there and not here.
Member names are the Solidity names in UPPER_SNAKE_CASE (`ProviderFaulted` -> PROVIDER_FAULTED);
`.name.lower()` is the wire and database spelling (`provider_faulted`).
"""

from __future__ import annotations

from enum import IntEnum


class JobStatus(IntEnum):
    """IJobEscrow.JobStatus"""

    NONE = 0
    FUNDED = 1
    ACCEPTED = 2
    COMMITTED = 3
    FINALIZED = 4
    REFUNDED = 5


class ChallengeKind(IntEnum):
    """IChallengeManager.Kind"""

    NONE = 0
    POG = 1
    JOB = 2


class ChallengeStatus(IntEnum):
    """IChallengeManager.Status"""

    NONE = 0
    OPEN = 1
    ANSWERED = 2
    ESCALATED = 3
    PROVIDER_FAULTED = 4
    CHALLENGER_FAULTED = 5
    SETTLED = 6
    DISMISSED = 7


class Verdict(IntEnum):
    """IDisputeCommittee.Verdict"""

    NONE = 0
    NO_FAULT = 1
    PROVIDER_AT_FAULT = 2
    CHALLENGER_WRONG = 3


class RoundStatus(IntEnum):
    """IProofOfGpu.RoundStatus"""

    NONE = 0
    REQUESTED = 1
    COMMITTED = 2
    ATTESTED = 3
    FAILED = 4
    VOIDED = 5


class LeaseStatus(IntEnum):
    """ILeaseManager.LeaseStatus"""

    NONE = 0
    ACTIVE = 1
    ENDED = 2


# Every enum of the contracts by its Solidity name (`internalType` in the ABIs says `enum <key>`).
SOLIDITY_ENUMS: dict[str, type[IntEnum]] = {
    "IJobEscrow.JobStatus": JobStatus,
    "IChallengeManager.Kind": ChallengeKind,
    "IChallengeManager.Status": ChallengeStatus,
    "IDisputeCommittee.Verdict": Verdict,
    "IProofOfGpu.RoundStatus": RoundStatus,
    "ILeaseManager.LeaseStatus": LeaseStatus,
}

__all__ = ["SOLIDITY_ENUMS", "ChallengeKind", "ChallengeStatus", "JobStatus", "LeaseStatus", "RoundStatus",
           "Verdict"]
