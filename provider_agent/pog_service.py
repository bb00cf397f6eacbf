"""Proof-of-GPU rounds as the agent plays them on-chain: commit roots, answer challenges.

A round starts when the verifier hands over its secret (in the moment it broadcasts the same
secret on-chain with fixSeed): the agent checks it against the round's committed secretHash,
derives the seed from it and the request block's hash (protocol.pog.pog_round_seed) and computes
at once, without waiting for any block. Its roots go on-chain once the verifier's fixSeed is
mined (the contract refuses roots before the seed is fixed). The chain, not the hand-over,
decides: a handed secret that does not hash to the round's secretHash is ignored and the round
is computed from the seed fixSeed stores, and the agent waits for that seed exactly as long as
the contract accepts it (the round's seed deadline, read from the chain), never a shorter timer
of its own, so a late but valid reveal is still answered before the commit deadline.

The prover's work for a round is kept in memory (only Merkle levels, 32 bytes per 64 elements)
so challenges are answered without recomputing C; after a restart it is recomputed from the
round's seed, which gives the same roots because the workload is exact and deterministic.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence

from client.contracts import Struct
from client.errors import TransactionReverted
from protocol.enums import ChallengeKind, RoundStatus
from protocol.errors import ProtocolError
from protocol.ids import ChallengeId
from protocol.pog.challenge import MIN_K, pog_round_seed, pog_secret_hash
from protocol.pog.messages import (
    MAX_ANSWERS_PER_GPU,
    RoundCommitment,
    encode_answers,
    encode_commitment,
    encode_fills,
    encode_probes,
)
from protocol.pog.residency import PROBES, FillParams
from provider_agent import ProviderAgentError
from provider_agent.chain import ProviderChain
from provider_agent.gpus import Device
from provider_agent.pog_prover import PogProver
from provider_agent.pog_residency import ResidencyProver

logger = logging.getLogger(__name__)

KEPT_ROUNDS = 4
POLL_S = 0.25
# On a chain that makes blocks only for transactions its clock stands still while nothing is
# sent: the wait for the seed then ends on wall time, the seed deadline's distance plus this.
WALL_MARGIN_S = 30.0
# Residency fills occupy the devices: released after the probe, or this long after their
# roots if the verifier never probes (its deadline is half a second after it asks).
FILL_KEEP_S = 120.0


class PogRoundError(ProviderAgentError):
    """A round cannot be played: not ours, wrong status, a secret that does not match."""


class PogService:
    def __init__(self, chain: ProviderChain, devices: Sequence[Device], dtype: str | None = None) -> None:
        self.chain = chain
        self.devices = list(devices)
        self.dtype = dtype
        self._provers: OrderedDict[int, PogProver] = OrderedDict()
        # The latest round's residency fills: they fill the devices, so only one is kept.
        self._fills: tuple[int, ResidencyProver] | None = None

    def seed_from_secret(self, round_id: int, secret_hex: str, r: Struct | None = None) -> bytes:
        """The round seed from the verifier's secret: refused unless it is the one the verifier
        committed to at the request (so a wrong secret cannot make us compute a useless round)."""
        r = r or self._ours(round_id)
        try:
            secret = bytes.fromhex(secret_hex.removeprefix("0x"))
        except ValueError as exc:
            raise PogRoundError(f"round {round_id}: secret is not hex") from exc
        if len(secret) != 32 or pog_secret_hash(secret) != r.secretHash:
            raise PogRoundError(f"round {round_id}: secret does not match the round's secretHash")
        seed = pog_round_seed(self.chain.block_hash(r.requestBlock), secret, round_id,
                              bytes.fromhex(self.chain.address[2:]))
        if r.seed != bytes(32) and r.seed != seed:
            raise PogRoundError(f"round {round_id}: seed on-chain differs from the one derived from the secret")
        return seed

    def compute(self, round_id: int, secret_hex: str) -> str:
        """Computes the round on every device from the verifier's secret, at once (no block to
        wait for); returns the commitment JSON so that the verifier's clock stops at the roots,
        not at a block confirmation. `commit_onchain` then posts the same roots (the worker
        queues it right after)."""
        r = self._ours(round_id)
        if r.status != RoundStatus.REQUESTED and round_id not in self._provers:
            raise PogRoundError(f"round {round_id} is not waiting for roots (status {RoundStatus(r.status).name})")
        try:
            seed = self.seed_from_secret(round_id, secret_hex, r)
        except PogRoundError as exc:  # the hand-over is wrong, the chain is not: compute from its seed
            logger.warning("PoG round %s: %s; computing from the seed fixed on-chain", round_id, exc)
            seed = self._wait_seed_fixed(round_id, r).seed
        return encode_commitment(self._computed(round_id, r._replace(seed=seed))).decode()

    def commit_onchain(self, round_id: int) -> str:
        """Posts the round's roots unless they are already on-chain (idempotent). The contract
        takes them only once the verifier's fixSeed is mined: that is polled for, bounded."""
        r = self._ours(round_id)
        if r.status >= RoundStatus.COMMITTED:
            logger.info("PoG round %s: already committed; work kept for challenges", round_id)
            return "already committed"
        r = self._wait_seed_fixed(round_id, r)
        commitment = self._computed(round_id, r)
        if commitment.round_seed != r.seed:
            raise PogRoundError(f"round {round_id}: computed for another seed than the one fixed on-chain")
        try:
            receipt = self.chain.commit_pog_roots(round_id, [g.root for g in commitment.gpus])
        except TransactionReverted as exc:
            raise PogRoundError(f"round {round_id}: {exc.reason}") from exc
        return receipt["transactionHash"].hex()

    def answer(self, round_id: int, randomness_hex: str, k: int) -> str:
        """Off-chain answers to the verifier's revealed secret: k chunks per GPU with proofs."""
        randomness = _randomness(round_id, randomness_hex, k, MIN_K, "k")
        self._computed(round_id, self._ours(round_id))
        return encode_answers(self._provers[round_id].answer_round(randomness, k)).decode()

    def fill(self, round_id: int, shapes: Sequence[Sequence[int]]) -> str:
        """Builds every device's residency fill at once, in the verifier's shapes (one
        [lanes, steps, iterations] per GPU), after the round's roots; returns the fill roots."""
        commitment = self._computed(round_id, self._ours(round_id))
        if len(shapes) != len(self.devices):
            raise PogRoundError(f"round {round_id}: {len(shapes)} fill shapes for "
                                f"{len(self.devices)} devices")
        try:
            params = {g: FillParams(*(int(v) for v in shape)) for g, shape in enumerate(shapes)}
        except (TypeError, ValueError, ProtocolError) as exc:
            raise PogRoundError(f"round {round_id}: bad fill shape: {exc}") from exc
        self._release()  # the previous round's fills give their memory back first
        prover = ResidencyProver(self.devices)
        message = encode_fills(prover.commit_fills(commitment.round_seed, params)).decode()
        self._fills = (round_id, prover)
        timer = threading.Timer(FILL_KEEP_S, self._release, (prover,))
        timer.daemon = True
        timer.start()
        return message

    def probe(self, round_id: int, randomness_hex: str, q: int) -> str:
        """Every device's probed fill blocks at once, for the verifier's revealed randomness."""
        randomness = _randomness(round_id, randomness_hex, q, PROBES, "q")
        if self._fills is None or self._fills[0] != round_id:
            raise PogRoundError(f"round {round_id}: no fills held for it")
        prover = self._fills[1]
        try:
            return encode_probes(prover.answer_probes(randomness, q)).decode()
        finally:  # one probe a round
            self._release(prover)

    def _release(self, prover: ResidencyProver | None = None) -> None:
        """Frees the held fills (only `prover`'s, when given: a timer of an older round must
        not free a newer one)."""
        held = self._fills
        if held is not None and (prover is None or held[1] is prover):
            self._fills = None
            held[1].release()

    def answer_challenge(self, challenge_id: ChallengeId) -> str:
        """Answers an on-chain challenge of one of our PoG roots; returns the tx hash."""
        c = self.chain.challenge(challenge_id)
        if c.kind != ChallengeKind.POG:
            raise PogRoundError(f"challenge {challenge_id} is not a PoG challenge")
        round_id = c.subject
        self._computed(round_id, self._ours(round_id))
        answers = self._provers[round_id].work[c.gpuIndex].answer(self.chain.challenge_indices(challenge_id))
        receipt = self.chain.respond(challenge_id, [a.data for a in answers], [list(a.siblings) for a in answers])
        logger.info("PoG challenge %s on round %s answered on-chain", challenge_id, round_id)
        return receipt["transactionHash"].hex()

    def round_of(self, round_id: int) -> Struct:
        """Our round `round_id` as the chain holds it (PogRoundError when it is not ours)."""
        return self._ours(round_id)

    def _wait_seed_fixed(self, round_id: int, r: Struct) -> Struct:
        """Polls until the verifier's fixSeed is mined, for as long as the contract accepts it:
        until the chain's time passes the round's seed deadline (commitDeadline while no seed is
        fixed), or, should the chain's clock stand still, that distance in wall time plus a margin."""
        give_up = time.monotonic() + max(r.commitDeadline - self.chain.now(), 0) + WALL_MARGIN_S
        while r.seed == bytes(32):
            if r.status != RoundStatus.REQUESTED or self.chain.now() > r.commitDeadline or time.monotonic() > give_up:
                raise PogRoundError(f"round {round_id}: the verifier's seed was not fixed on-chain by its deadline "
                                    f"{r.commitDeadline} (status {RoundStatus(r.status).name})")
            time.sleep(POLL_S)
            r = self._ours(round_id)
        return r

    def _ours(self, round_id: int) -> Struct:
        r = self.chain.pog_round(round_id)
        if r.provider.lower() != self.chain.address.lower():
            raise PogRoundError(f"round {round_id} is for {r.provider}, not us")
        return r

    def _computed(self, round_id: int, r: Struct) -> RoundCommitment:
        """The round's work for seed r.seed, computed once per process (a few recent rounds
        kept); after a restart, from the seed on-chain."""
        prover = self._provers.get(round_id)
        if prover is None:
            prover = self._provers[round_id] = PogProver(self.devices, self.dtype)
            while len(self._provers) > KEPT_ROUNDS:
                self._provers.popitem(last=False)
            prover.commit_round(r.seed, r.n)
        return RoundCommitment(prover.round_seed, tuple(w.commitment for w in prover.work))


def _randomness(round_id: int, randomness_hex: str, count: int, least: int, name: str) -> bytes:
    """The verifier's revealed 32 bytes, and a count of answers per GPU within the protocol's bounds."""
    try:
        randomness = bytes.fromhex(randomness_hex.removeprefix("0x"))
    except ValueError as exc:
        raise PogRoundError(f"round {round_id}: randomness is not hex") from exc
    if len(randomness) != 32 or not least <= count <= MAX_ANSWERS_PER_GPU:
        raise PogRoundError(f"round {round_id}: need 32 bytes of randomness and {least} <= {name} <= "
                            f"{MAX_ANSWERS_PER_GPU}")
    return randomness
