"""Proof-of-GPU rounds as the agent plays them on-chain: commit roots, answer challenges.

The prover's work for a round is kept in memory (only Merkle levels, 32 bytes per 64 elements)
so challenges are answered without recomputing C; after a restart it is recomputed from the
round's seed, which gives the same roots because the workload is exact and deterministic.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence

from protocol.pog.challenge import MIN_K
from protocol.pog.messages import MAX_ANSWERS_PER_GPU, RoundCommitment, encode_answers, encode_commitment
from provider_agent import ProviderAgentError
from provider_agent.chain import ChainRevert, ChallengeId, ProviderChain
from provider_agent.gpus import Device
from provider_agent.pog_prover import PogProver

logger = logging.getLogger(__name__)

POG_KIND = 1  # IChallengeManager.Kind.Pog
COMMITTED = 2  # IProofOfGpu.RoundStatus.Committed
KEPT_ROUNDS = 4


class PogRoundError(ProviderAgentError):
    """A round cannot be played: not ours, wrong status, seed not fixable."""


class PogService:
    def __init__(self, chain: ProviderChain, devices: Sequence[Device], dtype: str | None = None) -> None:
        self.chain = chain
        self.devices = list(devices)
        self.dtype = dtype
        self._provers: OrderedDict[int, PogProver] = OrderedDict()

    def compute(self, round_id: int) -> str:
        """Computes the round on every device; returns the commitment JSON at once, so that the
        verifier's clock stops at the roots, not at a block confirmation. `commit_onchain` then
        posts the same roots (the worker queues it right after)."""
        r = self._ours(round_id)
        if r["seed"] == b"\0" * 32:
            self.chain.fix_pog_seed(round_id)
            r = self.chain.pog_round(round_id)
        return encode_commitment(self._computed(round_id, r)).decode()

    def commit_onchain(self, round_id: int) -> str:
        """Posts the round's roots unless they are already on-chain (idempotent)."""
        r = self._ours(round_id)
        if r["status"] >= COMMITTED:
            logger.info("PoG round %s: already committed; work kept for challenges", round_id)
            return "already committed"
        commitment = self._computed(round_id, r)
        try:
            receipt = self.chain.commit_pog_roots(round_id, [g.root for g in commitment.gpus])
        except ChainRevert as exc:
            raise PogRoundError(f"round {round_id}: {exc.reason}") from exc
        return receipt.transactionHash.hex()

    def answer(self, round_id: int, randomness_hex: str, k: int) -> str:
        """Off-chain answers to the verifier's revealed secret: k chunks per GPU with proofs."""
        try:
            randomness = bytes.fromhex(randomness_hex.removeprefix("0x"))
        except ValueError as exc:
            raise PogRoundError(f"round {round_id}: randomness is not hex") from exc
        if len(randomness) != 32 or not MIN_K <= k <= MAX_ANSWERS_PER_GPU:
            raise PogRoundError(f"round {round_id}: need 32 bytes of randomness and {MIN_K} <= k <= "
                                f"{MAX_ANSWERS_PER_GPU}")
        self._computed(round_id, self._ours(round_id))
        return encode_answers(self._provers[round_id].answer_round(randomness, k)).decode()

    def answer_challenge(self, challenge_id: ChallengeId) -> str:
        """Answers an on-chain challenge of one of our PoG roots; returns the tx hash."""
        c = self.chain.challenge(challenge_id)
        if c["kind"] != POG_KIND:
            raise PogRoundError(f"challenge {challenge_id} is not a PoG challenge")
        round_id = c["subject"]
        self._computed(round_id, self._ours(round_id))
        answers = self._provers[round_id].work[c["gpu_index"]].answer(self.chain.challenge_indices(challenge_id))
        receipt = self.chain.respond(challenge_id, [a.data for a in answers], [list(a.siblings) for a in answers])
        logger.info("PoG challenge %s on round %s answered on-chain", challenge_id, round_id)
        return receipt.transactionHash.hex()

    def _ours(self, round_id: int) -> dict:
        r = self.chain.pog_round(round_id)
        if r["provider"].lower() != self.chain.address.lower():
            raise PogRoundError(f"round {round_id} is for {r['provider']}, not us")
        return r

    def _computed(self, round_id: int, r: dict) -> RoundCommitment:
        """The round's work, computed once per process (a few recent rounds kept)."""
        prover = self._provers.get(round_id)
        if prover is None:
            prover = self._provers[round_id] = PogProver(self.devices, self.dtype)
            while len(self._provers) > KEPT_ROUNDS:
                self._provers.popitem(last=False)
            prover.commit_round(r["seed"], r["n"])
        return RoundCommitment(r["seed"], tuple(w.commitment for w in prover.work))
