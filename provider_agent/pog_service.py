"""Proof-of-GPU rounds as the agent plays them on-chain: commit roots, answer challenges.

The prover's work for a round is kept in memory (only Merkle levels, 32 bytes per 64 elements)
so challenges are answered without recomputing C; after a restart it is recomputed from the
round's seed, which gives the same roots because the workload is exact and deterministic.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence

from protocol.pog.messages import GpuAnswers, RoundAnswers, RoundCommitment, encode_answers, encode_commitment
from provider_agent import ProviderAgentError
from provider_agent.chain import ChainRevert, ProviderChain
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

    def commit(self, round_id: int) -> str:
        """Computes the round on every device and commits the roots; returns the commitment JSON."""
        r = self.chain.pog_round(round_id)
        if r["provider"].lower() != self.chain.address.lower():
            raise PogRoundError(f"round {round_id} is for {r['provider']}, not us")
        if r["seed"] == b"\0" * 32:
            self.chain.fix_pog_seed(round_id)
            r = self.chain.pog_round(round_id)
        commitment = self._computed(round_id, r)
        if r["status"] >= COMMITTED:
            logger.info("PoG round %s: already committed; work kept for challenges", round_id)
        else:
            try:
                self.chain.commit_pog_roots(round_id, [g.root for g in commitment.gpus])
            except ChainRevert as exc:
                raise PogRoundError(f"round {round_id}: {exc.reason}") from exc
        return encode_commitment(commitment).decode()

    def answer(self, round_id: int, randomness_hex: str) -> str:
        """Answers every open challenge of our roots in `round_id`; returns the answers JSON."""
        r = self.chain.pog_round(round_id)
        self._computed(round_id, r)
        prover = self._provers[round_id]
        gpus = []
        for challenge_id in self.chain.open_pog_challenges(round_id):
            c = self.chain.challenge(challenge_id)
            if c["randomness"] != b"\0" * 32 and "0x" + c["randomness"].hex() != randomness_hex.lower():
                logger.warning("PoG round %s challenge %s: randomness on-chain differs from the message's",
                               round_id, challenge_id)
            work = prover.work[c["gpu_index"]]
            answers = work.answer(self.chain.challenge_indices(challenge_id))
            self.chain.respond(challenge_id, [a.data for a in answers], [list(a.siblings) for a in answers])
            gpus.append(GpuAnswers(c["gpu_index"], answers))
        return encode_answers(RoundAnswers(r["seed"], tuple(gpus))).decode()

    def _computed(self, round_id: int, r: dict) -> RoundCommitment:
        """The round's work, computed once per process (a few recent rounds kept)."""
        prover = self._provers.get(round_id)
        if prover is None:
            prover = self._provers[round_id] = PogProver(self.devices, self.dtype)
            while len(self._provers) > KEPT_ROUNDS:
                self._provers.popitem(last=False)
            prover.commit_round(r["seed"], r["n"])
        return RoundCommitment(r["seed"], tuple(w.commitment for w in prover.work))
