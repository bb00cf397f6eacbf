"""Ethereum keccak256 as one hand-written Triton kernel: absorb, 24 rounds and squeeze fused,
each message's 25 lanes in registers. Imported only where triton imports (keccak_torch decides).

Why: the eager torch keccak makes ~240 passes over memory per round (9.3 M leaves/s on an H200,
~27 s for the 67 M leaves of n = 65536 against 0.58 s of matmul) and torch.compile's fused build
of the same graph did not finish in 150 s there. This kernel is a few hundred lines of straight
code with no autotuning: Triton compiles it in seconds, once per (message shape, device).

Two kernels share the round function:
- `_absorb_kernel` hashes prefix || message for messages of a whole number of 8-byte lanes with
  a prefix of at most one byte: PoG leaves (0x00 || 64 big-endian int32, read straight from C
  with the byte swap done in registers) and Merkle nodes (0x01 || left || right). It reads each
  message once and writes its 32-byte digest: no padded copies, no transposes.
- `_permute_kernel` is keccak-f[1600] alone on a (25, batch) int64 state, the `Permutation` that
  keccak_torch's generic path (any message length, any prefix) calls between its absorbs.

Lanes are uint64, so `>>` is a logical shift and a rotation is two shifts and an or. One program
hashes BLOCK messages, one per thread; each thread reads its own message lane by lane (strided
across threads, served by L1). The 24 rounds are a runtime loop: unrolled by static_range, the
leaf kernel's 48 rounds took 417 s to build on this project's (shared, 2-core) CPU; as a loop it
takes 7 s there (node kernel 0.6 s, keccak-f alone 3 s), compiled for sm_90 with no GPU present.

Expected rate on an H100/H200 (to be replaced by the GPU check's figure, devtools/bench_gpu.py
`keccak`). Arithmetic of a round: theta (C: 20 xors; D: 5 rotations by 1, 5 xors; 25 xors into
the state), rho (24 rotations), chi (25 x (not, and, xor)), iota (1 xor): 213 64-bit ops with a
rotation as 3, 5,112 per permutation. GPUs have no 64-bit integer ALU, so that is ~10,200 32-bit
ops, but ptxas folds xor/and-not chains into 3-input LOP3s and rotations into funnel shifts: the
sm_90 SASS of the leaf kernel's round loop is 208 instructions (LOP3 and SHF almost all), so
~5,000 per permutation, and a leaf (257 bytes: 2 permutations plus 34 loads and byte swaps) is
~10,400. Hopper's integer pipe retires 64 32-bit ops per clock per SM (CUDA guide, compute 9.0):
132 SMs x 64 x 1.98 GHz / 10,400 = 1.6 G leaves/s at full issue, ~3.2 G nodes/s. The kernels use
86 (leaf) and 74 (node) registers, no spills: ~20 warps per SM, enough to hide latency if not to
issue every cycle. Expect 0.5 to 1.2 G leaves/s: the 67 M leaves of n = 65536 in 0.06 to 0.13 s
and their Merkle levels in less, against ~27 s eagerly. Memory is no limit (256 bytes per leaf
at 4.8 TB/s would allow 19 G leaves/s).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from functools import lru_cache

import torch
import triton
import triton.language as tl

from protocol.errors import InvalidParameter

# Messages per program, one per thread (128 threads: 4 warps). More per thread would multiply
# the live registers (50 32-bit registers of state per message) and spill.
BLOCK = 128
_WARPS = 4


@lru_cache(maxsize=8)
def _round_constants(device: torch.device) -> torch.Tensor:
    """Iota's 24 constants as int64 on `device`; the kernel loads one per round (cached)."""
    from provider_agent.keccak_torch import _RC  # one definition, from FIPS 202's LFSR

    return torch.tensor(_RC, dtype=torch.int64, device=device)


@triton.jit
def _rotl(x, r: tl.constexpr):
    return (x << r) | (x >> (64 - r))


@triton.jit
def _chi(b0, b1, b2, b3, b4):
    """Chi on one row of five lanes: a[x] = b[x] ^ (~b[x+1] & b[x+2])."""
    return (b0 ^ (~b1 & b2), b1 ^ (~b2 & b3), b2 ^ (~b3 & b4), b3 ^ (~b4 & b0),
            b4 ^ (~b0 & b1))


