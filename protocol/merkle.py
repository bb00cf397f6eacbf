"""Merkle commitments in pymerkle 7's layout (RFC 9162, keccak_256, 0x00/0x01 prefixes).

pymerkle is the reference but is pure Python per node and keeps a cache; PoG commits up to
millions of chunks, so this module builds the same tree level by level. RFC 9162's MTH (split
at the largest power of two below m) is the tree obtained by hashing pairs on each level and
carrying a lone last node up unchanged; tests check roots and proofs against pymerkle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import NewType

from sha3 import keccak_256

from protocol.errors import IndexOutOfRange, InvalidParameter, InvalidProof

Hash32 = NewType("Hash32", bytes)
# (buffer, message size, prefix) -> keccak256(prefix || message) of each consecutive message,
# concatenated. The tree needs nothing else, so a faster implementation can be plugged in.
MessageHasher = Callable[[bytes | bytearray | memoryview, int, bytes], bytes]

LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"
# The contract refuses deeper proofs; 2^32 leaves is far beyond any PoG commitment.
MAX_PROOF_DEPTH = 32


def keccak256(data: bytes | bytearray | memoryview) -> Hash32:
    """Ethereum's keccak256 (not NIST SHA3-256: the padding differs)."""
    return Hash32(keccak_256(data).digest())


def leaf_hash(data: bytes | bytearray | memoryview) -> Hash32:
    """Hash of leaf data, domain-separated from nodes so a node cannot pass as a leaf."""
    h = keccak_256(LEAF_PREFIX)
    h.update(data)
    return Hash32(h.digest())


def node_hash(left: bytes, right: bytes) -> Hash32:
    """Hash of an internal node over its two children."""
    return Hash32(keccak_256(NODE_PREFIX + left + right).digest())


def hash_messages(buffer: bytes | bytearray | memoryview, size: int, prefix: bytes) -> bytes:
    """keccak256(prefix || message) for each `size`-byte message of `buffer`, concatenated.

    The reference implementation (one sha3 call per message; memoryview slices, no copies).
    """
    view = memoryview(buffer).cast("B")
    if size <= 0 or len(view) % size:
        raise InvalidParameter("message size", size, f"does not divide {len(view)} bytes")
    start = keccak_256(prefix)
    out: list[bytes] = []
    append = out.append
    for offset in range(0, len(view), size):
        h = start.copy()
        h.update(view[offset : offset + size])
        append(h.digest())
    return b"".join(out)


def hash_leaves(buffer: bytes | bytearray | memoryview, leaf_size: int,
                hasher: MessageHasher = hash_messages) -> bytes:
    """Leaf hashes (concatenated, 32 bytes each) of a buffer cut into leaves of `leaf_size`."""
    return hasher(buffer, leaf_size, LEAF_PREFIX)


def _next_level(level: bytes, hasher: MessageHasher) -> bytes:
    """Parent level of a level stored as concatenated 32-byte hashes: each adjacent pair is
    one 64-byte message; a lone last node is carried up unchanged."""
    pairs = len(level) // 64
    parents = hasher(memoryview(level)[: 64 * pairs], 64, NODE_PREFIX) if pairs else b""
    if len(level) % 64:
        parents += level[-32:]
    return parents


class MerkleTree:
    """A complete in-memory tree: every level kept as one buffer (32 bytes per node), so a proof
    is a few slices and a million-leaf tree costs 64 MiB, not millions of Python objects."""

    def __init__(self, leaf_hashes: Sequence[bytes] | bytes,
                 hasher: MessageHasher = hash_messages) -> None:
        level = leaf_hashes if isinstance(leaf_hashes, bytes) else b"".join(leaf_hashes)
        if not level or len(level) % 32:
            raise InvalidParameter(
                "leaf hashes", len(level), "a commitment needs at least one 32-byte leaf hash"
            )
        levels = [level]
        while len(levels[-1]) > 32:
            levels.append(_next_level(levels[-1], hasher))
        self._levels = levels

    @classmethod
    def from_leaves(cls, leaves: Iterable[bytes]) -> MerkleTree:
        """Tree over leaf data (each hashed with the leaf prefix)."""
        return cls([leaf_hash(d) for d in leaves])

    @property
    def size(self) -> int:
        """Number of leaves."""
        return len(self._levels[0]) // 32

    @property
    def root(self) -> Hash32:
        return Hash32(self._levels[-1])

    def leaf_hash(self, index: int) -> Hash32:
        self._check_index(index)
        return Hash32(self._levels[0][32 * index : 32 * index + 32])

    def proof(self, index: int) -> list[Hash32]:
        """Sibling hashes of leaf `index` (0-based), bottom-up, as PROTOCOL.md defines a proof.

        A node that is carried up alone on a level has no sibling there, so that level adds
        nothing to the path (RFC 9162 paths are exactly these siblings).
        """
        self._check_index(index)
        path: list[Hash32] = []
        position = index
        for level in self._levels[:-1]:
            sibling = position ^ 1
            if 32 * sibling < len(level):
                path.append(Hash32(level[32 * sibling : 32 * sibling + 32]))
            position >>= 1
        return path

    def _check_index(self, index: int) -> None:
        if not 0 <= index < self.size:
            raise IndexOutOfRange(index, self.size)


def root_from_proof(leaf: bytes, index: int, size: int, siblings: Sequence[bytes]) -> Hash32:
    """Root implied by a leaf hash and its siblings, directions rebuilt from (index, size).

    RFC 9162 §2.1.3.2: the proof carries no direction bits, so a proof for one index cannot be
    replayed for another.
    """
    if not 0 <= index < size:
        raise IndexOutOfRange(index, size)
    if len(siblings) > MAX_PROOF_DEPTH:
        raise InvalidProof(index, f"depth {len(siblings)} exceeds {MAX_PROOF_DEPTH}")
    fn, sn = index, size - 1
    result = bytes(leaf)
    for sibling in siblings:
        if len(sibling) != 32:
            raise InvalidProof(index, "sibling is not 32 bytes")
        if sn == 0:
            raise InvalidProof(index, "proof longer than the tree is deep")
        if fn & 1 or fn == sn:
            result = node_hash(sibling, result)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            result = node_hash(result, sibling)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise InvalidProof(index, "proof shorter than the tree is deep")
    return Hash32(result)


def verify_inclusion(
    leaf: bytes, index: int, size: int, siblings: Sequence[bytes], root: bytes
) -> None:
    """Raise `InvalidProof` unless leaf hash `leaf` sits at `index` of the tree with `root`."""
    if root_from_proof(leaf, index, size, siblings) != root:
        raise InvalidProof(index, "root mismatch")
