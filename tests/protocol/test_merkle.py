"""protocol.merkle against pymerkle (the reference) and the golden vectors; proof binding."""

import json
import random
from pathlib import Path

import pytest
from pymerkle import InmemoryTree

from protocol.errors import IndexOutOfRange, InvalidParameter, InvalidProof
from protocol.merkle import (
    MAX_PROOF_DEPTH,
    MerkleTree,
    hash_leaves,
    keccak256,
    leaf_hash,
    root_from_proof,
    verify_inclusion,
)

VECTORS = Path(__file__).resolve().parents[1] / "vectors"


def pymerkle_tree(leaves):
    tree = InmemoryTree(algorithm="keccak_256")
    for data in leaves:
        tree.append_entry(data)
    return tree


def test_fast_tree_matches_pymerkle_roots_and_proofs_on_random_sizes():
    rng = random.Random(7)
    sizes = list(range(1, 34)) + [rng.randrange(34, 3000) for _ in range(6)]
    for size in sizes:
        leaves = [rng.randbytes(rng.randrange(0, 300)) for _ in range(size)]
        reference = pymerkle_tree(leaves)
        fast = MerkleTree.from_leaves(leaves)
        assert fast.root == reference.get_root(), size
        indices = range(size) if size < 34 else rng.sample(range(size), 20)
        for index in indices:
            proof = reference.prove_inclusion(index + 1)
            assert fast.leaf_hash(index) == proof.path[0]
            assert fast.proof(index) == list(proof.path[1:]), (size, index)


def test_hash_leaves_equals_leaf_hash_of_each_slice():
    data = random.Random(1).randbytes(256 * 9)
    joined = hash_leaves(data, 256)
    assert joined == b"".join(leaf_hash(data[i : i + 256]) for i in range(0, len(data), 256))
    with pytest.raises(InvalidParameter):
        hash_leaves(data, 255)


def test_golden_merkle_vectors_verify_against_fast_tree():
    cases = json.loads((VECTORS / "merkle.json").read_text())["cases"]
    assert [len(c["leaves"]) for c in cases] == [*range(1, 18), 100, 1000]
    for case in cases:
        leaves = [bytes.fromhex(x[2:]) for x in case["leaves"]]
        tree = MerkleTree.from_leaves(leaves)
        root = bytes.fromhex(case["root"][2:])
        assert tree.root == root
        for proof in case["proofs"]:
            siblings = [bytes.fromhex(s[2:]) for s in proof["siblings"]]
            assert tree.proof(proof["index"]) == siblings
            leaf = bytes.fromhex(proof["leaf_hash"][2:])
            verify_inclusion(leaf, proof["index"], len(leaves), siblings, root)


def test_proof_for_one_index_is_rejected_at_another():
    leaves = [keccak256(bytes([i])) for i in range(11)]
    tree = MerkleTree.from_leaves(leaves)
    proof = tree.proof(4)
    for other in range(11):
        if other != 4:
            with pytest.raises((InvalidProof, IndexOutOfRange)):
                verify_inclusion(tree.leaf_hash(4), other, 11, proof, tree.root)


def test_internal_node_cannot_pass_as_a_leaf():
    tree = MerkleTree.from_leaves([bytes([i]) for i in range(8)])
    # An attacker reveals the children of node (0, 1) as the data of "leaf 0" of a 4-leaf
    # tree, with the upper path: the 0x00 leaf prefix makes its hash differ from the node's.
    forged = tree.leaf_hash(0) + tree.leaf_hash(1)
    upper = tree.proof(0)[1:]
    with pytest.raises(InvalidProof):
        verify_inclusion(leaf_hash(forged), 0, 4, upper, tree.root)
    with pytest.raises(InvalidProof):
        verify_inclusion(leaf_hash(forged), 0, 8, upper, tree.root)


def test_proof_of_wrong_length_or_depth_is_rejected():
    tree = MerkleTree.from_leaves([bytes([i]) for i in range(16)])
    proof = tree.proof(3)
    with pytest.raises(InvalidProof):
        verify_inclusion(tree.leaf_hash(3), 3, 16, proof[:-1], tree.root)
    with pytest.raises(InvalidProof):
        verify_inclusion(tree.leaf_hash(3), 3, 16, proof + [proof[0]], tree.root)
    with pytest.raises(InvalidProof):
        root_from_proof(tree.leaf_hash(3), 3, 2**40, [proof[0]] * (MAX_PROOF_DEPTH + 1))


def test_out_of_range_index_and_empty_tree_are_refused():
    tree = MerkleTree.from_leaves([b"a", b"b", b"c"])
    with pytest.raises(IndexOutOfRange):
        tree.proof(3)
    with pytest.raises(IndexOutOfRange):
        verify_inclusion(tree.leaf_hash(0), 3, 3, [], tree.root)
    with pytest.raises(InvalidParameter):
        MerkleTree([])
