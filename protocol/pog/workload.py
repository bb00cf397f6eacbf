"""PoG workload v1: seeds, the keyed word hash, and rows of A and Bt (PROTOCOL.md §PoG workload).

Entries come from a keyed counter-based hash with full avalanche (no additive or low-rank
structure, so C cannot be built without the multiply) and are 4-bit values in [-8, 8), so C is
exact in int32 and in fp32 accumulation on any device. Everything here is vectorized numpy
uint32, which wraps like the contract's arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NewType

import numpy as np

from protocol.errors import InvalidParameter
from protocol.merkle import keccak256

Seed = NewType("Seed", bytes)

MATRIX_A = 0
MATRIX_B = 1
MIN_N = 64
MAX_N = 65536
NIBBLES_PER_WORD = 8
_MUL1 = np.uint32(0x7FEB352D)
_MUL2 = np.uint32(0x846CA68B)


def _nibble_pair_table() -> np.ndarray:
    """byte -> its two entries (low nibble first, each minus 8) packed as two int8 in a uint16.

    A word's little-endian bytes hold its nibbles in order (byte 0 = nibbles 0 and 1, ...), so
    one table lookup per byte unpacks two entries: ten times faster than shifting per nibble.
    """
    byte = np.arange(256, dtype=np.int16)
    low = ((byte & 15) - 8).astype(np.uint16) & 0xFF
    high = ((byte >> 4) - 8).astype(np.uint16) & 0xFF
    return (low | (high << 8)).astype("<u2")


_PAIRS = _nibble_pair_table()


def check_n(n: int) -> int:
    """Return n if PROTOCOL.md allows it (a multiple of 64 in [64, 65536]), else raise."""
    if not isinstance(n, int) or isinstance(n, bool) or n % 64 or not MIN_N <= n <= MAX_N:
        raise InvalidParameter("n", n, f"must be a multiple of 64 in [{MIN_N}, {MAX_N}]")
    return n


def _bytes32(name: str, value: bytes) -> bytes:
    if not isinstance(value, (bytes, bytearray)) or len(value) != 32:
        raise InvalidParameter(name, value, "must be 32 bytes")
    return bytes(value)


def gpu_seed(round_seed: bytes, gpu_index: int, uuid_hash: bytes) -> Seed:
    """keccak256(abi.encode(bytes32 roundSeed, uint256 g, bytes32 u)): one seed per device."""
    if not 0 <= gpu_index < 2**256:
        raise InvalidParameter("gpu_index", gpu_index, "must fit uint256")
    return Seed(
        keccak256(
            _bytes32("round_seed", round_seed)
            + gpu_index.to_bytes(32, "big")
            + _bytes32("uuid_hash", uuid_hash)
        )
    )


@dataclass(frozen=True)
class MatrixKeys:
    """The (k1, k2) word-hash keys of one matrix, derived from a GPU seed."""

    k1: int
    k2: int

    @classmethod
    def derive(cls, seed: bytes, matrix: int) -> MatrixKeys:
        """K_m = keccak256(seed || uint8 m); k1, k2 = its first two big-endian uint32s."""
        if matrix not in (MATRIX_A, MATRIX_B):
            raise InvalidParameter("matrix", matrix, "must be 0 (A) or 1 (B)")
        digest = keccak256(_bytes32("seed", seed) + bytes([matrix]))
        return cls(int.from_bytes(digest[0:4], "big"), int.from_bytes(digest[4:8], "big"))


@dataclass(frozen=True)
class WorkloadKeys:
    """Keys of both matrices for one GPU in one round."""

    a: MatrixKeys
    b: MatrixKeys

    @classmethod
    def derive(cls, seed: bytes) -> WorkloadKeys:
        return cls(MatrixKeys.derive(seed, MATRIX_A), MatrixKeys.derive(seed, MATRIX_B))


def _mix_inplace(x: np.ndarray) -> None:
    """The 32-bit finalizer (x ^= x>>16; x *= M1; x ^= x>>15; x *= M2; x ^= x>>16) in place."""
    x ^= x >> 16
    x *= _MUL1
    x ^= x >> 15
    x *= _MUL2
    x ^= x >> 16


def words(keys: MatrixKeys, counters: np.ndarray) -> np.ndarray:
    """word(w) = mix(mix(w ^ k1) ^ k2) for an array of counters, as a new uint32 array."""
    x = np.asarray(counters, dtype=np.uint32) ^ np.uint32(keys.k1)
    _mix_inplace(x)
    x ^= np.uint32(keys.k2)
    _mix_inplace(x)
    return x


def word(keys: MatrixKeys, counter: int) -> int:
    """A single word, for vectors and spot checks."""
    return int(words(keys, np.array([counter], dtype=np.uint32))[0])


def unpack(row_words: np.ndarray) -> np.ndarray:
    """Words (rows, n/8) -> int8 entries (rows, n): low nibble first, minus 8."""
    little = np.ascontiguousarray(row_words, dtype="<u4")
    return _PAIRS[little.view(np.uint8)].view(np.int8).reshape(row_words.shape[0], -1)


def rows(keys: MatrixKeys, n: int, start: int, stop: int) -> np.ndarray:
    """Rows [start, stop) of A (keys of matrix 0) or Bt (keys of matrix 1) as int8 (rows, n)."""
    check_n(n)
    if not 0 <= start <= stop <= n:
        raise InvalidParameter("rows", (start, stop), f"must lie in [0, {n}]")
    per_row = n // NIBBLES_PER_WORD
    counters = np.arange(start * per_row, stop * per_row, dtype=np.uint32)
    return unpack(words(keys, counters).reshape(stop - start, per_row))


def select_rows(keys: MatrixKeys, n: int, indices: np.ndarray) -> np.ndarray:
    """Arbitrary rows (e.g. the 64 columns of a chunk, as rows of Bt) as int8 (len, n)."""
    check_n(n)
    idx = np.asarray(indices, dtype=np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise InvalidParameter("row index", int(idx.max()), f"must be below n={n}")
    per_row = n // NIBBLES_PER_WORD
    counters = (idx[:, None] * per_row + np.arange(per_row, dtype=np.int64)).astype(np.uint32)
    return unpack(words(keys, counters))


def element(keys: WorkloadKeys, n: int, i: int, j: int) -> int:
    """C[i][j] = sum_k A[i][k] * Bt[j][k], exactly, from one row of A and one row of Bt."""
    a = rows(keys.a, n, i, i + 1)[0].astype(np.int64)
    b = rows(keys.b, n, j, j + 1)[0].astype(np.int64)
    return int(a @ b)


def reference_product(keys: WorkloadKeys, n: int) -> np.ndarray:
    """The whole C as int32 by an exact int64 product: the slow, obvious reference."""
    a = rows(keys.a, n, 0, n).astype(np.int64)
    bt = rows(keys.b, n, 0, n).astype(np.int64)
    return (a @ bt.T).astype(np.int32)