@triton.jit
def _keccak_f(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17,
              a18, a19, a20, a21, a22, a23, a24, rc):
    """Keccak-f[1600] on 25 uint64 lanes, lane x + 5y in a{x + 5y} (FIPS 202, 3.2)."""
    for r in range(24):  # a runtime loop: unrolled, 48 rounds took minutes to compile
        c0 = a0 ^ a5 ^ a10 ^ a15 ^ a20
        c1 = a1 ^ a6 ^ a11 ^ a16 ^ a21
        c2 = a2 ^ a7 ^ a12 ^ a17 ^ a22
        c3 = a3 ^ a8 ^ a13 ^ a18 ^ a23
        c4 = a4 ^ a9 ^ a14 ^ a19 ^ a24
        d0 = c4 ^ _rotl(c1, 1)
        d1 = c0 ^ _rotl(c2, 1)
        d2 = c1 ^ _rotl(c3, 1)
        d3 = c2 ^ _rotl(c4, 1)
        d4 = c3 ^ _rotl(c0, 1)
        # theta's xor, then rho and pi: B[y, 2x + 3y] = rot(A[x, y], r[x, y]), by target lane
        b0 = a0 ^ d0
        b1 = _rotl(a6 ^ d1, 44)
        b2 = _rotl(a12 ^ d2, 43)
        b3 = _rotl(a18 ^ d3, 21)
        b4 = _rotl(a24 ^ d4, 14)
        b5 = _rotl(a3 ^ d3, 28)
        b6 = _rotl(a9 ^ d4, 20)
        b7 = _rotl(a10 ^ d0, 3)
        b8 = _rotl(a16 ^ d1, 45)
        b9 = _rotl(a22 ^ d2, 61)
        b10 = _rotl(a1 ^ d1, 1)
        b11 = _rotl(a7 ^ d2, 6)
        b12 = _rotl(a13 ^ d3, 25)
        b13 = _rotl(a19 ^ d4, 8)
        b14 = _rotl(a20 ^ d0, 18)
        b15 = _rotl(a4 ^ d4, 27)
        b16 = _rotl(a5 ^ d0, 36)
        b17 = _rotl(a11 ^ d1, 10)
        b18 = _rotl(a17 ^ d2, 15)
        b19 = _rotl(a23 ^ d3, 56)
        b20 = _rotl(a2 ^ d2, 62)
        b21 = _rotl(a8 ^ d3, 55)
        b22 = _rotl(a14 ^ d4, 39)
        b23 = _rotl(a15 ^ d0, 41)
        b24 = _rotl(a21 ^ d1, 2)
        a0, a1, a2, a3, a4 = _chi(b0, b1, b2, b3, b4)
        a5, a6, a7, a8, a9 = _chi(b5, b6, b7, b8, b9)
        a10, a11, a12, a13, a14 = _chi(b10, b11, b12, b13, b14)
        a15, a16, a17, a18, a19 = _chi(b15, b16, b17, b18, b19)
        a20, a21, a22, a23, a24 = _chi(b20, b21, b22, b23, b24)
        a0 = a0 ^ tl.load(rc + r).to(tl.uint64, bitcast=True)  # iota
    return (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18,
            a19, a20, a21, a22, a23, a24)


@triton.jit
def _data_lane(src, msg, live, j: tl.constexpr, LANES: tl.constexpr, BSWAP: tl.constexpr):
    """Message bytes [8j, 8j + 8) as a little-endian uint64 (0 outside the message); with BSWAP
    the source holds int32 whose big-endian bytes are the message, so each half is swapped."""
    if j < 0:
        x = tl.zeros(msg.shape, dtype=tl.uint64)
    elif j >= LANES:
        x = tl.zeros(msg.shape, dtype=tl.uint64)
    else:
        x = tl.load(src + msg * LANES + j, mask=live, other=0).to(tl.uint64, bitcast=True)
        if BSWAP:
            x = ((x & 0x00FF00FF00FF00FF) << 8) | ((x >> 8) & 0x00FF00FF00FF00FF)
            x = ((x & 0x0000FFFF0000FFFF) << 16) | ((x >> 16) & 0x0000FFFF0000FFFF)
    return x


