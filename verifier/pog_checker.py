"""Proof-of-GPU checker: issue a round, time seed-to-root, challenge, judge the answers.

The verifier decides everything the prover could bias: n (from the claimed class), the seed
(given to it, fixed after the prover is committed to answering), the randomness (revealed only
after the roots arrive), and the clock. Answers are size-limited JSON parsed by
protocol.pog.messages; nothing is unpickled or evaluated (DESIGN.md requirement 9).

A round goes: open_round (seed issued, clock starts) -> receive_commitment (clock stops,
TFLOPS = 2 n^3 / seed-to-root) -> [receive_fills (every device's residency fill root) ->
probe (randomness; the probe clock starts) -> judge_probes (answers of every device within
the deadline)] -> reveal (randomness; answer clock starts) -> judge. The bracketed residency
phase runs when the claims carry fills (protocol/pog/residency.py); it is what counts devices.

Every claimed GPU is credited with 2 n^3 over the round's one seed-to-root time (all roots
arrive in one message); that rate places it in a class's band. A GPU whose work checks out and
whose rate fits its class but proves nothing more passes "unidentified" (gpu_class None,
`unidentified` says why).

Each GPU's verdict records what its prover reported with the answers: NVML's identity (a claim)
and the outcome of its confidential-computing attestation for the round's seed
(verifier.cc_attestation). A GPU whose NVML UUID is not its registered device, or whose NVML
name is another class than the one claimed, is never named by its claim.

Devices are counted by their residency fills: `identify` is told how many devices' fills answered
the concurrent probe in time; the class is named for the round only if all did (and the round's
total is beyond a CPU server). A fill answered with a wrong block fails its GPU.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol, TypeVar
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from protocol.errors import ProtocolError, WrongElement
from protocol.merkle import keccak256
from protocol.pog.challenge import MIN_K, challenge_indices
from protocol.pog.check import check_chunks
from protocol.pog.identity import DeviceIdentity
from protocol.pog.messages import (
    FillRoot,
    GpuAnswers,
    GpuCommitment,
    decode_answers,
    decode_commitment,
    decode_fills,
    decode_probes,
)
from protocol.pog.profiles import identify, lookup, n_for
from protocol.pog.residency import (
    PROBE_DEADLINE_S,
    PROBES,
    FillParams,
    check_probes,
    fill_params_for,
    probe_indices,
)
from protocol.pog.workload import check_n, gpu_seed
from verifier import VerifierError
from verifier.cc_attestation import ATTESTED, NOT_REPORTED, NvAttester, attestation_outcome

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
    """A GPU the provider claims: its UUID hash, its model name, the n assigned to it and the
    residency fill it must hold (None: no residency phase for this round)."""

    uuid_hash: bytes
    name: str
    n: int
    fill: FillParams | None = None


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
    # Devices of the class the round proves (protocol.pog.profiles.proven_devices).
    proven_devices: int = 0
    # Whether this device's fill answered the probe, correctly and in time (None: no probe).
    resident: bool | None = None
    # Why a passing GPU's class is not named (a CPU server or fewer devices could do as well).
    unidentified: str | None = None
    # A wrong element the prover revealed behind a valid inclusion proof under its root:
    # (chunk index, chunk data, siblings, element offset), what a fraud proof on-chain needs.
    evidence: tuple[int, bytes, tuple[bytes, ...], int] | None = field(default=None, compare=False)
    # What the prover's NVML says the device is (a claim), and its CC attestation's outcome.
    identity: DeviceIdentity | None = None
    attestation: str = NOT_REPORTED

    @property
    def fill_failed(self) -> bool:
        """Its matmul work checked out but its residency answers were wrong (a bad block or
        proof, none at all): the verifier's verdict alone, nothing the contract can judge."""
        return self.resident is False and self.failure is not None


@dataclass(frozen=True)
class RoundVerdict:
    round_seed: bytes
    gpus: tuple[GpuVerdict, ...]
    seed_to_root_s: float
    answer_s: float
    verifier_cpu_s: float
    probe_s: float | None = None  # from the probe randomness to every device's answers

    @property
    def passed(self) -> bool:
        return all(g.passed for g in self.gpus)


