"""Helpers shared by the proof-contract tests: Merkle trees (pymerkle itself) and an obvious,
slow reference of the PoG workload (docs/PROTOCOL.md) to build honest and forged chunks.

The reference is written straight from PROTOCOL.md on purpose, independent of protocol/, so that
the contracts are checked against the text rather than against another implementation of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pymerkle
from brownie import chain
from eth_abi import encode
from eth_utils import keccak

MASK32 = 0xFFFFFFFF


def merkle_tree(leaves: list[bytes]) -> "MerkleTree":
    """A pymerkle tree (keccak_256, RFC 9162 layout) over `leaves` appended in order."""
    tree = pymerkle.InmemoryTree(algorithm="keccak_256")
    for leaf in leaves:
        tree.append_entry(leaf)
    return MerkleTree(tree)


@dataclass
class MerkleTree:
    tree: pymerkle.InmemoryTree

    @property
    def size(self) -> int:
        return self.tree.get_size()

    @property
    def root(self) -> bytes:
        return self.tree.get_root()

    def leaf_hash(self, index: int) -> bytes:
        """Leaf hash at 0-based `index`."""
        return self.tree.get_leaf(index + 1)

    def siblings(self, index: int) -> list[bytes]:
        """Sibling hashes bottom-up for 0-based `index` (pymerkle's path without the leaf)."""
        path = self.tree.prove_inclusion(index + 1).path
        return list(path[1:])


def leaf_hash(data: bytes) -> bytes:
    return keccak(b"\x00" + data)


def node_hash(left: bytes, right: bytes) -> bytes:
    return keccak(b"\x01" + left + right)


def challenge_indices(randomness: bytes, root: bytes, k: int, leaf_count: int) -> list[int]:
    """index_t = keccak256(abi.encode(R, root, t)) mod leafCount for t < k."""
    return [
        int.from_bytes(keccak(encode(["bytes32", "bytes32", "uint256"], [randomness, root, t])), "big")
        % leaf_count
        for t in range(k)
    ]


def _mix(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x7FEB352D) & MASK32
    x ^= x >> 15
    x = (x * 0x846CA68B) & MASK32
    return x ^ (x >> 16)


def gpu_seed(round_seed: bytes, gpu_index: int, uuid_hash: bytes) -> bytes:
    return keccak(encode(["bytes32", "uint256", "bytes32"], [round_seed, gpu_index, uuid_hash]))


def keys(seed: bytes, m: int) -> tuple[int, int]:
    h = keccak(seed + bytes([m]))
    return int.from_bytes(h[:4], "big"), int.from_bytes(h[4:8], "big")


def word(seed: bytes, m: int, w: int) -> int:
    k1, k2 = keys(seed, m)
    return _mix(_mix((w ^ k1) & MASK32) ^ k2)


def matrix(seed: bytes, m: int, n: int) -> np.ndarray:
    """A (m=0) or Bt (m=1) as int64, entry by entry from the nibbles of the keyed words."""
    out = np.zeros((n, n), dtype=np.int64)
    for row in range(n):
        for wi in range(n // 8):
            v = word(seed, m, row * (n // 8) + wi)
            for q in range(8):
                out[row, wi * 8 + q] = ((v >> (4 * q)) & 15) - 8
    return out


def product(seed: bytes, n: int) -> np.ndarray:
    """C = A·B with B = Bt transposed."""
    return matrix(seed, 0, n) @ matrix(seed, 1, n).T


def chunks(c: np.ndarray) -> list[bytes]:
    """C row-major in 64-element chunks of big-endian int32 (256 bytes each)."""
    flat = c.reshape(-1).astype(">i4")
    return [flat[i : i + 64].tobytes() for i in range(0, flat.size, 64)]


def element_of_chunk(chunk: bytes, offset: int) -> int:
    return int.from_bytes(chunk[4 * offset : 4 * offset + 4], "big", signed=True)


def with_element(chunk: bytes, offset: int, value: int) -> bytes:
    """`chunk` with element `offset` replaced by `value`."""
    return chunk[: 4 * offset] + value.to_bytes(4, "big", signed=True) + chunk[4 * offset + 4 :]


def matrix_row(seed: bytes, m: int, n: int, row: int) -> list[int]:
    """One row of A (m=0) or Bt (m=1), for large n where the whole matrix is too slow."""
    out = []
    for wi in range(n // 8):
        v = word(seed, m, row * (n // 8) + wi)
        out.extend(((v >> (4 * q)) & 15) - 8 for q in range(8))
    return out


@dataclass
class Commitment:
    """Leaves as committed (PoG chunks or job output digests) and their pymerkle tree."""

    leaves: list[bytes]
    tree: MerkleTree

    @property
    def root(self) -> bytes:
        return self.tree.root

    def answer(self, indices: list[int]) -> tuple[list[bytes], list[list[bytes]]]:
        """The leaves at `indices` and their proofs, as respond() takes them."""
        return [self.leaves[i] for i in indices], [self.tree.siblings(i) for i in indices]


def commit(leaves: list[bytes]) -> Commitment:
    return Commitment(list(leaves), merkle_tree(leaves))


def honest_pog_commitment(seed: bytes, n: int) -> Commitment:
    """What an honest prover commits for one GPU: the chunks of C = A·B."""
    return commit(chunks(product(seed, n)))


@dataclass
class UniformTree:
    """A perfect tree of 2^depth copies of one leaf: every proof is the same list of level
    hashes, so deep trees (2^20 leaves) cost nothing to build for gas measurements."""

    leaf: bytes
    depth: int

    @property
    def levels(self) -> list[bytes]:
        hashes = [leaf_hash(self.leaf)]
        for _ in range(self.depth):
            hashes.append(node_hash(hashes[-1], hashes[-1]))
        return hashes

    @property
    def root(self) -> bytes:
        return self.levels[-1]

    def answer(self, indices: list[int]) -> tuple[list[bytes], list[list[bytes]]]:
        siblings = self.levels[:-1]
        return [self.leaf] * len(indices), [siblings] * len(indices)


def secret_for(round_hint: object) -> bytes:
    """A verifier's secret for a round (deterministic per hint, so tests can recompute it)."""
    return keccak(b"verifier-secret-" + str(round_hint).encode())


def expected_seed(request_block_hash: bytes, secret: bytes, round_id: int, provider: str) -> bytes:
    """roundSeed = keccak256(abi.encode(blockhash(requestBlock), secret, roundId, provider))."""
    return keccak(encode(["bytes32", "bytes32", "uint256", "address"],
                         [request_block_hash, secret, round_id, provider]))


def request_round(proof_of_gpu, provider, verifier, n: int = 64, fix: bool = True) -> int:
    """Requests a round with a committed secret and (unless fix=False) reveals it at once in the
    next transaction, as the verifier does: no block has to be mined in between."""
    secret = secret_for(proof_of_gpu.roundCount() + 1)
    tx = proof_of_gpu.requestRound(provider, n, keccak(secret), {"from": verifier})
    round_id = tx.events["RoundRequested"]["roundId"]
    if fix:
        proof_of_gpu.fixSeed(round_id, secret, {"from": verifier})
    return round_id


def commit_honest_round(proof_of_gpu, provider, verifier, n: int = 64) -> tuple[int, list[Commitment]]:
    """A round whose provider committed honest roots for every GPU."""
    round_id = request_round(proof_of_gpu, provider, verifier, n)
    gpu_count = proof_of_gpu.round(round_id)["gpuCount"]
    commitments = [honest_pog_commitment(bytes(proof_of_gpu.gpuSeedOf(round_id, g)), n) for g in range(gpu_count)]
    proof_of_gpu.commitRoots(round_id, [c.root for c in commitments], {"from": provider})
    return round_id, commitments


def current_randomness(challenge_manager, challenge_id: int) -> bytes:
    """R as the provider learns it: stored, else the anchor block's hash read from the node
    (the block exists once the challenge is mined: nothing has to be mined for it)."""
    c = challenge_manager.challenge(challenge_id)
    if bytes(c["randomness"]) != bytes(32):
        return bytes(c["randomness"])
    return bytes(chain[c["anchorBlock"]].hash)


def indices_of(challenge_manager, challenge_id: int) -> list[int]:
    c = challenge_manager.challenge(challenge_id)
    return challenge_indices(current_randomness(challenge_manager, challenge_id), bytes(c["root"]), c["k"],
                             c["leafCount"])


def answer(challenge_manager, challenge_id: int, commitment) -> tuple[list[bytes], list[list[bytes]]]:
    """The provider's answer to a challenge from its commitment, indices computed off-chain."""
    return commitment.answer(indices_of(challenge_manager, challenge_id))


def wait_for_randomness(challenge_manager, challenge_id: int) -> None:
    """Mines until blockhash(anchorBlock) is readable from a view call (eth_call on anvil runs
    at the latest block, which must be past the anchor)."""
    target = challenge_manager.challenge(challenge_id)["anchorBlock"] + 1
    if chain.height < target:
        chain.mine(target - chain.height)
