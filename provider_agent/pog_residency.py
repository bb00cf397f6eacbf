"""Residency fills on this box's devices (protocol/pog/residency.py): build, commit, answer.

- A fill lives on its device as an (N, 32) uint8 tensor, N = lanes x steps. A step is one
  batch over all lanes: the lanes' previous blocks, the index hash, a gather of the 15
  references from the fill itself (any earlier step), and the block hashes. On a GPU the
  sequential part is `steps` batches of 2^18 lanes; the CPU path runs the same code on the
  small fills tests use.
- Hashing happens where the fill is: the compiled torch keccak on a CUDA device where it builds
  and is bit-exact (keccak_torch.device_ready), else the native batched keccak on host copies
  of each batch (the CPU path; a GPU without the compiled kernel would build slowly, which only
  costs the prover time, never a wrong block).
- Committing keeps only the roots of aligned subtrees of 2^h blocks (on the host: N / 2^h x 32
  bytes) and the tree above them. A full tree would be as large as the fill itself; a proof
  instead re-hashes the opened block's subtree from the fill (2^h leaves, on the device).
- Every device of a round builds at once, one thread each (torch releases the GIL), so the
  fills are resident together when the probe comes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import torch

from protocol.merkle import LEAF_PREFIX, NODE_PREFIX, MerkleTree, MessageHasher
from protocol.pog.messages import FillRoot, GpuProbes, RoundFills, RoundProbes
from protocol.pog.residency import (
    BLOCK_BYTES,
    BLOCK_PREFIX,
    INDEX_PREFIX,
    PROBES,
    REFS,
    BlockOpening,
    FillParams,
    ProbeAnswer,
    fill_key,
    lane_starts,
    probe_indices,
)
from protocol.pog.workload import gpu_seed
from provider_agent import ProviderAgentError, keccak_torch
from provider_agent.gpus import Device
from provider_agent.keccak_native import native_hasher

logger = logging.getLogger(__name__)

# (messages (k, m) uint8, one-byte prefix) -> keccak256(prefix || message) per row, (k, 32)
# uint8, on the messages' device.
TensorHasher = Callable[[torch.Tensor, bytes], torch.Tensor]
# Subtrees of at most 2^10 blocks: a proof re-hashes 1,024 leaves and 1,023 nodes, and the
# roots kept are 1/1024 of the fill (128 MiB of roots for a 128 GiB fill).
SUBTREE_HEIGHT = 10
# Blocks committed per batch: bounds the leaf hashes held at once (32 bytes per block).
_COMMIT_BATCH = {"cuda": 1 << 22, "cpu": 1 << 16}


class FillError(ProviderAgentError):
    """A fill cannot be built or answered here (it does not fit the device, no fill yet)."""


def host_hasher(hasher: MessageHasher | None = None) -> TensorHasher:
    """A TensorHasher over a protocol.merkle.MessageHasher (default: the native keccak), for
    tensors on any device: the rows go to the host, the digests come back."""
    message_hasher = hasher or native_hasher()

    def hash_rows(messages: torch.Tensor, prefix: bytes) -> torch.Tensor:
        if messages.shape[0] == 0:
            return torch.empty((0, 32), dtype=torch.uint8, device=messages.device)
        data = messages.contiguous().cpu().numpy()
        out = message_hasher(memoryview(data).cast("B"), messages.shape[1], prefix)
        digests = torch.frombuffer(bytearray(out), dtype=torch.uint8).view(-1, 32)
        return digests.to(messages.device)

    return hash_rows


def device_hasher(spec: str) -> TensorHasher:
    """Where a fill on `spec` is hashed: on the GPU itself when the compiled kernel is usable
    there, else on the host with the native keccak."""
    if spec != "cpu" and keccak_torch.device_ready(spec):
        permutation = keccak_torch.chosen_permutation()
        return lambda messages, prefix: keccak_torch.hash_prefixed(messages, prefix, permutation)
    return host_hasher()


def ref_indices(prev: torch.Tensor, step: int, lanes: int, hasher: TensorHasher) -> torch.Tensor:
    """protocol's ref_indices in torch int64: (k, 32) uint8 previous blocks -> (k, 15)."""
    mixed = hasher(prev, INDEX_PREFIX)
    words = torch.cat((prev, mixed), dim=1).view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    t = words[:, :REFS] >> 1
    x = (t * t) >> 31  # t < 2^31: the square fits int64
    earlier = step * lanes  # < 2^32, and x < 2^31: the product fits int64
    return earlier - 1 - ((earlier * x) >> 31)


