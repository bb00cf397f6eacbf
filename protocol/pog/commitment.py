"""PoG commitment: C cut into 64-element chunks (256 big-endian bytes each) under a Merkle root.

Chunks follow C row-major, so chunk c is row (64c) / n, columns (64c mod n) .. +63; one chunk
never spans two rows because n is a multiple of 64.
"""

from __future__ import annotations

import numpy as np

from protocol.errors import IndexOutOfRange, WrongSize
from protocol.merkle import MerkleTree, MessageHasher, hash_leaves, hash_messages
from protocol.pog.workload import check_n

CHUNK_ELEMENTS = 64
CHUNK_BYTES = CHUNK_ELEMENTS * 4
_BIG_ENDIAN_INT32 = np.dtype(">i4")


def leaf_count(n: int) -> int:
    """Number of chunks (leaves) of an n x n product."""
    return check_n(n) * n // CHUNK_ELEMENTS


def chunk_position(n: int, index: int) -> tuple[int, int]:
    """(row, first column) of chunk `index`."""
    count = leaf_count(n)
    if not 0 <= index < count:
        raise IndexOutOfRange(index, count)
    first = index * CHUNK_ELEMENTS
    return first // n, first % n


def encode(values: np.ndarray) -> bytes:
    """Elements (any shape, row-major, a multiple of 64 of them) as big-endian int32 bytes."""
    flat = np.ascontiguousarray(values).reshape(-1)
    if flat.size % CHUNK_ELEMENTS:
        raise WrongSize("elements", (flat.size // CHUNK_ELEMENTS + 1) * CHUNK_ELEMENTS, flat.size)
    return flat.astype(_BIG_ENDIAN_INT32, copy=False).tobytes()


def decode_chunk(data: bytes) -> np.ndarray:
    """One chunk's 256 bytes back to 64 int64 values (for exact comparison)."""
    if len(data) != CHUNK_BYTES:
        raise WrongSize("chunk bytes", CHUNK_BYTES, len(data))
    return np.frombuffer(data, dtype=_BIG_ENDIAN_INT32).astype(np.int64)


def chunk_hashes(values: np.ndarray, hasher: MessageHasher = hash_messages) -> bytes:
    """Leaf hashes (concatenated) of the chunks of some whole rows of C (a panel).

    Hashes the big-endian array's memory in place (no bytes copy of the panel).
    """
    flat = np.ascontiguousarray(values, dtype=_BIG_ENDIAN_INT32).reshape(-1)
    if flat.size % CHUNK_ELEMENTS:
        raise WrongSize("elements", (flat.size // CHUNK_ELEMENTS + 1) * CHUNK_ELEMENTS, flat.size)
    return hash_leaves(flat.data.cast("B"), CHUNK_BYTES, hasher)


def commit(product: np.ndarray, hasher: MessageHasher = hash_messages) -> MerkleTree:
    """The commitment tree over a whole n x n product C."""
    n = product.shape[0]
    if product.shape != (n, n):
        raise WrongSize("product columns", n, product.shape[1] if product.ndim == 2 else 0)
    check_n(n)
    return MerkleTree(chunk_hashes(product, hasher), hasher)
