"""Challenge derivation: which chunks a prover must reveal, fixed only after its root.

Indices depend on the root itself, so a prover cannot choose a root that steers the
challenge without recomputing the whole commitment for every try.
"""

from __future__ import annotations

from protocol.errors import InvalidParameter
from protocol.merkle import Hash32, keccak256

MIN_K = 32
MAX_K = 1024


def _bytes32(name: str, value: bytes) -> bytes:
    if not isinstance(value, (bytes, bytearray)) or len(value) != 32:
        raise InvalidParameter(name, value, "must be 32 bytes")
    return bytes(value)


def challenge_indices(randomness: bytes, root: bytes, leaf_count: int, k: int) -> list[int]:
    """index_t = uint256(keccak256(abi.encode(R, root, uint256 t))) mod leafCount, t < k."""
    if leaf_count <= 0:
        raise InvalidParameter("leaf_count", leaf_count, "must be positive")
    if not 1 <= k <= MAX_K:
        raise InvalidParameter("k", k, f"must be in [1, {MAX_K}]")
    prefix = _bytes32("randomness", randomness) + _bytes32("root", root)
    return [
        int.from_bytes(keccak256(prefix + t.to_bytes(32, "big")), "big") % leaf_count
        for t in range(k)
    ]


def pog_secret_hash(secret: bytes) -> Hash32:
    """secretHash = keccak256(secret): what a verifier commits to when it requests a round."""
    return keccak256(_bytes32("secret", secret))


def pog_round_seed(request_blockhash: bytes, secret: bytes, round_id: int, provider: bytes) -> Hash32:
    """roundSeed = keccak256(abi.encode(blockhash(requestBlock), bytes32 secret, uint256 roundId,
    address provider)): the request block's hash mixed with the verifier's revealed secret, so
    nobody knows the seed before the verifier reveals (not even the provider, who knows the
    block hash) and the verifier, who committed to its secret before the block existed, could
    not choose it."""
    if not isinstance(provider, (bytes, bytearray)) or len(provider) != 20:
        raise InvalidParameter("provider", provider, "must be a 20-byte address")
    if not 0 <= round_id < 2**256:
        raise InvalidParameter("round_id", round_id, "must fit uint256")
    return keccak256(
        _bytes32("blockhash", request_blockhash)
        + _bytes32("secret", secret)
        + round_id.to_bytes(32, "big")
        + bytes(12)
        + bytes(provider)
    )
