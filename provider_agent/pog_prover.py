"""Proof-of-GPU prover: compute C = A·B for the round's per-GPU seed, commit its chunks, answer.

Layout of one device's work (DESIGN.md requirements 3, 6, 10):
- A and Bt are generated whole on the device, then C is multiplied one row panel at a time.
  On a GPU each panel's leaves are hashed on the GPU itself (keccak_torch's choice: by default
  the Triton kernel of keccak_triton) when that kernel builds there and passes its bit-exact
  self-check; otherwise the panel is cast to int32, copied to the host and handed to a hashing
  thread while the next panel multiplies. Host hashing is the native batched keccak (GIL-free, all cores), the
  provider extra's unchained-keccak; without it the prover refuses (NativeKeccakMissing), never hashes slowly.
- Only the Merkle levels are kept (32 bytes per 64 elements). A challenged chunk is recomputed
  from the seed (one row of A, 64 rows of Bt) and must hash to the committed leaf, so any index
  is answered in O(64 n) without holding C.
- Every device of a round runs at once, one thread each (torch releases the GIL).
"""

from __future__ import annotations

import logging
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import torch

from protocol.merkle import MerkleTree, MessageHasher, leaf_hash
from protocol.pog.challenge import challenge_indices
from protocol.pog.check import expected_chunks
from protocol.pog.commitment import chunk_hashes, encode
from protocol.pog.identity import AttestationEvidence
from protocol.pog.messages import (
    ChunkAnswer,
    GpuAnswers,
    GpuCommitment,
    RoundAnswers,
    RoundCommitment,
)
from protocol.pog.workload import MatrixKeys, WorkloadKeys, check_n, gpu_seed, rows
from provider_agent import ProviderAgentError, keccak_torch
from provider_agent.gpus import Device
from provider_agent.identity import CC_DEVTOOLS, CC_ON, EvidenceUnavailable, collect_evidence
from provider_agent.keccak_native import native_hasher

logger = logging.getLogger(__name__)

TORCH_DTYPES = {"int8": torch.int8, "fp32": torch.float32, "fp16": torch.float16,
                "bf16": torch.bfloat16}
_MASK32 = 0xFFFFFFFF
# Words generated per CUDA block: bounds the int64 temporaries (8 nibbles each) to 256 MiB.
_CUDA_BLOCK_WORDS = 1 << 22
_CPU_PANEL_ELEMENTS = 1 << 26


class ProverError(ProviderAgentError):
    """The prover cannot produce or answer a commitment (bad dtype, no commitment, ...)."""


class InconsistentCommitment(ProverError):
    """A recomputed chunk does not hash to the committed leaf: the device computed C wrongly."""

    def __init__(self, gpu_index: int, index: int) -> None:
        super().__init__(f"gpu {gpu_index}: chunk {index} differs from its committed leaf")
        self.gpu_index = gpu_index
        self.index = index


def default_dtype(device: Device) -> str:
    """CPU: fp32 (exact, and no slower than int8 in torch there); CUDA: int8 inputs with int32
    accumulation, the fastest exact path torch has on tensor cores (twice fp16 from Turing to
    Hopper). A verifier identifies a class only from rates near its fastest exact arithmetic
    (protocol/pog/profiles.py), so an honest GPU uses it."""
    return "fp32" if device.is_cpu else "int8"


def _torch_mix(x: torch.Tensor) -> torch.Tensor:
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & _MASK32
    x = x ^ (x >> 15)
    x = (x * 0x846CA68B) & _MASK32
    return x ^ (x >> 16)


def torch_words(keys: MatrixKeys, counters: torch.Tensor) -> torch.Tensor:
    """The PROTOCOL.md word hash in torch int64 masked to 32 bits (products wrap mod 2^64,
    which keeps the low 32 bits exact), for generating matrices on the GPU itself."""
    x = _torch_mix((counters.to(torch.int64) ^ keys.k1) & _MASK32)
    return _torch_mix(x ^ keys.k2)


_TORCH_SHIFTS = torch.arange(0, 32, 4, dtype=torch.int64)


