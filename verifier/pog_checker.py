"""Proof-of-GPU checker: issue a round, time seed-to-root, challenge, judge the answers.

The verifier decides everything the prover could bias: n (from the claimed class), the seed
(given to it, fixed after the prover is committed to answering), the randomness (revealed only
after the roots arrive), and the clock. Answers are size-limited JSON parsed by
protocol.pog.messages; nothing is unpickled or evaluated (DESIGN.md requirement 9).

A round goes: open_round (seed issued, clock starts) -> receive_commitment (clock stops,
TFLOPS = 2 n^3 / seed-to-root) -> reveal (randomness; answer clock starts) -> judge.

Every claimed GPU is credited with 2 n^3 over the round's one seed-to-root time (all roots
arrive in one message), and `protocol.pog.profiles.identify` is told how many GPUs shared that
time: a class is named only if fewer devices of it, or a CPU server, could not have delivered
the round's total. A GPU whose work checks out and whose rate fits its class but proves nothing
more passes "unidentified" (gpu_class None, `unidentified` says why).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from protocol.errors import ProtocolError, WrongElement
from protocol.pog.challenge import MIN_K, challenge_indices
from protocol.pog.check import check_chunks
from protocol.pog.messages import (
    GpuAnswers,
    GpuCommitment,
    decode_answers,
    decode_commitment,
)
from protocol.pog.profiles import identify, lookup, n_for
from protocol.pog.workload import check_n, gpu_seed
from verifier import VerifierError

logger = logging.getLogger(__name__)

Clock = Callable[[], float]


class RoundRefused(VerifierError):
    """The round cannot be opened or continued (duplicate device, wrong phase, bad message)."""

    def __init__(self, round_seed: bytes, reason: str) -> None:
        super().__init__(f"round 0x{round_seed.hex()}: {reason}")
        self.round_seed = round_seed
        self.reason = reason


class LateAnswer(VerifierError):
    """Answers arrived after the answer window closed."""

    def __init__(self, elapsed_s: float, window_s: float) -> None:
        super().__init__(f"answers after {elapsed_s:.3f} s, window {window_s:.3f} s")
        self.elapsed_s = elapsed_s
        self.window_s = window_s


class CommitmentMismatch(VerifierError):
    """A GPU's commitment does not match what the round assigned (index, UUID, n, seed)."""

    def __init__(self, gpu_index: int, reason: str) -> None:
        super().__init__(f"gpu {gpu_index}: {reason}")
        self.gpu_index = gpu_index
        self.reason = reason


@dataclass(frozen=True)
class GpuClaim:
    """A GPU the provider claims: its UUID hash, its model name, and the n assigned to it."""

    uuid_hash: bytes
    name: str
    n: int


@dataclass(frozen=True)
class GpuVerdict:
    """Outcome for one GPU: passed, or the first thing that failed, and the class measured."""

    gpu_index: int
    passed: bool
    gpu_class: str | None
    tflops: float
    checked: int
    failure: str | None = None
    error: Exception | None = field(default=None, compare=False)
    # Fewest devices of the class that could have delivered the round's total rate.
    proven_devices: int = 0
    # Why a passing GPU's class is not named (a CPU server or fewer devices could do as well).
    unidentified: str | None = None
    # A wrong element the prover revealed behind a valid inclusion proof under its root:
    # (chunk index, chunk data, siblings, element offset), what a fraud proof on-chain needs.
    evidence: tuple[int, bytes, tuple[bytes, ...], int] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class RoundVerdict:
    round_seed: bytes
    gpus: tuple[GpuVerdict, ...]
    seed_to_root_s: float
    answer_s: float
    verifier_cpu_s: float

    @property
    def passed(self) -> bool:
        return all(g.passed for g in self.gpus)


@dataclass
class _Round:
    seed: bytes
    claims: tuple[GpuClaim, ...]
    opened_at: float
    committed_at: float | None = None
    commitments: tuple[GpuCommitment, ...] = ()
    randomness: bytes | None = None
    revealed_at: float | None = None


