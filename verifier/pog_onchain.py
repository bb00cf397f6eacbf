"""Proof-of-GPU rounds with the chain in the loop.

A routine round costs the provider no gas beyond its root commit: the verifier requests the
round on-chain (the seed is the hash of the block after the request, so nobody knows it
earlier), times seed-to-root off-chain, challenges the committed roots with a secret it reveals
only after the roots are on-chain, checks the answers exactly, and attests the verdict on-chain.

When a round fails (a wrong element, a missing or late answer) the verifier escalates to an
on-chain challenge of the failed GPU's root: the provider must then reveal the block-hash-chosen
chunks in a transaction or be slashed, and any wrong revealed element is proven on-chain with a
fraud proof that the contract judges by recomputing the element. `follow_up` drives that to its
end; it is idempotent and resumes from chain state, so a restarted verifier finishes it.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from protocol.errors import ProtocolError, WrongElement
from protocol.pog.challenge import MIN_K
from protocol.pog.check import check_chunk
from protocol.pog.messages import decode_commitment
from verifier import VerifierError
from verifier.chain import ChainUnavailable, VerifierChain
from verifier.pog_checker import GpuClaim, PogChecker, RoundVerdict

logger = logging.getLogger(__name__)


class ProverLink(Protocol):
    """How the verifier reaches a provider's prover (a Celery task on its queue in production).

    Both calls return the provider's JSON message (protocol.pog.messages). The provider sends its
    commitment the moment it has the roots (that stops the verifier's clock) and posts the same
    roots on-chain itself, before the round's commit deadline.
    """

    def ready(self) -> None:
        """Raises LinkDown when the verifier's own side (its broker) cannot carry a round, so
        that no round is requested, and no provider blamed, for the verifier's failure."""

    def commit(self, round_id: int, round_seed: bytes, sizes: Sequence[int]) -> bytes: ...

    def answer(self, round_id: int, randomness: bytes, k: int) -> bytes: ...


class ProverUnreachable(VerifierError):
    """The provider did not answer over the link (its failure, judged like a wrong answer)."""


class LinkDown(VerifierError):
    """The verifier's own link is down (broker unreachable): a transient error of ours."""


class ChallengeState(Enum):
    WAITING = "waiting"  # the provider may still answer, or the fraud window is open
    SLASHED_TIMEOUT = "slashed_timeout"
    SLASHED_FRAUD = "slashed_fraud"
    SETTLED = "settled"  # answered correctly: the provider earned the bond
    CLOSED = "closed"  # already resolved by someone (possibly before a restart)


# Status enums of IChallengeManager.sol and IProofOfGpu.sol
_OPEN, _ANSWERED = 1, 2
_REQUESTED, _COMMITTED = 1, 2


@dataclass(frozen=True)
class RoundOutcome:
    provider: str
    round_id: int
    verdict: RoundVerdict | None
    challenge_ids: tuple[int, ...]  # on-chain challenges opened for failed GPUs
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.verdict is not None and self.verdict.passed


@dataclass
class OnchainPog:
    chain: VerifierChain
    link: ProverLink | None = None  # needed by run_round only; follow_up works from the chain
    k: int = MIN_K
    dtype: str = "fp16"
    n: int | None = None  # None: chosen from each GPU's claimed class (never by the provider)
    bond_wei: int | None = None  # None: the contract's minimum
    answer_window_s: float = 60.0
    poll_s: float = 0.2

    def __post_init__(self) -> None:
        self.pog = self.chain.contract("ProofOfGpu")
        self.registry = self.chain.contract("ProviderRegistry")
        self.challenges = self.chain.contract("ChallengeManager")

    def run_round(self, provider: str) -> RoundOutcome:
        if self.link is None:
            raise VerifierError("run_round needs a link to the provider's prover")
        claims = self._claims(provider)
        self.link.ready()
        sizes = sorted({c.n for c in claims})
        if len(sizes) != 1:
            raise VerifierError(f"provider {provider} claims GPUs of different classes: {sizes}")
        receipt = self.chain.send(self.pog.functions.requestRound(provider, sizes[0]))
        round_id = self.pog.events.RoundRequested().process_receipt(receipt)[0].args.roundId
        self.chain.wait_for_block(receipt.blockNumber + 2)  # the seed block must exist and be readable
        self.chain.send(self.pog.functions.fixSeed(round_id))
        seed = self.pog.functions.round(round_id).call()[-1]
        logger.info("PoG round %s for %s: seed 0x%s, n=%s", round_id, provider, seed.hex(), sizes[0])

        checker = PogChecker(k=self.k, dtype=self.dtype, answer_window_s=self.answer_window_s)
        checker.open_round(seed, claims)
        try:
            message = self.link.commit(round_id, seed, [c.n for c in claims])
            checker.receive_commitment(message)
            self._wait_committed(round_id)
            self._check_roots_on_chain(round_id, message, len(claims))
            randomness = os.urandom(32)  # the verifier's secret, revealed only now
            checker.reveal(randomness)
            verdict = checker.judge(self.link.answer(round_id, randomness, self.k))
        except (LinkDown, ChainUnavailable):
            raise  # our failure, not the provider's: no verdict and no bond
        except (VerifierError, ProtocolError) as exc:
            logger.warning("PoG round %s for %s failed before judging: %s", round_id, provider, exc)
            return self._fail(provider, round_id, None, range(len(claims)), str(exc))

        best = max(verdict.gpus, key=lambda g: g.tflops)
        failed = [g.gpu_index for g in verdict.gpus if not g.passed]
        gpu_class = (verdict.gpus[0].gpu_class or "") if not failed else ""
        self.chain.send(self.pog.functions.attest(
            round_id, int(verdict.seed_to_root_s * 1000), _bytes32(gpu_class),
            int(best.tflops * 1000), not failed))
        if failed:
            return self._escalate(provider, round_id, verdict, failed)
        logger.info("PoG round %s for %s passed: class %s", round_id, provider, gpu_class)
        return RoundOutcome(provider, round_id, verdict, ())

    def follow_up(self, challenge_id: int) -> ChallengeState:
        """Moves an on-chain PoG challenge towards its end: a timeout claim, a fraud proof from
        the revealed chunks, or settlement once the fraud window passed."""
        c = self.challenges.functions.challenge(challenge_id).call()
        status, deadline, answered_at = c[3], c[6], c[7]
        now = self.chain.now()
        if status == _OPEN:
            if now <= deadline:
                return ChallengeState.WAITING
            self.chain.wait_for_block(c[1] + 2)  # the claim fixes the indices' block hash if nobody did
            self.chain.send(self.challenges.functions.claimTimeout(challenge_id))
            logger.info("challenge %s: no answer by %s; provider slashed", challenge_id, deadline)
            return ChallengeState.SLASHED_TIMEOUT
        if status != _ANSWERED:
            return ChallengeState.CLOSED
        fraud = self._find_fraud(challenge_id, c)
        if fraud is not None:
            index, data, proof, offset = fraud
            self.chain.send(self.challenges.functions.proveFraud(challenge_id, index, data, proof, offset))
            logger.info("challenge %s: fraud proven at chunk %s element %s", challenge_id, index, offset)
            return ChallengeState.SLASHED_FRAUD
        if now <= answered_at + self.challenges.functions.fraudWindow().call():
            return ChallengeState.WAITING
        self.chain.send(self.challenges.functions.settle(challenge_id))
        return ChallengeState.SETTLED

    def _claims(self, provider: str) -> list[GpuClaim]:
        gpu_model, _, _, _, uuid_hashes, registered_at, _ = self.registry.functions.providerOf(provider).call()
        if not registered_at:
            raise VerifierError(f"provider {provider} is not registered")
        model = gpu_model.rstrip(b"\0").decode(errors="replace")
        return [PogChecker.claim(uuid, model, self.n, self.dtype) for uuid in uuid_hashes]

    def _wait_committed(self, round_id: int) -> None:
        deadline = self.pog.functions.round(round_id).call()[4]
        while self.pog.functions.round(round_id).call()[7] == _REQUESTED:
            if self.chain.now() > deadline:
                raise ProverUnreachable(f"round {round_id}: no roots on-chain by the commit deadline {deadline}")
            time.sleep(self.poll_s)

    def _check_roots_on_chain(self, round_id: int, message: bytes, gpu_count: int) -> None:
        """The roots the prover sent must be the ones it committed on-chain (which bind it)."""
        sent = decode_commitment(message, gpu_count)
        for g in sent.gpus:
            on_chain = self.pog.functions.rootOf(round_id, g.gpu_index).call()
            if on_chain != g.root:
                raise VerifierError(f"round {round_id} GPU {g.gpu_index}: root sent off-chain differs from the committed one")

    def _fail(self, provider: str, round_id: int, verdict: RoundVerdict | None,
              gpus: Sequence[int], detail: str) -> RoundOutcome:
        status = self.pog.functions.round(round_id).call()[7]
        if status == _COMMITTED:  # attest the failure, then make the roots answer on-chain
            self.chain.send(self.pog.functions.attest(round_id, 0, _bytes32(""), 0, False))
            return self._escalate(provider, round_id, verdict, gpus, detail)
        # Nothing committed: the round fails by itself at its commit deadline (markFailed).
        return RoundOutcome(provider, round_id, verdict, (), detail)

    def _escalate(self, provider: str, round_id: int, verdict: RoundVerdict | None,
                  gpus: Sequence[int], detail: str = "") -> RoundOutcome:
        bond = self.bond_wei or self.challenges.functions.minBond().call()
        ids = []
        for g in gpus:
            receipt = self.chain.send(self.challenges.functions.challengePog(round_id, g, self.k), value=bond)
            ids.append(self.challenges.events.PogChallenged().process_receipt(receipt)[0].args.challengeId)
        if verdict is not None and not detail:
            detail = "; ".join(f"GPU {g.gpu_index}: {g.failure}" for g in verdict.gpus if not g.passed)
        logger.warning("PoG round %s for %s failed (%s); on-chain challenges %s", round_id, provider, detail, ids)
        return RoundOutcome(provider, round_id, verdict, tuple(ids), detail)

    def _find_fraud(self, challenge_id: int, c: list) -> tuple[int, bytes, list[bytes], int] | None:
        """A wrong element among the chunks the provider revealed on-chain, if any."""
        round_id, gpu_index, root = c[9], c[8], c[10]
        n = self.pog.functions.round(round_id).call()[2]
        seed = self.pog.functions.gpuSeedOf(round_id, gpu_index).call()
        leaves, proofs = self._revealed(challenge_id)
        indices = self.challenges.functions.challengeIndices(challenge_id).call()
        for index, data, proof in zip(indices, leaves, proofs):
            try:
                check_chunk(seed, n, root, index, data, proof)
            except WrongElement as wrong:
                return index, data, list(proof), wrong.offset
        return None

    def _revealed(self, challenge_id: int) -> tuple[list[bytes], list[list[bytes]]]:
        """The answer's leaves and proofs, read back from the respond transaction's calldata."""
        event = self.challenges.events.ChallengeAnswered()
        since = self.chain.deployment.contract("ChallengeManager").block
        logs = event.get_logs(from_block=since, argument_filters={"challengeId": challenge_id})
        if not logs:
            raise VerifierError(f"challenge {challenge_id} is answered but its answer event is missing")
        tx = self.chain.web3.eth.get_transaction(logs[-1].transactionHash)
        _, args = self.challenges.decode_function_input(tx["input"])
        return list(args["leaves"]), [list(p) for p in args["proofs"]]


def _bytes32(text: str) -> bytes:
    return text.encode()[:32].ljust(32, b"\0")