def blocks_from_parents(parents: torch.Tensor, iterations: int,
                        hasher: TensorHasher) -> torch.Tensor:
    """(k, 512) uint8 parents (previous block first) -> (k, 32) blocks."""
    out = hasher(parents, BLOCK_PREFIX)
    for _ in range(iterations - 1):
        out = hasher(out, BLOCK_PREFIX)
    return out


@dataclass
class ResidentFill:
    """One device's fill, kept on the device, and the upper part of its tree."""

    device: Device
    gpu_index: int
    params: FillParams
    blocks: torch.Tensor  # (N, 32) uint8 on the device
    upper: MerkleTree  # over the roots of subtrees of 2^height blocks
    height: int
    hasher: TensorHasher
    build_s: float
    commit_s: float

    @property
    def root(self) -> bytes:
        return self.upper.root

    def open(self, indices: Sequence[int]) -> list[BlockOpening]:
        """Blocks with their proofs: each opened block's subtree is re-hashed from the fill."""
        size = 1 << self.height
        subtrees = sorted({i >> self.height for i in indices})
        where = {s: k for k, s in enumerate(subtrees)}
        first = torch.tensor(subtrees, dtype=torch.int64, device=self.blocks.device) * size
        rows = (first[:, None] + torch.arange(size, device=self.blocks.device)).reshape(-1)
        data = self.blocks.index_select(0, rows)
        held = data.view(len(subtrees), size, BLOCK_BYTES).cpu()
        level = self.hasher(data, LEAF_PREFIX)
        levels = [level.view(len(subtrees), size, 32).cpu()]
        for _ in range(self.height):
            level = self.hasher(level.reshape(-1, 64), NODE_PREFIX)
            levels.append(level.view(len(subtrees), -1, 32).cpu())
        openings = []
        for index in indices:
            k, offset = where[index >> self.height], index & (size - 1)
            siblings = [bytes(levels[j][k, (offset >> j) ^ 1].numpy())
                        for j in range(self.height)]
            siblings += self.upper.proof(index >> self.height)
            openings.append(BlockOpening(index, bytes(held[k, offset].numpy()), tuple(siblings)))
        return openings

    def answer(self, indices: Sequence[int]) -> tuple[ProbeAnswer, ...]:
        """The probed blocks, each with its parents (the rule's indices, read off the fill)."""
        lanes = self.params.lanes
        wanted: list[list[int]] = []
        for index in indices:
            step = index // lanes
            if step == 0:
                wanted.append([index])
                continue
            prev = self.blocks[index - lanes : index - lanes + 1]
            refs = ref_indices(prev, step, lanes, self.hasher)[0].tolist()
            wanted.append([index, index - lanes, *refs])
        flat = [i for group in wanted for i in group]
        openings = dict(zip(flat, self.open(flat)))
        return tuple(ProbeAnswer(openings[g[0]], tuple(openings[i] for i in g[1:]))
                     for g in wanted)


def build_fill(device: Device, gpu_index: int, seed: bytes, params: FillParams,
               hasher: TensorHasher | None = None) -> ResidentFill:
    """Build one device's fill from its gpuSeed on the device, then commit it."""
    if device.memory_bytes and params.bytes > device.memory_bytes:
        raise FillError(f"gpu {gpu_index}: a fill of {params.bytes} bytes does not fit "
                        f"{device.spec}'s {device.memory_bytes} bytes")
    hasher = hasher or device_hasher(device.spec)
    lanes = params.lanes
    if device.spec.startswith("cuda"):  # the matmul round's cached blocks back to the driver
        torch.cuda.empty_cache()
    start = time.perf_counter()
    blocks = torch.empty((params.blocks, BLOCK_BYTES), dtype=torch.uint8, device=device.spec)
    blocks[:lanes] = torch.from_numpy(lane_starts(fill_key(seed), lanes)).to(device.spec)
    for step in range(1, params.steps):
        prev = blocks[(step - 1) * lanes : step * lanes]
        refs = ref_indices(prev, step, lanes, hasher)
        gathered = blocks.index_select(0, refs.reshape(-1)).view(lanes, REFS * BLOCK_BYTES)
        parents = torch.cat((prev, gathered), dim=1)
        blocks[step * lanes : (step + 1) * lanes] = blocks_from_parents(
            parents, params.iterations, hasher)
    if device.spec.startswith("cuda"):
        torch.cuda.synchronize(device.spec)
    built = time.perf_counter()
    height = min(SUBTREE_HEIGHT, lanes.bit_length() - 1)
    upper = MerkleTree(_subtree_roots(blocks, height, hasher),
                       _message_hasher(device.spec, hasher))
    fill = ResidentFill(device, gpu_index, params, blocks, upper, height, hasher,
                        built - start, time.perf_counter() - built)
    logger.info("gpu %s (%s) fill of %s blocks built in %.3f s, committed in %.3f s: 0x%s",
                gpu_index, device.spec, params.blocks, fill.build_s, fill.commit_s,
                fill.root.hex())
    return fill


