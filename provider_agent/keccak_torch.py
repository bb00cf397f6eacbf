"""Batched Ethereum keccak256 in torch tensor ops, so PoG leaves hash where C already is.

DESIGN.md requirement 10: on a GPU the commitment must stay small next to the matmul. At
n=51776 C has ~42M chunks; hashing them on CPU threads (~2 s) would dwarf the matmul (~0.4 s)
and copying C to the host costs ~10 GiB of PCIe traffic. Here every message of a batch is one
column of the Keccak state, so one tensor op advances all messages at once, on any device.

Lane representation: int64 (torch has no uint64). Keccak needs only xor/and/not, which are
sign-agnostic, and rotations, built as (x << r) | ((x >> (64 - r)) & (2^r - 1)): the mask drops
the copies of the sign bit that the arithmetic right shift brings in. Two int32 halves would
double the tensors and need cross-half rotations for no gain: GPUs execute 64-bit bit ops as
32-bit pairs anyway. The state is stored (25, batch), lane-major, rather than (batch, 25), so
each lane is one contiguous row and every op reads memory coalesced.

Speed: eagerly each op is one pass over a lane in memory (~240 per round), so eager keccak is
memory-bound (9.3 M leaves/s on an H200: ~27 s for the leaves of n = 65536, slower than the
host). On GPUs the prover hashes with `chosen_permutation()`: by default keccak_triton's
hand-written kernel, which for leaves and Merkle nodes also fuses the absorb (one kernel per
call, reading each message once); `compiled_permutation()` (torch.compile fusing the 24 rounds)
and eager remain choices. Whatever is chosen is checked bit-exact on the device before use
(`device_ready`). Everything assumes little-endian lane bytes (CUDA GPUs, x86, ARM).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import warnings
from collections.abc import Callable
from functools import lru_cache
from types import ModuleType

import torch

from protocol.errors import InvalidParameter
from protocol.merkle import LEAF_PREFIX, NODE_PREFIX, MerkleTree, MessageHasher, keccak256

logger = logging.getLogger(__name__)

if sys.byteorder != "little":  # lanes are read with .view(torch.int64) in native byte order
    raise ImportError("keccak_torch needs a little-endian host")

RATE = 136  # bytes absorbed per permutation (1600 - 2*256 bits)
_RATE_LANES = RATE // 8
_CHUNK_ELEMENTS = 64  # PoG leaf: 64 int32 elements (protocol.pog.commitment)
# Messages per batch: bounds the byte copies and the state and its temporaries (~1.5 KiB per
# message: ~1.5 GiB for a CUDA batch).
_BATCH = {"cuda": 1 << 20, "cpu": 1 << 14}

Permutation = Callable[[torch.Tensor], torch.Tensor]


def _to_int64(value: int) -> int:
    """A 64-bit pattern as the signed int64 torch stores it."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _round_constants() -> list[int]:
    """Iota's 24 round constants from their LFSR definition (FIPS 202, 3.2.5)."""
    state, constants = 1, []
    for _ in range(24):
        rc = 0
        for j in range(7):
            if state & 1:
                rc |= 1 << ((1 << j) - 1)
            state = (state << 1) ^ (0x71 if state & 0x80 else 0)
        constants.append(_to_int64(rc))
    return constants


def _rho_pi() -> tuple[list[int], list[int]]:
    """Rotation of each lane x + 5y (FIPS 202, 3.2.2) and, for each target lane of pi, the
    source lane it takes: B[y, 2x + 3y] = rot(A[x, y])."""
    offsets = [0] * 25
    x, y = 1, 0
    for t in range(24):
        offsets[x + 5 * y] = (t + 1) * (t + 2) // 2 % 64
        x, y = y, (2 * x + 3 * y) % 5
    source = [0] * 25
    for x in range(5):
        for y in range(5):
            source[y + 5 * ((2 * x + 3 * y) % 5)] = x + 5 * y
    return offsets, source


_RC = _round_constants()
_RHO, _PI_SOURCE = _rho_pi()


