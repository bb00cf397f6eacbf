"""Committee duty: vote on job disputes opened by others, after re-executing the disputed items.

Disputes come from DisputeOpened events, followed with a cursor (verifier.watch), so a restarted
verifier sees the same ones. For each
unresolved dispute inside its vote window in which this verifier may vote (not a party, enough
bonded stake, not voted yet) it judges the provider's on-chain answer exactly as the challenger
did (`job_audit.judge_answer`: every revealed item uploaded, hashing to the revealed digest,
matching our re-execution) and votes once. After the window it resolves the dispute (anyone
may; the first call wins). A judgement that fails for a reason of ours (backend or node down)
is retried on the next pass and, if the window closes meanwhile, simply not voted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from client.backend_http import BackendRefused, BackendUnavailable
from client.contracts import Struct
from client.errors import NodeUnavailable, TransactionReverted
from client.watched_ids import WatchedIds
from verifier.backend_client import VerifierBackend
from verifier.chain import VerifierChain
from verifier.job_audit import AuditError, JobReexecutor, judge_answer
from verifier.reexec import ReexecFailed
from verifier.watch import DISPUTE, watch_chain

logger = logging.getLogger(__name__)


@dataclass
class CommitteeMember:
    chain: VerifierChain
    backend: VerifierBackend
    reexec: JobReexecutor
    finished: set[int] = field(default_factory=set)  # disputes resolved (by anyone) or not ours to vote
    record: Callable[[str], None] = lambda event: None  # counts outcomes (the service's metrics)
    watch: WatchedIds | None = None  # default: in memory (the service shares its own)

    def __post_init__(self) -> None:
        if self.watch is None:
            self.watch = watch_chain(self.chain, None)
        self.committee = self.chain.contract("DisputeCommittee")
        self.staking = self.chain.contract("Staking")
        self.manager_address = self.chain.deployment.contract("ChallengeManager").address

    def disputes(self) -> list[int]:
        """Disputes opened since the cursor and those not finished yet (finished ones are forgotten)."""
        assert self.watch is not None
        self.watch.refresh()
        ids = self.watch.ids(DISPUTE)
        self.watch.forget(DISPUTE, self.finished.intersection(ids))
        return [i for i in ids if i not in self.finished]

    def tick(self) -> None:
        now = self.chain.now()
        for dispute_id in self.disputes():
            if dispute_id in self.finished:
                continue
            d = self.committee.functions.dispute(dispute_id).call()
            if d.resolved:
                self.finished.add(dispute_id)
            elif now > d.voteEnd:
                self._resolve(dispute_id)
            elif self._may_vote(dispute_id, d):
                self._vote(dispute_id, d)

    def _may_vote(self, dispute_id: int, d: Struct) -> bool:
        me = self.chain.address
        if me in (d.challenger, d.provider) or d.opener.lower() != self.manager_address.lower():
            return False
        if self.committee.functions.hasVoted(dispute_id, me).call():
            return False
        stake: int = self.staking.functions.stakeOf(me).call()
        least: int = self.committee.functions.minVoterStake().call()
        return stake >= least

    def _vote(self, dispute_id: int, d: Struct) -> None:
        challenge_id = d.ref
        try:
            job_id, evidence = judge_answer(self.chain, self.backend, self.reexec, challenge_id)
        except (BackendUnavailable, NodeUnavailable, OSError) as exc:
            logger.info("dispute %s: not judged yet, retried next pass: %s", dispute_id, exc)
            return
        except (ReexecFailed, BackendRefused, AuditError) as exc:
            logger.warning("dispute %s (challenge %s): cannot judge, not voting: %s", dispute_id, challenge_id, exc)
            self.finished.add(dispute_id)
            return
        try:
            receipt = self.chain.send(self.committee.functions.vote(dispute_id, evidence.faulty))
        except TransactionReverted as exc:
            logger.warning("dispute %s: vote refused: %s", dispute_id, exc)
            return
        self.record("voted-fault" if evidence.faulty else "voted-no-fault")
        logger.warning("dispute %s (challenge %s, job %s): voted provider %s at fault, tx %s; evidence: %s",
                       dispute_id, challenge_id, job_id, d.provider if evidence.faulty else "NOT",
                       receipt["transactionHash"].hex(), evidence.describe())
        self.backend.report("job", job_id, "voted_fault" if evidence.faulty else "voted_no_fault",
                            challenge_id=challenge_id, tx_hashes=[receipt["transactionHash"].hex()],
                            detail=f"dispute {dispute_id}: {evidence.describe()}", **evidence.report_fields())

    def _resolve(self, dispute_id: int) -> None:
        try:
            receipt = self.chain.send(self.committee.functions.resolve(dispute_id))
        except TransactionReverted as exc:  # resolved by someone else first
            logger.info("dispute %s: %s", dispute_id, exc)
        else:
            self.record("resolved")
            logger.info("dispute %s resolved, tx %s", dispute_id, receipt["transactionHash"].hex())
        self.finished.add(dispute_id)


__all__ = ["CommitteeMember"]
