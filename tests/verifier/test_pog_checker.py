"""The PoG checker against an honest prover and against every cheating prover it must catch.

Each attack is a prover that performs it (committing what it computed, answering from what it
committed); the checker is the real verifier code, and the clock is the only thing faked.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from eth_utils import keccak

from protocol.errors import InvalidProof, WrongElement
from protocol.pog.challenge import challenge_indices
from protocol.pog.commitment import chunk_position, commit, encode, leaf_count
from protocol.pog.messages import (
    ChunkAnswer,
    GpuAnswers,
    GpuCommitment,
    MessageTooLarge,
    RoundAnswers,
    RoundCommitment,
    encode_answers,
    encode_commitment,
)
from protocol.pog.profiles import CPU_CEILING_TOPS, PROFILES, identifiable_floor
from protocol.pog.workload import WorkloadKeys, gpu_seed, reference_product
from provider_agent.gpus import Device
from provider_agent.pog_prover import PogProver, benchmark_tflops, compute_device
from verifier import VerifierError
from verifier.pog_checker import CommitmentMismatch, LateAnswer, PogChecker, RoundRefused

K = 32
CPU = "cpu test"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def device(label: str) -> Device:
    return Device("cpu", CPU, f"CPU-{label}", 0)


def honest_product(seed: bytes, g: int, uuid_hash: bytes, n: int) -> np.ndarray:
    return reference_product(WorkloadKeys.derive(gpu_seed(seed, g, uuid_hash)), n)


class ScriptedProver:
    """Commits products made by `make_product` and answers from exactly what it committed."""

    def __init__(self, uuid_hashes, make_product, declared_n=None):
        self.uuid_hashes = list(uuid_hashes)
        self.make_product = make_product
        self.declared_n = declared_n

    def commit_round(self, seed: bytes, n: int) -> RoundCommitment:
        self.seed = seed
        self.products = [self.make_product(seed, g, u, n) for g, u in enumerate(self.uuid_hashes)]
        self.trees = [commit(p) for p in self.products]
        return RoundCommitment(seed, tuple(
            GpuCommitment(g, u, self.declared_n or p.shape[0], t.root)
            for g, (u, p, t) in enumerate(zip(self.uuid_hashes, self.products, self.trees))))

    def chunk(self, g: int, index: int) -> ChunkAnswer:
        product, tree = self.products[g], self.trees[g]
        row, col = chunk_position(product.shape[0], index % tree.size)
        return ChunkAnswer(index, encode(product[row, col : col + 64]),
                           tuple(tree.proof(index % tree.size)))

    def answer_round(self, randomness: bytes, k: int) -> RoundAnswers:
        gpus = []
        for g, tree in enumerate(self.trees):
            count = leaf_count(self.declared_n or self.products[g].shape[0])
            indices = challenge_indices(randomness, tree.root, count, k)
            gpus.append(GpuAnswers(g, tuple(self.answer(g, i) for i in indices)))
        return RoundAnswers(self.seed, tuple(gpus))

    def answer(self, g: int, index: int) -> ChunkAnswer:
        return self.chunk(g, index)


def play(prover, n=64, gpus=1, label="r", clock=None, answer_delay=0.0, names=None,
         tamper=None):
    """One full round; returns the verdict."""
    clock = clock or FakeClock()
    checker = PogChecker(k=K, dtype="fp32", answer_window_s=10.0, clock=clock)
    seed, randomness = keccak(f"seed-{label}".encode()), keccak(f"rand-{label}".encode())
    uuid_hashes = getattr(prover, "uuid_hashes", None) or [d.uuid_hash for d in prover.devices]
    names = names or [CPU] * gpus
    checker.open_round(seed, [checker.claim(u, names[g], n) for g, u in enumerate(uuid_hashes)])
    clock.now += 0.5
    checker.receive_commitment(encode_commitment(prover.commit_round(seed, n)))
    checker.reveal(randomness)
    raw = encode_answers(prover.answer_round(randomness, K))
    clock.now += answer_delay
    return checker.judge(tamper(raw) if tamper else raw)


def uuids(count=1):
    return [keccak(f"GPU-{i}".encode()) for i in range(count)]


def test_honest_prover_passes_and_is_classed():
    verdict = play(PogProver([device("a")]), n=128)
    assert verdict.passed
    assert verdict.gpus[0].gpu_class == "CPU" and verdict.gpus[0].checked == K


def test_honest_prover_passes_1000_rounds_without_false_alarm():
    prover = PogProver([device("a")])
    failures = [r for r in range(1000) if not play(prover, n=64, label=str(r)).passed]
    assert failures == []


def test_structured_matrices_instead_of_keyed_prng_are_caught():
    def hankel(seed, g, u, n):
        rng = np.random.default_rng(int.from_bytes(seed[:8], "big"))
        diag = rng.integers(-8, 8, size=2 * n)
        a = diag[np.add.outer(np.arange(n), np.arange(n))]
        return (a @ a.T).astype(np.int32)  # built in O(n^2) structure, no keyed hash

    verdict = play(ScriptedProver(uuids(), hankel))
    assert not verdict.passed
    assert isinstance(verdict.gpus[0].error, WrongElement)


def test_prover_computing_90_percent_is_caught_at_rate_one_minus_f_to_the_k():
    n, rounds = 128, 40
    count = leaf_count(n)
    wrong = count // 10 + 1

    def partial(seed, g, u, n):
        product = honest_product(seed, g, u, n).copy()
        rng = random.Random(seed)
        for index in rng.sample(range(count), wrong):
            row, col = chunk_position(n, index)
            product[row, col : col + 64] = [rng.randrange(-64 * n, 64 * n) for _ in range(64)]
        return product

    verdicts = [play(ScriptedProver(uuids(), partial), n=n, label=f"p{r}") for r in range(rounds)]
    caught = [v for v in verdicts if not v.passed]
    assert all(isinstance(v.gpus[0].error, WrongElement) for v in caught)
    pass_probability = (1 - wrong / count) ** K  # about 0.032
    assert len(caught) >= rounds - 6, (len(caught), pass_probability)


def test_old_root_for_a_new_seed_is_caught():
    old_seed = keccak(b"seed-old")
    stale = ScriptedProver(uuids(), lambda seed, g, u, n: honest_product(old_seed, g, u, n))
    verdict = play(stale, label="new")
    assert not verdict.passed
    assert isinstance(verdict.gpus[0].error, WrongElement)


def test_root_for_a_smaller_n_is_refused_when_declared():
    prover = ScriptedProver(uuids(), lambda seed, g, u, n: honest_product(seed, g, u, n // 2))
    with pytest.raises(CommitmentMismatch):
        play(prover, n=128)


def test_root_for_a_smaller_n_posing_as_the_assigned_n_is_caught():
    prover = ScriptedProver(uuids(), lambda seed, g, u, n: honest_product(seed, g, u, n // 2),
                            declared_n=128)
    verdict = play(prover, n=128)
    assert not verdict.passed
    assert isinstance(verdict.gpus[0].error, InvalidProof)


def test_forged_leaf_computed_on_demand_under_a_lazy_root_is_caught():
    class Lazy(ScriptedProver):
        """Commits zeros (no work), then computes only the challenged chunks (cheap)."""

        def answer(self, g, index):
            keys = WorkloadKeys.derive(gpu_seed(self.seed, g, self.uuid_hashes[g]))
            real = reference_product(keys, self.products[g].shape[0])
            row, col = chunk_position(real.shape[0], index)
            return ChunkAnswer(index, encode(real[row, col : col + 64]),
                               tuple(self.trees[g].proof(index)))

    verdict = play(Lazy(uuids(), lambda seed, g, u, n: np.zeros((n, n), np.int32)))
    assert not verdict.passed
    assert isinstance(verdict.gpus[0].error, InvalidProof)


def test_chunk_from_another_index_is_caught():
    class Shifted(ScriptedProver):
        def answer(self, g, index):
            other = self.chunk(g, (index + 1) % self.trees[g].size)
            return ChunkAnswer(index, other.data, other.siblings)

    class ShiftedData(ScriptedProver):
        def answer(self, g, index):
            other = self.chunk(g, (index + 1) % self.trees[g].size)
            return ChunkAnswer(index, other.data, self.chunk(g, index).siblings)

    for cls in (Shifted, ShiftedData):
        verdict = play(cls(uuids(), honest_product))
        assert not verdict.passed
        assert isinstance(verdict.gpus[0].error, InvalidProof), cls.__name__


def test_answers_for_indices_of_the_provers_choosing_are_caught():
    class Chooser(ScriptedProver):
        def answer_round(self, randomness, k):
            return RoundAnswers(self.seed, (GpuAnswers(0, tuple(self.chunk(0, 0)
                                                               for _ in range(k))),))

    verdict = play(Chooser(uuids(), honest_product))
    assert not verdict.passed
    assert isinstance(verdict.gpus[0].error, CommitmentMismatch)


def test_late_answer_fails_every_gpu():
    verdict = play(ScriptedProver(uuids(2), honest_product), gpus=2, answer_delay=10.5)
    assert not verdict.passed
    assert all(isinstance(g.error, LateAnswer) for g in verdict.gpus)


def test_one_gpu_answering_for_two_is_caught():
    two = uuids(2)
    only_first = ScriptedProver(two, lambda seed, g, u, n: honest_product(seed, 0, two[0], n))
    verdict = play(only_first, gpus=2)
    assert verdict.gpus[0].passed
    assert not verdict.gpus[1].passed
    assert isinstance(verdict.gpus[1].error, WrongElement)


def test_same_uuid_claimed_twice_is_refused():
    same = [keccak(b"GPU-0")] * 2
    with pytest.raises(RoundRefused):
        play(ScriptedProver(same, honest_product), gpus=2)


def test_claims_of_different_sizes_in_one_round_are_refused():
    checker = PogChecker(k=K)
    with pytest.raises(RoundRefused):
        checker.open_round(keccak(b"s"), [checker.claim(u, CPU, n)
                                          for u, n in zip(uuids(2), (64, 128))])


def test_real_prover_on_two_devices_passes_with_distinct_seeds():
    verdict = play(PogProver([device("a"), device("b")]), gpus=2)
    assert verdict.passed and len(verdict.gpus) == 2


def test_oversized_answers_are_refused():
    verdict = play(ScriptedProver(uuids(), honest_product), tamper=lambda raw: raw + b" " * 10**6)
    assert not verdict.passed
    assert isinstance(verdict.gpus[0].error, MessageTooLarge)


def test_commitment_for_another_seed_is_refused():
    class WrongSeed(ScriptedProver):
        def commit_round(self, seed, n):
            return super().commit_round(keccak(b"mine"), n)

    with pytest.raises(RoundRefused):
        play(WrongSeed(uuids(), honest_product))


def test_measured_rate_below_the_claimed_class_passes_without_the_class():
    # A correct round that is slow for its claim is not a failure (an honest device must never
    # fail for being slow end to end), and the claim earns nothing: no class is attested.
    verdict = play(PogProver([device("a")]), names=["NVIDIA GeForce RTX 4090"])
    assert verdict.passed
    assert verdict.gpus[0].gpu_class is None and "honest floor" in verdict.gpus[0].unidentified


def test_verifier_chooses_n_from_the_claimed_class():
    claim = PogChecker.claim(keccak(b"u"), "NVIDIA A100-SXM4-40GB")
    assert claim.n == 42240  # int8 by default: A, Bt 1 byte and C 4 bytes fill a quarter of 40 GB
    assert PogChecker.claim(keccak(b"u"), "NVIDIA A100-SXM4-40GB", dtype="fp16").n == 36608
    with pytest.raises(VerifierError):
        PogChecker.claim(keccak(b"u"), "Unknown Accelerator 9000")


def test_checker_refuses_out_of_order_steps_and_small_k():
    checker = PogChecker(k=K)
    with pytest.raises(VerifierError):
        checker.reveal(bytes(32))
    with pytest.raises(VerifierError):
        PogChecker(k=8)


# -- Class identification attacks (issue 11): one GPU posing as two, a CPU posing as a T4 --------

H100 = "NVIDIA H100 80GB HBM3"


class SequentialProver(PogProver):
    """One device computing every claimed GPU's matrices one after the other (real work on
    this CPU; the claimed UUIDs are the other GPUs it pretends to have)."""

    def commit_round(self, round_seed, n, progress=None):
        self.work = [compute_device(Device("cpu", d.name, d.uuid, 0), g,
                                    WorkloadKeys.derive(gpu_seed(round_seed, g, d.uuid_hash)),
                                    n, "fp32")
                     for g, d in enumerate(self.devices)]
        self.round_seed = round_seed
        return RoundCommitment(round_seed, tuple(w.commitment for w in self.work))


def device_timed_round(prover, name, n, dtype, rate_tflops, workloads_per_device, label):
    """A real round (real products, roots and answers) whose verifier clock advances by the time
    the prover's physical devices take at `rate_tflops` each: a device's workloads run one
    after the other, devices run side by side. This CPU cannot run at a GPU's speed; the clock
    is the only thing standing in for the hardware."""
    clock = FakeClock()
    clock.now = 0.0
    checker = PogChecker(k=K, dtype=dtype, answer_window_s=10.0, clock=clock)
    seed, randomness = keccak(f"seed-{label}".encode()), keccak(f"rand-{label}".encode())
    checker.open_round(seed, [checker.claim(d.uuid_hash, name, n) for d in prover.devices])
    commitment = prover.commit_round(seed, n)
    clock.now += max(workloads_per_device) * 2.0 * n**3 / (rate_tflops * 1e12)
    checker.receive_commitment(encode_commitment(commitment))
    checker.reveal(randomness)
    return checker.judge(encode_answers(prover.answer_round(randomness, K)))


def gpus(count, name=H100):
    return [Device("cpu", name, f"GPU-{name}-{i}", 0) for i in range(count)]


@pytest.mark.parametrize("dtype,rate", [("fp16", 0.8 * 989.4), ("int8", 0.7 * 1978.9)])
def test_one_h100_computing_two_claimed_h100s_one_after_the_other_is_not_identified(dtype, rate):
    # Before: each claimed GPU was credited with the whole round's time against a 0.30 floor,
    # so one H100 at 80% of its fp16 peak doing both matrices (40% each) passed as two.
    verdict = device_timed_round(SequentialProver(gpus(2)), H100, 128, dtype, rate, [2], dtype)
    assert all(g.checked == K for g in verdict.gpus)  # the work itself is right
    for g in verdict.gpus:
        assert g.gpu_class is None, g
        assert g.proven_devices < 2 or g.failure is not None


def test_two_h100s_side_by_side_without_a_residency_probe_prove_one():
    # Time cannot count devices (one device can do both workloads one after the other at
    # this rate's double); memory does: tests/verifier/test_pog_residency_round.py names them.
    fast = 0.85 * 1978.9
    verdict = device_timed_round(PogProver(gpus(2)), H100, 128, "int8", fast, [1, 1], "pair")
    assert verdict.passed
    assert [(g.gpu_class, g.proven_devices, g.resident) for g in verdict.gpus] == [(None, 1, None)] * 2
    assert "without a residency probe" in verdict.gpus[0].unidentified


def test_one_h100_at_its_ceiling_beside_a_cpu_server_posing_as_two_is_not_identified():
    # The H100 computes at its int8 ceiling and a two-socket AMX server at its own, sharing
    # both claimed GPUs' rows: together 3225 TOPS, 1613 per claimed GPU.
    combined = 1978.9 * 1.1 + 1048.6
    verdict = device_timed_round(PogProver(gpus(2)), H100, 128, "int8", combined, [2], "mixed")
    assert verdict.passed
    assert all(g.gpu_class is None and g.proven_devices == 1 for g in verdict.gpus)


def test_three_h100s_splitting_four_claimed_gpus_work_without_a_probe_prove_one():
    # The work of 4 claimed GPUs divides over 3 devices (rows of C): 4/3 of one workload each.
    verdict = device_timed_round(PogProver(gpus(4)), H100, 256, "int8", 1978.9, [4 / 3] * 3,
                                 "split")
    assert verdict.passed  # consistent with H100s, and the work is right
    assert all(g.gpu_class is None and g.proven_devices == 1 for g in verdict.gpus)


def test_this_cpu_in_a_real_round_claiming_a_t4_is_not_a_t4():
    # The real clock: whatever this machine's CPU reaches, it is not named a T4.
    for dtype in ("fp32", "bf16", "int8"):
        checker = PogChecker(k=K, dtype=dtype, answer_window_s=60.0)
        prover = PogProver(gpus(1, "Tesla T4"), dtype="fp32")
        seed, randomness = keccak(f"t4-{dtype}".encode()), keccak(b"t4-r")
        checker.open_round(seed, [checker.claim(prover.devices[0].uuid_hash, "Tesla T4", 512)])
        checker.receive_commitment(encode_commitment(prover.commit_round(seed, 512)))
        checker.reveal(randomness)
        verdict = checker.judge(encode_answers(prover.answer_round(randomness, K)))
        assert verdict.gpus[0].checked == K and verdict.gpus[0].gpu_class is None, dtype


# Rates CPUs reach (dense peaks): a 32-core Zen 4 in fp32 (32 flops a cycle at 3.5 GHz), a
# 16-core Zen 4 with AVX-512 BF16 (64 a cycle), a 32-core Xeon 6 on AMX fp16 and int8.
FAST_CPUS = [("fp32", 32 * 32 * 3.5e9 / 1e12), ("bf16", 16 * 64 * 3.5e9 / 1e12),
             ("fp16", 32 * 1024 * 2.0e9 / 1e12), ("int8", 32 * 2048 * 2.0e9 / 1e12)]


@pytest.mark.parametrize("dtype,rate", FAST_CPUS)
def test_a_fast_cpu_in_a_real_round_claiming_a_t4_is_unidentified(dtype, rate):
    # Before: 3.6 TFLOPS fp32 or bf16 lay in the T4's band [2.43, 8.91] and was named "T4".
    verdict = device_timed_round(PogProver(gpus(1, "Tesla T4"), dtype="fp32"), "Tesla T4", 256,
                                 dtype, rate, [1], f"fast-cpu-{dtype}")
    gpu = verdict.gpus[0]
    assert verdict.passed and gpu.checked == K  # real, correct work: not a failure ...
    assert gpu.gpu_class is None and "CPU server" in gpu.unidentified  # ... but no T4


def test_this_machines_cpu_stays_below_the_documented_ceiling_and_every_class_floor():
    floors = [identifiable_floor(p) for p in PROFILES if not p.is_cpu]
    for dtype in ("fp32", "bf16", "int8"):
        rate = benchmark_tflops("cpu", dtype, n=512, warmup=1, repeats=3)
        assert 0 < rate < CPU_CEILING_TOPS[dtype] and rate < min(floors), (dtype, rate)
