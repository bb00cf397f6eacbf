"""MerkleProofLib against pymerkle: every proof pymerkle makes verifies on-chain, roots built in
Solidity equal pymerkle's, and malformed proofs are refused."""

import json
from pathlib import Path

import pytest
from brownie import ProofLibrariesHarness, accounts

from proofs_support import leaf_hash, merkle_tree

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "merkle.json"
SMALL_SIZES = list(range(1, 18))


@pytest.fixture(scope="module")
def harness():
    return ProofLibrariesHarness.deploy({"from": accounts[0]})


def _leaves(size: int) -> list[bytes]:
    return [f"leaf-{size}-{i}".encode() for i in range(size)]


@pytest.mark.parametrize("size", SMALL_SIZES)
def test_every_pymerkle_proof_verifies_for_small_trees(harness, size):
    tree = merkle_tree(_leaves(size))
    for index in range(size):
        assert harness.verify(tree.siblings(index), tree.root, tree.leaf_hash(index), index, size)


@pytest.mark.parametrize("size", [100, 1000])
def test_pymerkle_proofs_verify_for_large_trees(harness, size):
    tree = merkle_tree(_leaves(size))
    for index in [0, 1, 2, size // 3, size // 2, size - 65, size - 3, size - 2, size - 1]:
        assert harness.verify(tree.siblings(index), tree.root, tree.leaf_hash(index), index, size)


@pytest.mark.parametrize("size", SMALL_SIZES)
def test_solidity_root_equals_pymerkle_root(harness, size):
    leaves = _leaves(size)
    assert bytes(harness.rootOf(leaves)) == merkle_tree(leaves).root


def test_leaf_hash_prefixes_zero_byte(harness):
    data = bytes(range(256))
    assert bytes(harness.leafHash(data)) == leaf_hash(data) == merkle_tree([data]).leaf_hash(0)


def test_golden_vectors_verify():
    if not VECTORS.exists():
        pytest.skip("tests/vectors/merkle.json not written yet")
    harness = ProofLibrariesHarness.deploy({"from": accounts[0]})
    cases = json.loads(VECTORS.read_text())["cases"]
    assert {len(c["leaves"]) for c in cases} >= set(SMALL_SIZES) | {100, 1000}
    for case in cases:
        size = len(case["leaves"])
        if size <= 17:
            assert harness.rootOf(case["leaves"]).hex() == case["root"][2:]
        for proof in case["proofs"]:
            assert proof["leaf_hash"] == "0x" + leaf_hash(bytes.fromhex(case["leaves"][proof["index"]][2:])).hex()
            assert harness.verify(proof["siblings"], case["root"], proof["leaf_hash"], proof["index"], size)


def test_tampered_sibling_is_refused(harness):
    tree = merkle_tree(_leaves(13))
    siblings = tree.siblings(6)
    siblings[1] = bytes(32)
    assert not harness.verify(siblings, tree.root, tree.leaf_hash(6), 6, 13)


def test_index_outside_the_tree_is_refused(harness):
    tree = merkle_tree(_leaves(8))
    assert not harness.verify(tree.siblings(7), tree.root, tree.leaf_hash(7), 8, 8)


def test_proof_for_wrong_tree_size_is_refused(harness):
    # Index 11 has 3 siblings in a tree of 12 leaves but 4 in a tree of 16.
    tree = merkle_tree(_leaves(12))
    assert not harness.verify(tree.siblings(11), tree.root, tree.leaf_hash(11), 11, 16)
    assert not harness.verify(tree.siblings(11), tree.root, tree.leaf_hash(11), 11, 11)


def test_truncated_and_extended_proofs_are_refused(harness):
    tree = merkle_tree(_leaves(9))
    siblings = tree.siblings(2)
    assert not harness.verify(siblings[:-1], tree.root, tree.leaf_hash(2), 2, 9)
    assert not harness.verify(siblings + [bytes(32)], tree.root, tree.leaf_hash(2), 2, 9)


def test_proof_deeper_than_32_is_refused(harness):
    # 33 siblings could only fit a tree of more than 2^32 leaves; refused before hashing.
    assert not harness.verify([bytes(32)] * 33, bytes(32), bytes(32), 0, 2**40)