def _rotl(x: torch.Tensor, r: int) -> torch.Tensor:
    """64-bit rotate left of int64 lanes; the mask drops the sign bits `>>` shifts in."""
    return (x << r) | ((x >> (64 - r)) & ((1 << r) - 1)) if r else x


def permute(state: torch.Tensor) -> torch.Tensor:
    """Keccak-f[1600] on a (25, batch) int64 state, lane x + 5y in row x + 5y.

    Written over the 25 rows as separate (batch,) tensors, so that every op is elementwise
    across messages: torch.compile can then fuse all 24 rounds into one kernel that keeps a
    message's state in registers (ops that mix rows of one tensor, such as roll, could not be).
    """
    a = list(state.unbind(0))
    for rc in _RC:
        c = [a[x] ^ a[x + 5] ^ a[x + 10] ^ a[x + 15] ^ a[x + 20] for x in range(5)]
        d = [c[(x + 4) % 5] ^ _rotl(c[(x + 1) % 5], 1) for x in range(5)]
        # theta's xor, rho's rotation and pi's move, lane by lane
        b = [_rotl(a[s] ^ d[s % 5], _RHO[s]) for s in _PI_SOURCE]
        a = [b[i] ^ (~b[i - i % 5 + (i + 1) % 5] & b[i - i % 5 + (i + 2) % 5])
             for i in range(25)]  # chi along each row y
        a[0] = a[0] ^ rc  # iota
    return torch.stack(a)


@lru_cache(maxsize=1)
def compiled_permutation() -> Permutation:
    """`permute` fused by torch.compile (dynamic batch: one graph for every batch size).

    Inductor caps a fused kernel at 64 nodes by default, which cuts the permutation into ~12
    kernels that pass ~300 intermediate lanes through memory; with the cap lifted it is one
    kernel reading 25 lanes and writing 25 (checked with the CPU backend's generated code; the
    Triton kernel is unchecked). The first compile took ~1 min on CPU (Triton: unmeasured);
    Inductor caches it on disk, so later processes load it in seconds.
    """
    return torch.compile(permute, dynamic=True, fullgraph=True,
                         options={"max_fusion_size": 4096})


@lru_cache(maxsize=1)
def _triton() -> ModuleType | None:
    """provider_agent.keccak_triton where triton imports (CUDA builds of torch on Linux bring
    it), else None. Imported on first use, not with this module: TRITON_INTERPRET is read when
    the kernels are defined."""
    try:
        return importlib.import_module("provider_agent.keccak_triton")
    except ImportError as err:
        logger.info("triton does not import (%s): no Triton keccak", err)
        return None


def chosen_permutation() -> Permutation:
    """What the prover hashes with on a GPU, the one place that decides: UNCHAINED_TORCH_KECCAK
    = triton (default: the hand-written kernel, keccak_triton, which also fuses the absorb of
    leaves and nodes), compiled (torch.compile's kernel, whose first build outran 150 s on an
    H200: docs/gpu/2026-12-04-h200-run2.jsonl) or eager. Raises where the choice cannot run
    here (no triton); `device_ready` turns that into host hashing."""
    choice = os.environ.get("UNCHAINED_TORCH_KECCAK", "triton")
    if choice == "eager":
        return permute
    if choice == "compiled":
        return compiled_permutation()
    if choice != "triton":
        raise InvalidParameter("UNCHAINED_TORCH_KECCAK", choice, "must be triton, compiled or eager")
    module = _triton()
    if module is None:
        raise ImportError("UNCHAINED_TORCH_KECCAK=triton but triton does not import")
    return module.permute


def _fused(permutation: Permutation) -> ModuleType | None:
    """keccak_triton when `permutation` is its kernel: then whole messages hash in one kernel
    (absorb included) wherever keccak_triton.fused allows."""
    module = sys.modules.get("provider_agent.keccak_triton")
    return module if module is not None and permutation is module.permute else None