def _subtree_roots(blocks: torch.Tensor, height: int, hasher: TensorHasher) -> bytes:
    """Roots of the aligned subtrees of 2^height blocks (the tree's level `height`), as bytes."""
    batch = _COMMIT_BATCH["cpu" if blocks.device.type == "cpu" else "cuda"]
    roots = []
    for first in range(0, blocks.shape[0], batch):
        level = hasher(blocks[first : first + batch], LEAF_PREFIX)
        for _ in range(height):
            level = hasher(level.reshape(-1, 64), NODE_PREFIX)
        roots.append(level.cpu().numpy().tobytes())
    return b"".join(roots)


def _message_hasher(spec: str, hasher: TensorHasher) -> MessageHasher:
    """The upper tree's hasher: on the fill's device, through the same TensorHasher."""
    device = torch.device(spec)

    def hash_buffer(buffer: bytes | bytearray | memoryview, size: int, prefix: bytes) -> bytes:
        data = torch.frombuffer(bytearray(buffer), dtype=torch.uint8).view(-1, size)
        return hasher(data.to(device), prefix).cpu().numpy().tobytes()

    return hash_buffer


class ResidencyProver:
    """Builds every device's fill at once after the matmul roots and answers the probe."""

    def __init__(self, devices: Sequence[Device]) -> None:
        if not devices:
            raise FillError("no device to fill")
        self.devices = list(devices)
        self.round_seed: bytes | None = None
        self.fills: list[ResidentFill] = []

    def commit_fills(self, round_seed: bytes,
                     params: FillParams | Mapping[int, FillParams]) -> RoundFills:
        """Build and commit a fill on every device at once (the verifier's params, per GPU or
        shared)."""
        sizes = {g: params if isinstance(params, FillParams) else params[g]
                 for g in range(len(self.devices))}

        def one(g: int) -> ResidentFill:
            device = self.devices[g]
            return build_fill(device, g, gpu_seed(round_seed, g, device.uuid_hash), sizes[g])

        with ThreadPoolExecutor(max_workers=len(self.devices)) as pool:
            self.fills = list(pool.map(one, range(len(self.devices))))
        self.round_seed = round_seed
        return self.fill_roots()

    def fill_roots(self) -> RoundFills:
        """The message carrying every device's fill root (sent the moment they exist)."""
        if self.round_seed is None:
            raise FillError("no fills built")
        return RoundFills(self.round_seed, tuple(
            FillRoot(f.gpu_index, f.params.lanes, f.params.steps, f.params.iterations, f.root)
            for f in self.fills))

    def release(self) -> None:
        """Gives the fills' device memory back (to jobs and the miner): after the probe, or when
        it never comes."""
        self.fills = []
        if any(d.spec.startswith("cuda") for d in self.devices):
            torch.cuda.empty_cache()

    def answer_probes(self, randomness: bytes, q: int = PROBES) -> RoundProbes:
        """Every device's probed blocks with their parents, all devices at once."""
        if self.round_seed is None:
            raise FillError("answer_probes before commit_fills")

        def one(fill: ResidentFill) -> GpuProbes:
            indices = probe_indices(randomness, fill.root, fill.params, q)
            return GpuProbes(fill.gpu_index, fill.answer(indices))

        with ThreadPoolExecutor(max_workers=len(self.fills)) as pool:
            gpus = tuple(pool.map(one, self.fills))
        return RoundProbes(self.round_seed, gpus)