def torch_rows(keys: MatrixKeys, n: int, start: int, stop: int, device: str) -> torch.Tensor:
    """Rows [start, stop) of A or Bt as int8 on `device`, bit-identical to protocol's rows()."""
    check_n(n)
    per_row = n // 8
    counters = torch.arange(start * per_row, stop * per_row, dtype=torch.int64, device=device)
    nibbles = (torch_words(keys, counters).unsqueeze(-1) >> _TORCH_SHIFTS.to(device)) & 15
    return (nibbles - 8).to(torch.int8).reshape(stop - start, n)


def generate(keys: MatrixKeys, n: int, start: int, stop: int, device: str,
             dtype: torch.dtype) -> torch.Tensor:
    """Rows of a workload matrix in the matmul dtype, on the device that multiplies them."""
    if device == "cpu":
        return torch.from_numpy(rows(keys, n, start, stop)).to(dtype)
    out = torch.empty((stop - start, n), dtype=dtype, device=device)
    block = max(1, _CUDA_BLOCK_WORDS // (n // 8))
    for r0 in range(start, stop, block):
        r1 = min(stop, r0 + block)
        out[r0 - start : r1 - start] = torch_rows(keys, n, r0, r1, device).to(dtype)
    return out


def exact_matmul(a: torch.Tensor, bt: torch.Tensor) -> torch.Tensor:
    """a · bt^T, exact for PoG entries: int8 with int32 output, else fp32 accumulation and fp32
    output (sums < 2^24)."""
    if a.dtype == torch.int8:
        try:  # cuBLASLt IMMA on CUDA (bt.T is the column-major operand it wants), oneDNN on CPU
            return torch._int_mm(a, bt.T)
        except RuntimeError as err:  # a GPU/torch without int8 GEMM: exact but slower path
            logger.warning("int8 matmul unavailable (%s); using fp32", err)
            return a.float() @ bt.float().T
    if a.dtype == torch.float32:
        return a @ bt.T
    if a.device.type != "cuda":
        raise ProverError(f"{a.dtype} has no exact fp32-output matmul on {a.device.type}")
    try:
        return torch.mm(a, bt.T, out_dtype=torch.float32)
    except RuntimeError as err:  # a GPU/torch without fp16->fp32 GEMM: exact but slower path
        logger.warning("%s matmul with fp32 output unavailable (%s); using fp32", a.dtype, err)
        return a.float() @ bt.float().T


@dataclass
class Timings:
    """Wall-time split of one device's round, in seconds."""

    generate: float = 0.0
    matmul: float = 0.0
    commit: float = 0.0
    prove: float = 0.0
    # time spent hashing panels: on host threads (overlapped with a GPU's matmul) or, with
    # on-device hashing, on the GPU between panels
    hash_cpu: float = 0.0

    @property
    def seed_to_root(self) -> float:
        return self.generate + self.matmul + self.commit


@dataclass
class DeviceWork:
    """One device's committed round: enough to answer any challenged index."""

    device: Device
    gpu_index: int
    n: int
    dtype: str
    keys: WorkloadKeys
    tree: MerkleTree
    timings: Timings = field(default_factory=Timings)

    @property
    def commitment(self) -> GpuCommitment:
        return GpuCommitment(self.gpu_index, self.device.uuid_hash, self.n, self.tree.root)

    @property
    def tflops(self) -> float:
        """Throughput over the whole seed-to-root time (what the verifier measures)."""
        return 2.0 * self.n**3 / self.timings.seed_to_root / 1e12

    def answer(self, indices: Sequence[int]) -> tuple[ChunkAnswer, ...]:
        """Chunks recomputed from the seed (one batch), each checked against its committed leaf."""
        values = expected_chunks(self.keys, self.n, indices).astype(np.int32)
        answers = []
        for index, chunk in zip(indices, values):
            data = encode(chunk)
            if leaf_hash(data) != self.tree.leaf_hash(index):
                raise InconsistentCommitment(self.gpu_index, index)
            answers.append(ChunkAnswer(index, data, tuple(self.tree.proof(index))))
        return tuple(answers)


ProgressFn = Callable[[int, int], None]


def default_hasher() -> MessageHasher:
    """The native batched keccak; raises NativeKeccakMissing where it was not built (the
    reference gives the same bytes several times slower, which would understate the device)."""
    return native_hasher()


def compute_device(device: Device, gpu_index: int, keys: WorkloadKeys, n: int, dtype: str,
                   panel_rows: int | None = None, progress: ProgressFn | None = None,
                   hasher: MessageHasher | None = None) -> DeviceWork:
    """Generate, multiply panel by panel and commit on one device (hashing overlapped on GPUs)."""
    check_n(n)
    # CUDA: hash on the device (DESIGN.md requirement 10: 42M leaves at n=51776 take ~2 s on
    # CPU threads against ~0.4 s of matmul). Checked, and compiled on first use, before the
    # clock starts; an explicitly given hasher keeps the host path.
    on_device = not device.is_cpu and hasher is None and keccak_torch.device_ready(device.spec)
    hasher = hasher or default_hasher()
    torch_dtype = TORCH_DTYPES[dtype]
    spec = device.spec
    # GPU: small panels so hashing starts early and overlaps. CPU: no overlap there, and one
    # big GEMM runs faster than thin ones, so panels only bound memory (64 Mi elements each).
    panel = panel_rows or (max(64, _CPU_PANEL_ELEMENTS // n // 64 * 64) if device.is_cpu
                           else max(64, n // 16))
    timings = Timings()
    hash_lock = threading.Lock()

    def hash_panel(values: np.ndarray) -> bytes:
        t = time.perf_counter()
        out = chunk_hashes(values, hasher)
        with hash_lock:
            timings.hash_cpu += time.perf_counter() - t
        return out

    def hash_panel_on_device(product: torch.Tensor) -> bytes:
        t = time.perf_counter()
        leaves = keccak_torch.leaf_hashes(product.to(torch.int32),
                                          keccak_torch.chosen_permutation())
        out = leaves.cpu().numpy().tobytes()  # 32 bytes per 256-byte chunk cross the bus
        timings.hash_cpu += time.perf_counter() - t
        return out

    start = time.perf_counter()
    with ThreadPoolExecutor(1, thread_name_prefix=f"pog-gen-{gpu_index}") as gen:
        later = gen.submit(generate, keys.a, n, 0, n, spec, torch_dtype)  # numpy frees the GIL
        bt = generate(keys.b, n, 0, n, spec, torch_dtype)
        a = later.result()
    timings.generate = time.perf_counter() - start
    # On a GPU, finished panels hash on CPU threads while later panels multiply. On a CPU the
    # matmul and the hasher each want every core, and overlapping them only makes OpenMP's
    # threads wait on each other (measured: 2-3x slower), so there a panel hashes after its
    # matmul, each with all cores.
    # With on-device hashing a panel hashes after its matmul, on the same stream.
    overlap = not device.is_cpu and not on_device
    leaves: list[bytes] = []
    futures: list[Future[bytes]] = []
    pool = ThreadPoolExecutor(1, thread_name_prefix=f"pog-hash-{gpu_index}") if overlap else None
    try:
        for r0 in range(0, n, panel):
            r1 = min(n, r0 + panel)
            t = time.perf_counter()
            product = exact_matmul(a[r0:r1], bt)
            if on_device:
                torch.cuda.synchronize(device.spec)  # so that the clock times the matmul alone
                timings.matmul += time.perf_counter() - t
                leaves.append(hash_panel_on_device(product))
            else:
                c = product.cpu().numpy()  # exact integers in fp32 or int32
                timings.matmul += time.perf_counter() - t
                if pool is not None:
                    futures.append(pool.submit(hash_panel, c))
                else:
                    leaves.append(hash_panel(c))
            if progress:
                progress(r1, n)
        leaves.extend(f.result() for f in futures)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    tree = MerkleTree(b"".join(leaves), keccak_torch.torch_hasher(
        device.spec, keccak_torch.chosen_permutation()) if on_device else hasher)
    # Whatever of the wall time was not generation or matmul went to committing.
    timings.commit = time.perf_counter() - start - timings.generate - timings.matmul
    logger.info("gpu %s (%s) committed n=%s root=0x%s in %.3f s", gpu_index, spec, n,
                tree.root.hex(), timings.seed_to_root)
    return DeviceWork(device, gpu_index, n, dtype, keys, tree, timings)


class PogProver:
    """Proves every device of this box in the same round, one thread per device."""

    def __init__(self, devices: Sequence[Device], dtype: str | None = None,
                 panel_rows: int | None = None) -> None:
        if not devices:
            raise ProverError("no device to prove")
        self.devices = list(devices)
        self.dtype = dtype
        self.panel_rows = panel_rows
        self.round_seed: bytes | None = None
        self.work: list[DeviceWork] = []

    def commit_round(self, round_seed: bytes, n: int | Mapping[int, int],
                     progress: ProgressFn | None = None) -> RoundCommitment:
        """Compute and commit on every device at once; n is the verifier's, per GPU or shared."""
        sizes = {g: (n if isinstance(n, int) else n[g]) for g in range(len(self.devices))}

        def one(g: int) -> DeviceWork:
            device = self.devices[g]
            keys = WorkloadKeys.derive(gpu_seed(round_seed, g, device.uuid_hash))
            return compute_device(device, g, keys, sizes[g], self.dtype or default_dtype(device),
                                  self.panel_rows, progress if g == 0 else None)

        if len(self.devices) == 1:
            self.work = [one(0)]
        else:
            with ThreadPoolExecutor(max_workers=len(self.devices)) as pool:
                self.work = list(pool.map(one, range(len(self.devices))))
        self.round_seed = round_seed
        return RoundCommitment(round_seed, tuple(w.commitment for w in self.work))

    def answer_round(self, randomness: bytes, k: int) -> RoundAnswers:
        """Reveal the k chunks per GPU that (randomness, root, leafCount) select."""
        if self.round_seed is None:
            raise ProverError("answer_round before commit_round")
        gpus = []
        for work in self.work:
            t = time.perf_counter()
            indices = challenge_indices(randomness, work.tree.root, work.tree.size, k)
            gpus.append(GpuAnswers(work.gpu_index, work.answer(indices), work.device.identity,
                                   self._evidence(work.device)))
            work.timings.prove = time.perf_counter() - t
        return RoundAnswers(self.round_seed, tuple(gpus))

    def _evidence(self, device: Device) -> AttestationEvidence | None:
        """The GPU's attestation report for the round's seed where it runs in CC mode (the seed
        is the nonce: the report is bound to this round). Collected with the answers, after the
        timed seed-to-root; a GPU that cannot produce one answers without it (logged)."""
        if device.identity is None or device.identity.cc_mode not in (CC_ON, CC_DEVTOOLS):
            return None
        assert self.round_seed is not None  # answer_round checked it
        try:
            found = collect_evidence(device.uuid, self.round_seed)
        except EvidenceUnavailable as err:
            logger.warning("%s is in CC mode but gave no attestation evidence: %s", device.uuid, err)
            return None
        return AttestationEvidence(found.report, found.cert_chain)


def benchmark_tflops(spec: str, dtype: str, n: int | None = None, warmup: int = 2,
                     repeats: int = 5) -> float:
    """Dense matmul TFLOPS (median of timed runs after warm-up; CUDA events on a GPU)."""
    torch_dtype = TORCH_DTYPES[dtype]
    n = n or (1024 if spec == "cpu" else 8192)
    a = torch.randint(-8, 8, (n, n), device=spec).to(torch_dtype)
    b = torch.randint(-8, 8, (n, n), device=spec).to(torch_dtype)
    multiply = (lambda: exact_matmul(a, b)) if dtype == "int8" else (lambda: a @ b)
    for _ in range(warmup):
        multiply()
    times = []
    for _ in range(repeats):
        if spec == "cpu":
            t = time.perf_counter()
            multiply()
            times.append(time.perf_counter() - t)
        else:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            multiply()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
    return 2.0 * n**3 / statistics.median(times) / 1e12
