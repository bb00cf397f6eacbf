"""A whole Proof-of-GPU round played locally: prove on every device, self-challenge, check.

The check uses the protocol's own rules (index derivation, inclusion, exact recomputation,
class identification), the same `protocol.pog` functions a verifier runs, so a box can see what
a verifier would decide before staking on it. `unchained pog run` and `unchained bench` use it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from protocol.errors import ProtocolError
from protocol.pog.challenge import challenge_indices
from protocol.pog.check import check_chunks
from protocol.pog.profiles import Identification, identify
from protocol.pog.workload import gpu_seed
from provider_agent.gpus import Device
from provider_agent.pog_prover import DeviceWork, PogProver, ProgressFn, benchmark_tflops


@dataclass(frozen=True)
class LocalRoundResult:
    work: DeviceWork
    dense_tflops: float  # bare matmul at the same n and dtype
    seed_to_root_s: float  # all devices, wall time
    verify_s: float  # verifier CPU time for this device's answers
    gpu_class: str | None  # named only when the rate proves it (see `unidentified`)
    failure: str | None
    unidentified: str | None = None  # why a passing round names no class
    proven_devices: int = 0

    @property
    def overhead(self) -> float:
        """PoG round time / bare matmul time (1.0 would be a free commitment)."""
        return self.dense_tflops / self.work.tflops

    @property
    def verify_ratio(self) -> float:
        """Verifier CPU time / prover seed-to-root time."""
        return self.verify_s / self.work.timings.seed_to_root


def local_round(devices: Sequence[Device], sizes: Mapping[int, int], dtype: str, k: int,
                progress: ProgressFn | None = None) -> list[LocalRoundResult]:
    round_seed, randomness = os.urandom(32), os.urandom(32)
    prover = PogProver(devices, dtype)
    # The bare matmul at the round's n, for the overhead ratio; also the warm-up (the first
    # matmul on a device pays for thread pools and kernels).
    dense = [benchmark_tflops(d.spec, dtype, sizes[g]) for g, d in enumerate(devices)]
    start = time.perf_counter()
    commitment = prover.commit_round(round_seed, sizes, progress)
    seed_to_root = time.perf_counter() - start
    answers = prover.answer_round(randomness, k)

    results = []
    for g, (gpu, answered) in enumerate(zip(commitment.gpus, answers.gpus)):
        cpu = time.process_time()
        found, failure = _self_check(
            devices[g], round_seed, randomness, gpu.root, sizes[g], k,
            [(a.index, a.data, a.siblings) for a in answered.answers],
            2 * sizes[g] ** 3 / seed_to_root / 1e12, dtype, g, len(devices))
        results.append(LocalRoundResult(
            prover.work[g], dense[g], seed_to_root, time.process_time() - cpu,
            found.gpu_class if found else None, failure, found.reason if found else None,
            found.proven_devices if found else 0))
    return results


def _self_check(device: Device, round_seed: bytes, randomness: bytes, root: bytes, n: int,
                k: int, answers: list[tuple[int, bytes, tuple[bytes, ...]]], tflops: float,
                dtype: str, g: int, gpu_count: int) -> tuple[Identification | None, str | None]:
    """(identification, None) when the answers pass as a verifier checks them, else (None, why).

    Every device is credited with the round's one wall time, as a verifier does."""
    try:
        wanted = challenge_indices(randomness, root, n * n // 64, k)
        if [index for index, _, _ in answers] != wanted:
            return None, "answered indices are not the challenged ones"
        check_chunks(gpu_seed(round_seed, g, device.uuid_hash), n, root, answers)
        return identify(device.name, tflops, dtype, gpu_count), None
    except ProtocolError as err:
        return None, str(err)
