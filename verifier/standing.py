"""A verifier's standing, read from the chain: stake (bonded, unbonding and until when), the
challenges it raised that are still open, and what the contracts owe it; `leave` starts the
unbonding of the whole stake.

The contracts are the only judge here: the backend's reports (audits done) are shown beside, as
the verifier's own record of its decisions, never in place of a chain read.
"""

from __future__ import annotations

from dataclasses import dataclass

from web3 import Web3

from client.chain import ChainContext
from client.contracts import ViewCall, read_batched
from client.log_follower import events_between
from client.payouts import Owed, owed_to
from protocol.enums import ChallengeStatus

OPEN_STATUSES = (ChallengeStatus.OPEN, ChallengeStatus.ANSWERED, ChallengeStatus.ESCALATED)


@dataclass(frozen=True)
class RaisedChallenge:
    challenge_id: int
    kind: str  # "pog" or "job"
    subject: int  # round id or job id
    provider: str
    status: str  # ChallengeStatus name, lower case
    bond: int
    response_deadline: int


@dataclass(frozen=True)
class Standing:
    address: str
    bonded: int
    min_stake: int  # what ChallengeManager requires of a challenging verifier
    unbonding: int
    release_at: int | None  # when the unbonding stake becomes withdrawable
    unbonding_delay: int
    raised: list[RaisedChallenge]  # every challenge it raised, oldest first
    owed: Owed

    @property
    def open_challenges(self) -> list[RaisedChallenge]:
        return [c for c in self.raised if c.status in {s.name.lower() for s in OPEN_STATUSES}]


def read_standing(chain: ChainContext, address: str) -> Standing:
    """`address`'s stake, raised challenges and payouts, as the contracts record them now."""
    me = Web3.to_checksum_address(address)
    staking, manager = chain.contract("Staking"), chain.contract("ChallengeManager")
    start = chain.deployment.contract("ChallengeManager").block
    opened = [e for e in events_between(chain.web3, chain.deployment,
                                        {"ChallengeManager": ["PogChallenged", "JobChallenged"]}, start)
              if Web3.to_checksum_address(e.args["challenger"]) == me]
    view = ViewCall(manager, "challenge")
    reads = read_batched(chain.web3, [view.request(e.args["challengeId"]) for e in opened], [view.decode] * len(opened))
    raised = [RaisedChallenge(e.args["challengeId"], "pog" if e.name == "PogChallenged" else "job",
                              e.args["roundId"] if e.name == "PogChallenged" else e.args["jobId"], c.provider,
                              ChallengeStatus(c.status).name.lower(), c.bond, c.responseDeadline)
              for e, c in zip(opened, reads, strict=True)]
    unbonding = staking.functions.unbondingOf(me).call()
    return Standing(address=me, bonded=staking.functions.stakeOf(me).call(),
                    min_stake=manager.functions.minVerifierStake().call(), unbonding=unbonding.amount,
                    release_at=unbonding.releaseAt or None,
                    unbonding_delay=staking.functions.unbondingDelay().call(), raised=raised,
                    owed=owed_to(chain.reader, chain.deployment, me))


__all__ = ["OPEN_STATUSES", "RaisedChallenge", "Standing", "read_standing"]