@dataclass(frozen=True)
class ProbeVerdict:
    """The residency probe: how long every device's answers took, and per GPU what was wrong
    with them (None: they checked out). A fill counts if its answers checked out in time."""

    probe_s: float
    late: bool
    failures: tuple[str | None, ...]
    errors: tuple[Exception | None, ...] = field(default=(), compare=False)

    def resident(self, g: int) -> bool:
        return not self.late and self.failures[g] is None

    @property
    def resident_count(self) -> int:
        return sum(self.resident(g) for g in range(len(self.failures)))


@dataclass
class _Round:
    seed: bytes
    claims: tuple[GpuClaim, ...]
    opened_at: float
    committed_at: float | None = None
    commitments: tuple[GpuCommitment, ...] = ()
    randomness: bytes | None = None
    revealed_at: float | None = None
    fills: tuple[FillRoot, ...] = ()
    probe_randomness: bytes | None = None
    probed_at: float | None = None
    # The judged probe: per GPU, what was wrong with its answers (None: they checked out).
    probe: ProbeVerdict | None = None

    @property
    def has_fills(self) -> bool:
        return any(c.fill is not None for c in self.claims)


G = TypeVar("G", covariant=True)


class _PerGpu(Protocol[G]):
    """A prover's message for every GPU of a round (commitment, fill roots)."""

    @property
    def round_seed(self) -> bytes: ...

    @property
    def gpus(self) -> tuple[G, ...]: ...


def _per_gpu(rnd: _Round, raw: bytes, decode: Callable[[bytes, int], _PerGpu[G]], what: str) -> tuple[G, ...]:
    """`raw` decoded for this round, an entry a GPU; refused when it does not decode, is for
    another round seed or holds `what` for another number of GPUs."""
    try:
        message = decode(raw, len(rnd.claims))
    except ProtocolError as err:
        raise RoundRefused(rnd.seed, str(err)) from err
    if message.round_seed != rnd.seed:
        raise RoundRefused(rnd.seed, f"{what} are for another round seed")
    if len(message.gpus) != len(rnd.claims):
        raise RoundRefused(rnd.seed, f"{len(message.gpus)} {what} for {len(rnd.claims)} GPUs")
    return message.gpus


