"""What every party must agree on bit-for-bit (docs/PROTOCOL.md). No I/O lives here."""

from protocol.errors import (
    ClassRejected,
    IndexOutOfRange,
    InvalidParameter,
    InvalidProof,
    ProtocolError,
    WrongElement,
    WrongSize,
)
from protocol.merkle import (
    Hash32,
    MerkleTree,
    MessageHasher,
    hash_leaves,
    hash_messages,
    keccak256,
    leaf_hash,
    node_hash,
    root_from_proof,
    verify_inclusion,
)

__all__ = [
    "ClassRejected",
    "Hash32",
    "IndexOutOfRange",
    "InvalidParameter",
    "InvalidProof",
    "MerkleTree",
    "MessageHasher",
    "ProtocolError",
    "WrongElement",
    "WrongSize",
    "hash_leaves",
    "hash_messages",
    "keccak256",
    "leaf_hash",
    "node_hash",
    "root_from_proof",
    "verify_inclusion",
]