@triton.jit
def _lane(src, msg, live, g: tl.constexpr, LANES: tl.constexpr, BSWAP: tl.constexpr,
          PREFIX: tl.constexpr, NBLOCKS: tl.constexpr):
    """Lane g of prefix || message || padding (keccak's 0x01 ... 0x80), PREFIX one byte (0-255)
    or -1 for none."""
    if PREFIX < 0:
        x = _data_lane(src, msg, live, g, LANES, BSWAP)
        pad = 8 * LANES
    else:  # the message is shifted one byte up: its last byte of lane g - 1 starts lane g
        x = (_data_lane(src, msg, live, g, LANES, BSWAP) << 8) | (
            _data_lane(src, msg, live, g - 1, LANES, BSWAP) >> 56)
        if g == 0:
            x = x | PREFIX
        pad = 8 * LANES + 1
    if g == pad // 8:
        x = x | (1 << (8 * (pad % 8)))
    if g == 17 * NBLOCKS - 1:
        x = x | 0x8000000000000000
    return x


# One build per message shape: Triton would otherwise build again for a count of 1 (the Merkle
# root's pair) or a multiple of 16 (most panels), and for pointers not 16-byte aligned, which the
# scalar loads and stores here would not gain from; the check before a round builds the only one.
@triton.jit(do_not_specialize=["count"], do_not_specialize_on_alignment=["src", "out", "rc"])
def _absorb_kernel(src, out, count, rc, LANES: tl.constexpr, BSWAP: tl.constexpr,
                   PREFIX: tl.constexpr, NBLOCKS: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    """keccak256(prefix || message) of `count` messages of LANES int64 each at `src`, digests
    as 4 int64 each at `out`."""
    msg = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    live = msg < count
    z = tl.zeros([BLOCK_SIZE], dtype=tl.uint64)
    a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12 = z, z, z, z, z, z, z, z, z, z, z, z, z
    a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24 = z, z, z, z, z, z, z, z, z, z, z, z
    for k in tl.static_range(NBLOCKS):  # 17 lanes (136 bytes) absorbed per permutation
        a0 ^= _lane(src, msg, live, 17 * k + 0, LANES, BSWAP, PREFIX, NBLOCKS)
        a1 ^= _lane(src, msg, live, 17 * k + 1, LANES, BSWAP, PREFIX, NBLOCKS)
        a2 ^= _lane(src, msg, live, 17 * k + 2, LANES, BSWAP, PREFIX, NBLOCKS)
        a3 ^= _lane(src, msg, live, 17 * k + 3, LANES, BSWAP, PREFIX, NBLOCKS)
        a4 ^= _lane(src, msg, live, 17 * k + 4, LANES, BSWAP, PREFIX, NBLOCKS)
        a5 ^= _lane(src, msg, live, 17 * k + 5, LANES, BSWAP, PREFIX, NBLOCKS)
        a6 ^= _lane(src, msg, live, 17 * k + 6, LANES, BSWAP, PREFIX, NBLOCKS)
        a7 ^= _lane(src, msg, live, 17 * k + 7, LANES, BSWAP, PREFIX, NBLOCKS)
        a8 ^= _lane(src, msg, live, 17 * k + 8, LANES, BSWAP, PREFIX, NBLOCKS)
        a9 ^= _lane(src, msg, live, 17 * k + 9, LANES, BSWAP, PREFIX, NBLOCKS)
        a10 ^= _lane(src, msg, live, 17 * k + 10, LANES, BSWAP, PREFIX, NBLOCKS)
        a11 ^= _lane(src, msg, live, 17 * k + 11, LANES, BSWAP, PREFIX, NBLOCKS)
        a12 ^= _lane(src, msg, live, 17 * k + 12, LANES, BSWAP, PREFIX, NBLOCKS)
        a13 ^= _lane(src, msg, live, 17 * k + 13, LANES, BSWAP, PREFIX, NBLOCKS)
        a14 ^= _lane(src, msg, live, 17 * k + 14, LANES, BSWAP, PREFIX, NBLOCKS)
        a15 ^= _lane(src, msg, live, 17 * k + 15, LANES, BSWAP, PREFIX, NBLOCKS)
        a16 ^= _lane(src, msg, live, 17 * k + 16, LANES, BSWAP, PREFIX, NBLOCKS)
        (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18,
         a19, a20, a21, a22, a23, a24) = _keccak_f(
            a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17,
            a18, a19, a20, a21, a22, a23, a24, rc)
    digest = out + msg * 4
    tl.store(digest, a0.to(tl.int64, bitcast=True), mask=live)
    tl.store(digest + 1, a1.to(tl.int64, bitcast=True), mask=live)
    tl.store(digest + 2, a2.to(tl.int64, bitcast=True), mask=live)
    tl.store(digest + 3, a3.to(tl.int64, bitcast=True), mask=live)


@triton.jit(do_not_specialize=["count"], do_not_specialize_on_alignment=["state", "rc"])
def _permute_kernel(state, count, rc, BLOCK_SIZE: tl.constexpr):
    """Keccak-f[1600] in place on a (25, count) int64 state, lane-major (keccak_torch's layout)."""
    col = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    live = col < count
    a0 = tl.load(state + col, mask=live).to(tl.uint64, bitcast=True)
    a1 = tl.load(state + count + col, mask=live).to(tl.uint64, bitcast=True)
    a2 = tl.load(state + 2 * count + col, mask=live).to(tl.uint64, bitcast=True)
    a3 = tl.load(state + 3 * count + col, mask=live).to(tl.uint64, bitcast=True)
    a4 = tl.load(state + 4 * count + col, mask=live).to(tl.uint64, bitcast=True)
    a5 = tl.load(state + 5 * count + col, mask=live).to(tl.uint64, bitcast=True)
    a6 = tl.load(state + 6 * count + col, mask=live).to(tl.uint64, bitcast=True)
    a7 = tl.load(state + 7 * count + col, mask=live).to(tl.uint64, bitcast=True)
    a8 = tl.load(state + 8 * count + col, mask=live).to(tl.uint64, bitcast=True)
    a9 = tl.load(state + 9 * count + col, mask=live).to(tl.uint64, bitcast=True)
    a10 = tl.load(state + 10 * count + col, mask=live).to(tl.uint64, bitcast=True)
    a11 = tl.load(state + 11 * count + col, mask=live).to(tl.uint64, bitcast=True)
    a12 = tl.load(state + 12 * count + col, mask=live).to(tl.uint64, bitcast=True)
    a13 = tl.load(state + 13 * count + col, mask=live).to(tl.uint64, bitcast=True)
    a14 = tl.load(state + 14 * count + col, mask=live).to(tl.uint64, bitcast=True)
    a15 = tl.load(state + 15 * count + col, mask=live).to(tl.uint64, bitcast=True)
    a16 = tl.load(state + 16 * count + col, mask=live).to(tl.uint64, bitcast=True)
    a17 = tl.load(state + 17 * count + col, mask=live).to(tl.uint64, bitcast=True)
    a18 = tl.load(state + 18 * count + col, mask=live).to(tl.uint64, bitcast=True)
    a19 = tl.load(state + 19 * count + col, mask=live).to(tl.uint64, bitcast=True)
    a20 = tl.load(state + 20 * count + col, mask=live).to(tl.uint64, bitcast=True)
    a21 = tl.load(state + 21 * count + col, mask=live).to(tl.uint64, bitcast=True)
    a22 = tl.load(state + 22 * count + col, mask=live).to(tl.uint64, bitcast=True)
    a23 = tl.load(state + 23 * count + col, mask=live).to(tl.uint64, bitcast=True)
    a24 = tl.load(state + 24 * count + col, mask=live).to(tl.uint64, bitcast=True)
    (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19,
     a20, a21, a22, a23, a24) = _keccak_f(
        a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18,
        a19, a20, a21, a22, a23, a24, rc)
    tl.store(state + col, a0.to(tl.int64, bitcast=True), mask=live)
    tl.store(state + count + col, a1.to(tl.int64, bitcast=True), mask=live)
    tl.store(state + 2 * count + col, a2.to(tl.int64, bitcast=True), mask=live)
    tl.store(state + 3 * count + col, a3.to(tl.int64, bitcast=True), mask=live)
    tl.store(state + 4 * count + col, a4.to(tl.int64, bitcast=True), mask=live)
    tl.store(state + 5 * count + col, a5.to(tl.int64, bitcast=True), mask=live)
    tl.store(state + 6 * count + col, a6.to(tl.int64, bitcast=True), mask=live)
    tl.store(state + 7 * count + col, a7.to(tl.int64, bitcast=True), mask=live)
    tl.store(state + 8 * count + col, a8.to(tl.int64, bitcast=True), mask=live)
    tl.store(state + 9 * count + col, a9.to(tl.int64, bitcast=True), mask=live)
    tl.store(state + 10 * count + col, a10.to(tl.int64, bitcast=True), mask=live)
    tl.store(state + 11 * count + col, a11.to(tl.int64, bitcast=True), mask=live)
    tl.store(state + 12 * count + col, a12.to(tl.int64, bitcast=True), mask=live)
    tl.store(state + 13 * count + col, a13.to(tl.int64, bitcast=True), mask=live)
    tl.store(state + 14 * count + col, a14.to(tl.int64, bitcast=True), mask=live)
    tl.store(state + 15 * count + col, a15.to(tl.int64, bitcast=True), mask=live)
    tl.store(state + 16 * count + col, a16.to(tl.int64, bitcast=True), mask=live)
    tl.store(state + 17 * count + col, a17.to(tl.int64, bitcast=True), mask=live)
    tl.store(state + 18 * count + col, a18.to(tl.int64, bitcast=True), mask=live)
    tl.store(state + 19 * count + col, a19.to(tl.int64, bitcast=True), mask=live)
    tl.store(state + 20 * count + col, a20.to(tl.int64, bitcast=True), mask=live)
    tl.store(state + 21 * count + col, a21.to(tl.int64, bitcast=True), mask=live)
    tl.store(state + 22 * count + col, a22.to(tl.int64, bitcast=True), mask=live)
    tl.store(state + 23 * count + col, a23.to(tl.int64, bitcast=True), mask=live)
    tl.store(state + 24 * count + col, a24.to(tl.int64, bitcast=True), mask=live)


def _on(device: torch.device) -> AbstractContextManager[object]:
    """Triton launches on the current CUDA device, not the tensors': with one prover thread per
    GPU, each launch must make its tensors' device current (nothing to do under the interpreter)."""
    return torch.cuda.device(device) if device.type == "cuda" else nullcontext()


def permute(state: torch.Tensor) -> torch.Tensor:
    """keccak_torch.Permutation: keccak-f[1600] of a (25, batch) int64 state, as a new tensor."""
    out = state.contiguous().clone()
    count = out.shape[1]
    if count:
        with _on(out.device):
            _permute_kernel[(triton.cdiv(count, BLOCK),)](
                out, count, _round_constants(out.device), BLOCK_SIZE=BLOCK, num_warps=_WARPS)
    return out


def fused(length: int, prefix: bytes) -> bool:
    """Whether `absorb` hashes prefix || message of this length: whole lanes, <= 1 prefix byte."""
    return length % 8 == 0 and len(prefix) <= 1


def absorb(words: torch.Tensor, prefix: bytes, bswap32: bool = False) -> torch.Tensor:
    """keccak256(prefix || message) of each row of a contiguous (batch, lanes) int64 tensor, the
    message being the row's bytes (with bswap32: the big-endian bytes of its int32 halves, as
    PoG leaves encode C); (batch, 32) uint8 on the same device."""
    if words.dtype != torch.int64 or words.dim() != 2 or len(prefix) > 1:
        raise InvalidParameter("messages", f"{words.dtype} {tuple(words.shape)} prefix {len(prefix)}",
                               "must be a 2-D int64 tensor with a prefix of at most one byte")
    count, lanes = words.shape
    out = torch.empty((count, 4), dtype=torch.int64, device=words.device)
    if count:
        blocks = (8 * lanes + len(prefix)) // 136 + 1
        with _on(words.device):
            _absorb_kernel[(triton.cdiv(count, BLOCK),)](
                words.contiguous(), out, count, _round_constants(words.device), LANES=lanes,
                BSWAP=bswap32, PREFIX=prefix[0] if prefix else -1, NBLOCKS=blocks,
                BLOCK_SIZE=BLOCK, num_warps=_WARPS)
    return out.view(torch.uint8)