def _as_lanes(rows: torch.Tensor) -> torch.Tensor:
    """A 2-D tensor's rows (8k bytes each) as (batch, k) int64 lanes, copied only where its
    memory is not contiguous or not 8-byte aligned (torch's view refuses both)."""
    if not rows.numel():  # strides of empty tensors are arbitrary: view may refuse them
        return rows.new_empty((rows.shape[0], rows.shape[1] * rows.element_size() // 8),
                              dtype=torch.int64)
    if not rows.is_contiguous() or rows.storage_offset() * rows.element_size() % 8:
        rows = rows.clone(memory_format=torch.contiguous_format)
    return rows.view(torch.int64)


def _pad(messages: torch.Tensor, prefix: bytes) -> torch.Tensor:
    """prefix || message || keccak padding (0x01 ... 0x80, not SHA3's 0x06) as (batch, k*RATE)
    uint8, k the number of blocks."""
    count, size = messages.shape
    length = len(prefix) + size
    padded = (length // RATE + 1) * RATE
    out = torch.zeros((count, padded), dtype=torch.uint8, device=messages.device)
    if prefix:
        out[:, : len(prefix)] = torch.tensor(list(prefix), dtype=torch.uint8,
                                             device=messages.device)
    out[:, len(prefix) : length] = messages
    out[:, length] = 0x01
    out[:, padded - 1] |= 0x80
    return out


def _hash_batch(messages: torch.Tensor, prefix: bytes, permutation: Permutation) -> torch.Tensor:
    """keccak256(prefix || message) of each row of one batch, as (batch, 32) uint8."""
    count = messages.shape[0]
    words = _pad(messages, prefix).view(torch.int64).T  # (blocks * 17, batch), lane-major
    state = torch.zeros((25, count), dtype=torch.int64, device=messages.device)
    for block in range(0, words.shape[0], _RATE_LANES):
        state[:_RATE_LANES] ^= words[block : block + _RATE_LANES]
        state = permutation(state)
    return state[:4].T.contiguous().view(torch.uint8)


def _in_batches(count: int, device: torch.device,
                hash_rows: Callable[[slice], torch.Tensor]) -> torch.Tensor:
    """Digests of `count` messages, hashed a bounded batch of rows at a time: (count, 32)."""
    size = _BATCH.get(device.type, _BATCH["cuda"])
    parts = [hash_rows(slice(i, i + size)) for i in range(0, count, size)]
    if not parts:
        return torch.empty((0, 32), dtype=torch.uint8, device=device)
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def hash_prefixed(messages: torch.Tensor, prefix: bytes = b"",
                  permutation: Permutation = permute) -> torch.Tensor:
    """keccak256(prefix || row) for each row of a (batch, length) uint8 tensor, in bounded
    batches on the tensor's device; (batch, 32) uint8 on that device."""
    if messages.dtype != torch.uint8 or messages.dim() != 2:
        raise InvalidParameter("messages", f"{messages.dtype} {tuple(messages.shape)}",
                               "must be a 2-D uint8 tensor")
    fused = _fused(permutation)
    if fused is not None and fused.fused(messages.shape[1], prefix):
        return fused.absorb(_as_lanes(messages), prefix)  # no temporaries: no batches
    return _in_batches(messages.shape[0], messages.device,
                       lambda rows: _hash_batch(messages[rows], prefix, permutation))


def keccak256_batch(messages: torch.Tensor, permutation: Permutation = permute) -> torch.Tensor:
    """Ethereum keccak256 of each row of a (batch, length) uint8 tensor: (batch, 32) uint8."""
    return hash_prefixed(messages, b"", permutation)


def leaf_hashes(values: torch.Tensor, permutation: Permutation = permute) -> torch.Tensor:
    """PoG leaf hashes keccak256(0x00 || 64 big-endian int32) of consecutive 64-element chunks
    of int32 `values` (row-major, e.g. a panel of C), computed where `values` is: (chunks, 32).

    Equals protocol.pog.commitment.chunk_hashes without bringing C to the host.
    """
    if values.dtype != torch.int32 or values.numel() % _CHUNK_ELEMENTS:
        raise InvalidParameter("values", f"{values.dtype} x {values.numel()}",
                               "must be int32 with a multiple of 64 elements")
    chunks = values.reshape(-1, _CHUNK_ELEMENTS)
    fused = _fused(permutation)
    if fused is not None:  # the kernel reads C's int32 and swaps their bytes in registers
        return fused.absorb(_as_lanes(chunks), LEAF_PREFIX, bswap32=True)

    def batch(rows: slice) -> torch.Tensor:
        # native little-endian bytes, reversed within each element: big-endian int32
        data = chunks[rows].contiguous().view(torch.uint8)
        data = data.view(-1, _CHUNK_ELEMENTS, 4).flip(-1).reshape(-1, 4 * _CHUNK_ELEMENTS)
        return _hash_batch(data, LEAF_PREFIX, permutation)

    return _in_batches(chunks.shape[0], values.device, batch)


def tree_levels(leaves: torch.Tensor, permutation: Permutation = permute) -> list[torch.Tensor]:
    """Every Merkle level, leaves first, root last, on the leaves' device, in the layout of
    protocol.merkle.MerkleTree (RFC 9162 / pymerkle): neighbours pair up as
    keccak256(0x01 || left || right), a lone last node is carried up unchanged."""
    if leaves.dtype != torch.uint8 or leaves.dim() != 2 or leaves.shape[1] != 32 \
            or leaves.shape[0] == 0:
        raise InvalidParameter("leaf hashes", tuple(leaves.shape), "must be (m >= 1, 32) uint8")
    levels = [leaves]
    while levels[-1].shape[0] > 1:
        level = levels[-1]
        pairs = level.shape[0] // 2
        parents = hash_prefixed(level[: 2 * pairs].reshape(pairs, 64), NODE_PREFIX, permutation)
        if level.shape[0] % 2:
            parents = torch.cat((parents, level[-1:]))
        levels.append(parents)
    return levels


def torch_hasher(device: str | torch.device, permutation: Permutation = permute
                 ) -> MessageHasher:
    """A protocol.merkle.MessageHasher that hashes on `device` (buffer in, bytes out), so
    MerkleTree can build its upper levels there."""
    target = torch.device(device)

    def hasher(buffer: bytes | bytearray | memoryview, size: int, prefix: bytes) -> bytes:
        view = memoryview(buffer).cast("B")
        if size <= 0 or len(view) % size:
            raise InvalidParameter("message size", size, f"does not divide {len(view)} bytes")
        if not len(view):
            return b""
        with warnings.catch_warnings():  # read-only buffers are only read, then copied
            warnings.simplefilter("ignore", UserWarning)
            host = torch.frombuffer(view, dtype=torch.uint8)
        messages = host.to(target).view(-1, size)
        return hash_prefixed(messages, prefix, permutation).cpu().numpy().tobytes()

    return hasher


@lru_cache(maxsize=8)
def device_ready(device: str) -> bool:
    """Whether the chosen keccak builds and is bit-exact on `device`, on what the prover hashes:
    four PoG leaves and their Merkle levels (pairs of 2 and 1). Checked once per device, outside
    any timing, so it also builds what later calls reuse: the Triton kernels for leaves and
    nodes, or torch.compile's dynamic-size graph and the size-1 one dynamo specialises (the
    root's single pair). False means: hash on the host instead."""
    try:
        permutation = chosen_permutation()
        values = torch.arange(4 * _CHUNK_ELEMENTS, dtype=torch.int64)
        values = (values * 0x9E3779B1 - (1 << 31)).remainder(1 << 32).sub(1 << 31).to(torch.int32)
        levels = tree_levels(leaf_hashes(values.to(device), permutation), permutation)
        host = values.numpy().astype(">i4").reshape(4, -1)
        expected = b"".join(keccak256(LEAF_PREFIX + row.tobytes()) for row in host)
        if bytes(levels[0].cpu().numpy()) != expected \
                or bytes(levels[-1].cpu().numpy()) != MerkleTree(expected).root:
            logger.warning("torch keccak on %s is not bit-exact: hashing on the host", device)
            return False
    except Exception as err:  # noqa: BLE001  any compile/runtime failure means: not usable
        logger.warning("torch keccak unavailable on %s (%s): hashing on the host", device, err)
        return False
    return True