class PogChecker:
    """Runs the verifier's side of PoG rounds for one provider."""

    def __init__(self, k: int = MIN_K, dtype: str = "int8", answer_window_s: float = 30.0,
                 clock: Clock = time.monotonic, attester: NvAttester | None = None,
                 probes: int = PROBES, probe_deadline_s: float = PROBE_DEADLINE_S) -> None:
        if k < MIN_K:
            raise VerifierError(f"k={k} is below the protocol minimum {MIN_K}")
        if probes < PROBES:
            raise VerifierError(f"{probes} residency probes is below the protocol's {PROBES}")
        self.k = k
        self.dtype = dtype
        self.answer_window_s = answer_window_s
        self.clock = clock
        self.attester = attester or NvAttester()
        self.probes = probes
        self.probe_deadline_s = probe_deadline_s
        self._round: _Round | None = None

    @staticmethod
    def claim(uuid_hash: bytes, name: str, n: int | None = None, dtype: str = "int8",
              memory_share: float = 0.25, fill: FillParams | None = None) -> GpuClaim:
        """A claim with n set by the verifier from the named class (unless given for tests),
        and the residency fill it must hold (`fill_for`; None: no residency phase)."""
        if n is None:
            profile = lookup(name)
            if profile is None:
                raise VerifierError(f"no GPU class for {name!r}; cannot choose n")
            n = n_for(profile, dtype, memory_share)
        return GpuClaim(uuid_hash, name, check_n(n), fill)

    @staticmethod
    def fill_for(name: str) -> FillParams:
        """The residency fill the verifier assigns a device claiming `name`'s class."""
        profile = lookup(name)
        if profile is None or profile.is_cpu:
            raise VerifierError(f"no GPU class with a residency fill for {name!r}")
        return fill_params_for(profile)

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
        gpus = _per_gpu(rnd, raw, decode_commitment, "roots")
        for g, (got, claim) in enumerate(zip(gpus, rnd.claims)):
            if got.gpu_index != g or got.uuid_hash != claim.uuid_hash:
                raise CommitmentMismatch(g, "root posted for another GPU index or UUID")
            if got.n != claim.n:
                raise CommitmentMismatch(g, f"root for n={got.n}, assigned n={claim.n}")
        rnd.commitments = gpus
        rnd.committed_at = at

    def receive_fills(self, raw: bytes) -> None:
        """Record every device's fill root (after the matmul roots; refuses a mismatch)."""
        rnd = self._require("receive_fills", committed=True)
        if not rnd.has_fills or rnd.fills:
            raise RoundRefused(rnd.seed, "receive_fills out of order: no fills asked or twice")
        gpus = _per_gpu(rnd, raw, decode_fills, "fill roots")
        for g, (got, claim) in enumerate(zip(gpus, rnd.claims)):
            if got.gpu_index != g:
                raise CommitmentMismatch(g, "fill root posted for another GPU index")
            if got.params != claim.fill:
                raise CommitmentMismatch(g, f"fill built as {got.params}, assigned {claim.fill}")
        rnd.fills = gpus

    def probe(self, randomness: bytes) -> dict[int, list[int]]:
        """Reveal the probe randomness for every device at once; the probe clock starts."""
        rnd = self._require("probe", committed=True)
        if not rnd.fills or rnd.probe_randomness is not None:
            raise RoundRefused(rnd.seed, "probe out of order: no fill roots yet, or probed twice")
        rnd.probe_randomness = bytes(randomness)
        rnd.probed_at = self.clock()
        return {g: probe_indices(randomness, f.root, f.params, self.probes)
                for g, f in enumerate(rnd.fills)}

    def skip_residency(self, reason: str) -> ProbeVerdict:
        """The prover built no fills or sent no probe answers (`reason`): no device counts, as if
        its answers had come too late; its matmul work is still judged."""
        rnd = self._require("skip_residency", committed=True)
        if not rnd.has_fills or rnd.probe is not None:
            raise RoundRefused(rnd.seed, "skip_residency out of order")
        logger.info("round 0x%s residency skipped: %s", rnd.seed.hex(), reason)
        rnd.probe = ProbeVerdict(float("inf"), True, (None,) * len(rnd.claims))
        return rnd.probe

    def judge_probes(self, raw: bytes) -> ProbeVerdict:
        """Judge every device's probe answers: a fill counts if its answers arrived within the
        deadline (one message for all devices) and every probed block checks out."""
        rnd = self._require("judge_probes", committed=True)
        if rnd.probe_randomness is None or rnd.probed_at is None or rnd.probe is not None:
            raise RoundRefused(rnd.seed, "judge_probes out of order")
        probe_s = self.clock() - rnd.probed_at
        late = probe_s > self.probe_deadline_s
        count = len(rnd.claims)
        failures: list[str | None] = [None] * count
        errors: list[Exception | None] = [None] * count
        try:
            answers = decode_probes(raw, count, self.probes)
            if answers.round_seed != rnd.seed:
                raise RoundRefused(rnd.seed, "probe answers are for another round seed")
            by_gpu = {a.gpu_index: a for a in answers.gpus}
            for g, (claim, fill) in enumerate(zip(rnd.claims, rnd.fills)):
                try:
                    gpu = by_gpu.get(g)
                    if gpu is None:
                        raise CommitmentMismatch(g, "no probe answers for this GPU")
                    indices = probe_indices(rnd.probe_randomness, fill.root, fill.params,
                                            self.probes)
                    check_probes(gpu_seed(rnd.seed, g, claim.uuid_hash), fill.params,
                                 fill.root, indices, gpu.probes)
                except (VerifierError, ProtocolError) as err:
                    failures[g], errors[g] = f"residency: {err}", err
        except (VerifierError, ProtocolError) as err:
            failures = [f"residency: {err}"] * count
            errors = [err] * count
        rnd.probe = ProbeVerdict(probe_s, late, tuple(failures), tuple(errors))
        logger.info("round 0x%s residency: %s of %s fills resident, answered in %.3f s "
                    "(deadline %.3f s)", rnd.seed.hex(), rnd.probe.resident_count, count,
                    probe_s, self.probe_deadline_s)
        return rnd.probe

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
        if rnd.has_fills and rnd.probe is None:
            raise RoundRefused(rnd.seed, "judge before the residency probe was judged")
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
                               time.process_time() - cpu_start,
                               rnd.probe.probe_s if rnd.probe else None)
        logger.info("round 0x%s judged: passed=%s in %.3f s verifier CPU", rnd.seed.hex(),
                    verdict.passed, verdict.verifier_cpu_s)
        return verdict

    def _judge_gpu(self, rnd: _Round, g: int, by_gpu: dict[int, GpuAnswers],
                   seed_to_root: float) -> GpuVerdict:
        claim, commitment = rnd.claims[g], rnd.commitments[g]
        tflops = 2.0 * claim.n**3 / max(seed_to_root, 1e-9) / 1e12
        checked = 0
        gpu = by_gpu.get(g)
        identity = gpu.identity if gpu else None
        attestation = attestation_outcome(identity, gpu.evidence if gpu else None, rnd.seed, self.attester)
        try:
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
            resident = None if rnd.probe is None else rnd.probe.resident_count
            found = identify(claim.name, tflops, self.dtype, len(rnd.claims), resident)
        except WrongElement as err:  # every inclusion proof held (checked first): usable on-chain
            a = next(a for a in by_gpu[g].answers if a.index == err.index)  # raised past the answers' check
            return GpuVerdict(g, False, None, tflops, checked, str(err), err,
                              evidence=(a.index, a.data, tuple(a.siblings), err.offset), identity=identity, attestation=attestation)
        except (VerifierError, ProtocolError) as err:
            return GpuVerdict(g, False, None, tflops, checked, str(err), err, identity=identity, attestation=attestation)
        probe = rnd.probe
        if probe is not None and probe.failures[g] is not None:
            # a wrong block, a bad proof or no answers: the fill is not what was committed
            return GpuVerdict(g, False, None, tflops, checked, probe.failures[g],
                              probe.errors[g] if probe.errors else None,
                              proven_devices=found.proven_devices, resident=False, identity=identity, attestation=attestation)
        mismatch = _identity_mismatch(claim, identity)
        gpu_class, unidentified, proven = None if mismatch else found.gpu_class, mismatch or found.reason, found.proven_devices
        if gpu_class is None and not mismatch and probe is not None and probe.resident(g) \
                and attestation.startswith(ATTESTED) and found.profile.attestable \
                and tflops >= found.profile.band(self.dtype)[0]:
            # The device signed this round's seed with NVIDIA's key, its correct work is in the
            # class's band and its fill (sized to the claimed class's memory) answered in time:
            # the attestation shows what timing alone cannot (one GPU below a CPU server's
            # ceiling); the fill tells the family's members apart (an H100 holds no H200 fill).
            gpu_class, unidentified, proven = found.profile.name, None, max(proven, 1)
        if unidentified:
            logger.info("round 0x%s gpu %s: %s unidentified: %s", rnd.seed.hex(), g,
                        found.profile.name, unidentified)
        return GpuVerdict(g, True, gpu_class, tflops, checked, proven_devices=proven, unidentified=unidentified,
                          resident=None if probe is None else probe.resident(g), identity=identity, attestation=attestation)

    def _require(self, step: str, committed: bool) -> _Round:
        rnd = self._round
        if rnd is None:
            raise VerifierError(f"{step}: no open round")
        if (rnd.committed_at is not None) != committed:
            raise RoundRefused(rnd.seed, f"{step} out of order")
        return rnd


def _identity_mismatch(claim: GpuClaim, identity: DeviceIdentity | None) -> str | None:
    """Why NVML's word contradicts the claim (the class is then not named), or None."""
    if identity is None:
        return None
    if keccak256(identity.uuid.encode()) != claim.uuid_hash:
        return f"NVML reports UUID {identity.uuid}, not the registered device"
    if lookup(identity.name) != lookup(claim.name):
        return f"NVML names the device {identity.name!r}, the provider claims {claim.name!r}"
    return None
