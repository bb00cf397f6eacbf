"""A whole Proof-of-GPU round played locally: prove on every device, self-challenge, check.

The check uses the protocol's own rules (index derivation, inclusion, exact recomputation,
residency probe, class identification), the same `protocol.pog` functions a verifier runs, so a
box can see what a verifier would decide before staking on it. `unchained pog run` and
`unchained bench` use it. A box of several GPUs also builds every device's residency fill at
once and answers one probe, timed against the verifier's deadline: that is what counts them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from protocol.errors import ProtocolError
from protocol.pog.challenge import challenge_indices
from protocol.pog.check import check_chunks
from protocol.pog.profiles import Identification, identify, lookup
from protocol.pog.residency import (
    PROBE_DEADLINE_S,
    FillParams,
    check_probes,
    fill_params_for,
    probe_indices,
)
from protocol.pog.workload import gpu_seed
from provider_agent.gpus import Device
from provider_agent.pog_prover import DeviceWork, PogProver, ProgressFn, benchmark_tflops
from provider_agent.pog_residency import FillError, ResidencyProver


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
    resident: bool | None = None  # its fill answered the probe in time (None: no probe)
    probe_s: float | None = None  # every device's probe answers, wall time

    @property
    def overhead(self) -> float:
        """PoG round time / bare matmul time (1.0 would be a free commitment)."""
        return self.dense_tflops / self.work.tflops

    @property
    def verify_ratio(self) -> float:
        """Verifier CPU time / prover seed-to-root time."""
        return self.verify_s / self.work.timings.seed_to_root


def local_round(devices: Sequence[Device], sizes: Mapping[int, int], dtype: str, k: int,
                progress: ProgressFn | None = None,
                fill: FillParams | None = None) -> list[LocalRoundResult]:
    """The round on every device; `fill` overrides the class-sized residency fill (tests)."""
    round_seed, randomness = os.urandom(32), os.urandom(32)
    prover = PogProver(devices, dtype)
    # The bare matmul at the round's n, for the overhead ratio; also the warm-up (the first
    # matmul on a device pays for thread pools and kernels).
    dense = [benchmark_tflops(d.spec, dtype, sizes[g]) for g, d in enumerate(devices)]
    start = time.perf_counter()
    commitment = prover.commit_round(round_seed, sizes, progress)
    seed_to_root = time.perf_counter() - start
    answers = prover.answer_round(randomness, k)
    probe = local_residency(devices, round_seed, fill)

    results = []
    for g, (gpu, answered) in enumerate(zip(commitment.gpus, answers.gpus)):
        cpu = time.process_time()
        found, failure = _self_check(
            devices[g], round_seed, randomness, gpu.root, sizes[g], k,
            [(a.index, a.data, a.siblings) for a in answered.answers],
            2 * sizes[g] ** 3 / seed_to_root / 1e12, dtype, g, len(devices),
            probe.resident_count if probe else None)
        if probe is not None and probe.failures[g] is not None:
            failure = failure or probe.failures[g]
        results.append(LocalRoundResult(
            prover.work[g], dense[g], seed_to_root, time.process_time() - cpu,
            found.gpu_class if found and not failure else None, failure,
            found.reason if found else None, found.proven_devices if found else 0,
            None if probe is None else probe.resident(g),
            None if probe is None else probe.probe_s))
    return results


@dataclass(frozen=True)
class LocalProbe:
    probe_s: float
    failures: tuple[str | None, ...]  # per device: what was wrong with its fill or answers

    @property
    def late(self) -> bool:
        return self.probe_s > PROBE_DEADLINE_S

    def resident(self, g: int) -> bool:
        return not self.late and self.failures[g] is None

    @property
    def resident_count(self) -> int:
        return sum(self.resident(g) for g in range(len(self.failures)))


def local_residency(devices: Sequence[Device], round_seed: bytes,
                    fill: FillParams | None) -> LocalProbe | None:
    """Every device's fill built at once, probed at once and checked as a verifier does; None
    where no probe applies (one device, or a device of no GPU class)."""
    if len(devices) < 2:
        return None
    if fill is None:
        profiles = [lookup(d.name) for d in devices]
        if any(p is None or p.is_cpu for p in profiles):
            return None
        params = {g: fill_params_for(p) for g, p in enumerate(profiles) if p is not None}
    else:
        params = {g: fill for g in range(len(devices))}
    prover = ResidencyProver(devices)
    try:
        fills = prover.commit_fills(round_seed, params)
    except FillError as err:
        return LocalProbe(0.0, (f"residency: {err}",) * len(devices))
    randomness = os.urandom(32)
    start = time.perf_counter()
    answered = prover.answer_probes(randomness)
    probe_s = time.perf_counter() - start
    failures: list[str | None] = []
    for g, (root, gpu) in enumerate(zip(fills.gpus, answered.gpus)):
        try:
            indices = probe_indices(randomness, root.root, params[g])
            check_probes(gpu_seed(round_seed, g, devices[g].uuid_hash), params[g], root.root,
                         indices, gpu.probes)
            failures.append(None)
        except ProtocolError as err:
            failures.append(f"residency: {err}")
    return LocalProbe(probe_s, tuple(failures))


def _self_check(device: Device, round_seed: bytes, randomness: bytes, root: bytes, n: int,
                k: int, answers: list[tuple[int, bytes, tuple[bytes, ...]]], tflops: float,
                dtype: str, g: int, gpu_count: int,
                resident: int | None) -> tuple[Identification | None, str | None]:
    """(identification, None) when the answers pass as a verifier checks them, else (None, why).

    Every device is credited with the round's one wall time, as a verifier does."""
    try:
        wanted = challenge_indices(randomness, root, n * n // 64, k)
        if [index for index, _, _ in answers] != wanted:
            return None, "answered indices are not the challenged ones"
        check_chunks(gpu_seed(round_seed, g, device.uuid_hash), n, root, answers)
        if resident is None:
            return identify(device.name, tflops, dtype, gpu_count), None
        return identify(device.name, tflops, dtype, gpu_count, resident), None
    except ProtocolError as err:
        return None, str(err)