class PogChecker:
    """Runs the verifier's side of PoG rounds for one provider."""

    def __init__(self, k: int = MIN_K, dtype: str = "int8", answer_window_s: float = 30.0,
                 clock: Clock = time.monotonic) -> None:
        if k < MIN_K:
            raise VerifierError(f"k={k} is below the protocol minimum {MIN_K}")
        self.k = k
        self.dtype = dtype
        self.answer_window_s = answer_window_s
        self.clock = clock
        self._round: _Round | None = None

    @staticmethod
    def claim(uuid_hash: bytes, name: str, n: int | None = None, dtype: str = "int8",
              memory_share: float = 0.25) -> GpuClaim:
        """A claim with n set by the verifier from the named class (unless given for tests)."""
        if n is None:
            profile = lookup(name)
            if profile is None:
                raise VerifierError(f"no GPU class for {name!r}; cannot choose n")
            n = n_for(profile, dtype, memory_share)
        return GpuClaim(uuid_hash, name, check_n(n))

    def open_round(self, round_seed: bytes, claims: Sequence[GpuClaim]) -> None:
        """Issue the seed for every claimed GPU at once; the seed-to-root clock starts now."""
        uuids = [c.uuid_hash for c in claims]
        if not claims or len(set(uuids)) != len(uuids):
            raise RoundRefused(round_seed, "each claimed GPU needs its own device UUID")
        if len({c.n for c in claims}) != 1:
            # Each GPU is credited with 2 n^3 over the round's one time, and the count of
            # devices proven divides the round's total by a class ceiling: one n for all.
            raise RoundRefused(round_seed, "every claimed GPU of a round needs the same n")
        self._round = _Round(bytes(round_seed), tuple(claims), self.clock())

    def receive_commitment(self, raw: bytes) -> None:
        """Record the roots (the clock stops here). Refuses anything not matching the round."""
        rnd = self._require("receive_commitment", committed=False)
        at = self.clock()
        try:
            commitment = decode_commitment(raw, len(rnd.claims))
        except ProtocolError as err:
            raise RoundRefused(rnd.seed, str(err)) from err
        if commitment.round_seed != rnd.seed:
            raise RoundRefused(rnd.seed, "commitment is for another round seed")
        if len(commitment.gpus) != len(rnd.claims):
            raise RoundRefused(rnd.seed, f"{len(commitment.gpus)} roots for {len(rnd.claims)} GPUs")
        for g, (got, claim) in enumerate(zip(commitment.gpus, rnd.claims)):
            if got.gpu_index != g or got.uuid_hash != claim.uuid_hash:
                raise CommitmentMismatch(g, "root posted for another GPU index or UUID")
            if got.n != claim.n:
                raise CommitmentMismatch(g, f"root for n={got.n}, assigned n={claim.n}")
        rnd.commitments = commitment.gpus
        rnd.committed_at = at

    def reveal(self, randomness: bytes) -> dict[int, list[int]]:
        """Reveal the randomness (only now are indices derivable); the answer clock starts."""
        rnd = self._require("reveal", committed=True)
        rnd.randomness = bytes(randomness)
        rnd.revealed_at = self.clock()
        return {g: challenge_indices(randomness, c.root, c.leaf_count, self.k)
                for g, c in enumerate(rnd.commitments)}

    def judge(self, raw_answers: bytes) -> RoundVerdict:
        """Check every answer; a GPU passes only if all k chunks verify and its class fits."""
        rnd = self._require("judge", committed=True)
        if rnd.randomness is None or rnd.revealed_at is None or rnd.committed_at is None:
            raise RoundRefused(rnd.seed, "judge before reveal")
        answer_s = self.clock() - rnd.revealed_at
        seed_to_root = rnd.committed_at - rnd.opened_at
        cpu_start = time.process_time()
        self._round = None
        try:
            if answer_s > self.answer_window_s:
                raise LateAnswer(answer_s, self.answer_window_s)
            answers = decode_answers(raw_answers, len(rnd.claims), self.k)
            if answers.round_seed != rnd.seed:
                raise RoundRefused(rnd.seed, "answers are for another round seed")
            by_gpu = {a.gpu_index: a for a in answers.gpus}
            verdicts = tuple(self._judge_gpu(rnd, g, by_gpu, seed_to_root)
                             for g in range(len(rnd.claims)))
        except (VerifierError, ProtocolError) as err:
            verdicts = tuple(GpuVerdict(g, False, None, 0.0, 0, str(err), err)
                             for g in range(len(rnd.claims)))
        verdict = RoundVerdict(rnd.seed, verdicts, seed_to_root, answer_s,
                               time.process_time() - cpu_start)
        logger.info("round 0x%s judged: passed=%s in %.3f s verifier CPU", rnd.seed.hex(),
                    verdict.passed, verdict.verifier_cpu_s)
        return verdict

    def _judge_gpu(self, rnd: _Round, g: int, by_gpu: dict[int, GpuAnswers],
                   seed_to_root: float) -> GpuVerdict:
        claim, commitment = rnd.claims[g], rnd.commitments[g]
        tflops = 2.0 * claim.n**3 / max(seed_to_root, 1e-9) / 1e12
        checked = 0
        try:
            gpu = by_gpu.get(g)
            if gpu is None or rnd.randomness is None:
                raise CommitmentMismatch(g, "no answers for this GPU")
            wanted = challenge_indices(rnd.randomness, commitment.root, commitment.leaf_count,
                                       self.k)
            got = [a.index for a in gpu.answers]
            if got != wanted:
                raise CommitmentMismatch(g, "answered indices are not the challenged ones")
            check_chunks(gpu_seed(rnd.seed, g, claim.uuid_hash), claim.n, commitment.root,
                         [(a.index, a.data, a.siblings) for a in gpu.answers])
            checked = len(gpu.answers)
            found = identify(claim.name, tflops, self.dtype, len(rnd.claims))
        except WrongElement as err:  # every inclusion proof held (checked first): usable on-chain
            a = next(a for a in by_gpu[g].answers if a.index == err.index)  # raised past the answers' check
            return GpuVerdict(g, False, None, tflops, checked, str(err), err,
                              evidence=(a.index, a.data, tuple(a.siblings), err.offset))
        except (VerifierError, ProtocolError) as err:
            return GpuVerdict(g, False, None, tflops, checked, str(err), err)
        if not found.identified:
            logger.info("round 0x%s gpu %s: %s unidentified: %s", rnd.seed.hex(), g,
                        found.profile.name, found.reason)
        return GpuVerdict(g, True, found.gpu_class, tflops, checked,
                          proven_devices=found.proven_devices, unidentified=found.reason)

    def _require(self, step: str, committed: bool) -> _Round:
        rnd = self._round
        if rnd is None:
            raise VerifierError(f"{step}: no open round")
        if (rnd.committed_at is not None) != committed:
            raise RoundRefused(rnd.seed, f"{step} out of order")
        return rnd

