"""SHA-256d of Bitcoin block headers over a batch of nonces, vectorized with torch (CUDA or CPU).

An 80-byte header is two SHA-256 blocks; the first (version, previous hash, 28 bytes of the
Merkle root) does not depend on the nonce, so its state (the midstate) is computed once per
header and each nonce costs two compressions: the header's second block, then the hash of the
32-byte result. Words are uint32 held in int64 tensors masked to 32 bits (torch has no full
uint32 arithmetic); results are checked against hashlib in the tests.

A share meets `bits` of difficulty when the hash, read as Bitcoin does (a little-endian 256-bit
number), is below 2^(256 - bits): its top 32 bits are the byte-swapped last state word.
"""

from __future__ import annotations

import struct

import torch

MASK = 0xFFFFFFFF
K = [
    0x428A2F98, 0x71374491, 0xB5C0FBCF, 0xE9B5DBA5, 0x3956C25B, 0x59F111F1, 0x923F82A4, 0xAB1C5ED5,
    0xD807AA98, 0x12835B01, 0x243185BE, 0x550C7DC3, 0x72BE5D74, 0x80DEB1FE, 0x9BDC06A7, 0xC19BF174,
    0xE49B69C1, 0xEFBE4786, 0x0FC19DC6, 0x240CA1CC, 0x2DE92C6F, 0x4A7484AA, 0x5CB0A9DC, 0x76F988DA,
    0x983E5152, 0xA831C66D, 0xB00327C8, 0xBF597FC7, 0xC6E00BF3, 0xD5A79147, 0x06CA6351, 0x14292967,
    0x27B70A85, 0x2E1B2138, 0x4D2C6DFC, 0x53380D13, 0x650A7354, 0x766A0ABB, 0x81C2C92E, 0x92722C85,
    0xA2BFE8A1, 0xA81A664B, 0xC24B8B70, 0xC76C51A3, 0xD192E819, 0xD6990624, 0xF40E3585, 0x106AA070,
    0x19A4C116, 0x1E376C08, 0x2748774C, 0x34B0BCB5, 0x391C0CB3, 0x4ED8AA4A, 0x5B9CCA4F, 0x682E6FF3,
    0x748F82EE, 0x78A5636F, 0x84C87814, 0x8CC70208, 0x90BEFFFA, 0xA4506CEB, 0xBEF9A3F7, 0xC67178F2,
]
H0 = [0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19]


def _rotr(x, n: int):
    return ((x >> n) | (x << (32 - n))) & MASK


def compress(state: list, words: list) -> list:
    """One SHA-256 compression; `state` and `words` are lists of ints or int64 tensors (batched)."""
    w = list(words)
    for t in range(16, 64):
        s0 = _rotr(w[t - 15], 7) ^ _rotr(w[t - 15], 18) ^ (w[t - 15] >> 3)
        s1 = _rotr(w[t - 2], 17) ^ _rotr(w[t - 2], 19) ^ (w[t - 2] >> 10)
        w.append((w[t - 16] + s0 + w[t - 7] + s1) & MASK)
    a, b, c, d, e, f, g, h = state
    for t in range(64):
        s1 = _rotr(e, 6) ^ _rotr(e, 11) ^ _rotr(e, 25)
        ch = (e & f) ^ ((e ^ MASK) & g)
        t1 = (h + s1 + ch + K[t] + w[t]) & MASK
        s0 = _rotr(a, 2) ^ _rotr(a, 13) ^ _rotr(a, 22)
        maj = (a & b) ^ (a & c) ^ (b & c)
        h, g, f, e, d, c, b, a = g, f, e, (d + t1) & MASK, c, b, a, (t1 + s0 + maj) & MASK
    return [(x + y) & MASK for x, y in zip(state, [a, b, c, d, e, f, g, h])]


def midstate(header76: bytes) -> list[int]:
    """State after the header's first 64 bytes (scalar: once per header)."""
    if len(header76) != 76:
        raise ValueError(f"a header without its nonce is 76 bytes, not {len(header76)}")
    return compress(list(H0), list(struct.unpack(">16I", header76[:64])))


def _bswap(x):
    return ((x & 0xFF) << 24) | ((x & 0xFF00) << 8) | ((x >> 8) & 0xFF00) | ((x >> 24) & 0xFF)


def hash_nonces(header76: bytes, nonces: torch.Tensor, mid: list[int] | None = None) -> torch.Tensor:
    """SHA-256d state words (batch, 8) of the header with each nonce (uint32 values, int64)."""
    mid = mid if mid is not None else midstate(header76)
    tail = struct.unpack(">3I", header76[64:76])
    ones = torch.ones_like(nonces)
    # The nonce is stored little-endian in the header; SHA-256 reads big-endian words.
    block2 = [ones * tail[0], ones * tail[1], ones * tail[2], _bswap(nonces), ones * 0x80000000] + \
             [ones * 0] * 10 + [ones * 640]
    first = compress([ones * m for m in mid], block2)
    block3 = first + [ones * 0x80000000] + [ones * 0] * 6 + [ones * 256]
    return torch.stack(compress([ones * h for h in H0], block3), dim=1)


def digest_bytes(words: torch.Tensor) -> bytes:
    """The 32-byte digest of one row of state words (for checks against hashlib)."""
    return struct.pack(">8I", *[int(v) for v in words])


def meets(words: torch.Tensor, bits: int) -> torch.Tensor:
    """Which rows meet `bits` (1..32) of difficulty: top 32 bits of the LE hash < 2^(32-bits)."""
    if not 1 <= bits <= 32:
        raise ValueError(f"difficulty bits must be 1..32, not {bits}")
    return _bswap(words[:, 7]) < (1 << (32 - bits))
