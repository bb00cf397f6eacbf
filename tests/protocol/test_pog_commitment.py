"""Chunking, commitment, challenge derivation and chunk checking, on the golden vectors and
on doctored chunks."""

import json
from pathlib import Path

import numpy as np
import pytest
from eth_abi import encode as abi_encode
from eth_utils import keccak
from pymerkle import InmemoryTree

from protocol.errors import IndexOutOfRange, InvalidParameter, InvalidProof, WrongElement, WrongSize
from protocol.pog.challenge import challenge_indices, pog_round_seed, pog_secret_hash
from protocol.pog.check import check_chunk, check_chunks, expected_chunk, expected_chunks
from protocol.pog.commitment import (
    CHUNK_BYTES,
    chunk_position,
    commit,
    decode_chunk,
    encode,
    leaf_count,
)
from protocol.pog.workload import WorkloadKeys, reference_product

VECTORS = Path(__file__).resolve().parents[1] / "vectors"


def b(text):
    return bytes.fromhex(text[2:])


def full_cases():
    return [c for c in json.loads((VECTORS / "pog.json").read_text())["cases"] if "root" in c]


def test_vectors_cover_n_64_and_128_with_full_commitments():
    assert [c["n"] for c in full_cases()] == [64, 128]


def test_vector_roots_and_chunks_recompute_from_the_seed():
    for case in full_cases():
        n = case["n"]
        keys = WorkloadKeys.derive(b(case["gpu_seed"]))
        product = reference_product(keys, n)
        tree = commit(product)
        assert case["leaf_count"] == leaf_count(n) == n * n // 64
        assert tree.root == b(case["root"])
        data = encode(product)
        reference = InmemoryTree(algorithm="keccak_256")
        for c in range(leaf_count(n)):
            reference.append_entry(data[c * CHUNK_BYTES : (c + 1) * CHUNK_BYTES])
        assert reference.get_root() == tree.root
        for chunk in case["chunks"]:
            siblings = [b(s) for s in chunk["siblings"]]
            check_chunk(b(case["gpu_seed"]), n, tree.root, chunk["index"], b(chunk["data"]),
                        siblings)
            row, col = chunk_position(n, chunk["index"])
            assert decode_chunk(b(chunk["data"])).tolist() == product[row, col : col + 64].tolist()


def test_vector_challenge_indices_match_abi_encoding():
    for case in full_cases():
        ch = case["challenge"]
        expected = [int.from_bytes(keccak(abi_encode(["bytes32", "bytes32", "uint256"],
                                                     [b(ch["randomness"]), b(case["root"]), t])),
                                   "big") % case["leaf_count"] for t in range(ch["k"])]
        assert ch["indices"] == expected
        assert challenge_indices(b(ch["randomness"]), b(case["root"]), case["leaf_count"],
                                 ch["k"]) == expected


def test_round_seed_matches_abi_encoding():
    block, secret, provider = keccak(b"block"), keccak(b"secret"), bytes.fromhex("11" * 20)
    expected = keccak(abi_encode(["bytes32", "bytes32", "uint256", "address"],
                                 [block, secret, 7, "0x" + provider.hex()]))
    assert pog_round_seed(block, secret, 7, provider) == expected
    assert pog_secret_hash(secret) == keccak(secret)


def test_chunks_are_big_endian_twos_complement_rows():
    values = np.array([-1, 1, -(2**31), 2**31 - 1] * 16, dtype=np.int32)
    data = encode(values)
    assert data[:8] == b"\xff\xff\xff\xff\x00\x00\x00\x01"
    assert decode_chunk(data).tolist() == values.tolist()
    assert chunk_position(128, 0) == (0, 0)
    assert chunk_position(128, 1) == (0, 64)
    assert chunk_position(128, 2) == (1, 0)
    with pytest.raises(IndexOutOfRange):
        chunk_position(128, 256)
    with pytest.raises(WrongSize):
        decode_chunk(data[:-1])
    with pytest.raises(WrongSize):
        encode(np.zeros(65, dtype=np.int32))


SEED = keccak(b"committed")


@pytest.fixture(scope="module")
def committed():
    keys = WorkloadKeys.derive(SEED)
    product = reference_product(keys, 128)
    return keys, product, commit(product)


def test_doctored_value_recommitted_is_caught_as_wrong_element(committed):
    _, product, _ = committed
    bad = product.copy()
    bad[3, 70] += 1  # chunk 3*2 + 1 = 7, offset 6
    tree = commit(bad)
    data = encode(bad[3, 64:128])
    with pytest.raises(WrongElement) as err:
        check_chunk(SEED, 128, tree.root, 7, data, tree.proof(7))
    assert (err.value.index, err.value.offset) == (7, 6)
    assert (err.value.expected, err.value.got) == (product[3, 70], product[3, 70] + 1)


def test_tampered_data_under_an_honest_root_fails_inclusion(committed):
    _, product, tree = committed
    data = bytearray(encode(product[0, :64]))
    data[-1] ^= 1
    with pytest.raises(InvalidProof):
        check_chunk(SEED, 128, tree.root, 0, bytes(data), tree.proof(0))


def test_chunk_of_wrong_length_is_refused(committed):
    _, product, tree = committed
    with pytest.raises(WrongSize):
        check_chunk(SEED, 128, tree.root, 0, encode(product[0, :64])[:-4], tree.proof(0))


def test_expected_chunk_matches_reference_rows(committed):
    keys, product, _ = committed
    for index in (0, 1, 100, 255):
        row, col = chunk_position(128, index)
        assert expected_chunk(keys, 128, index).tolist() == product[row, col : col + 64].tolist()


def test_challenge_parameters_are_checked():
    with pytest.raises(InvalidParameter):
        challenge_indices(bytes(32), bytes(32), 0, 32)
    with pytest.raises(InvalidParameter):
        challenge_indices(bytes(31), bytes(32), 10, 32)
    with pytest.raises(InvalidParameter):
        challenge_indices(bytes(32), bytes(32), 10, 0)


def test_challenge_indices_depend_on_the_root():
    r = keccak(b"r")
    assert challenge_indices(r, keccak(b"x"), 2**20, 32) != challenge_indices(
        r, keccak(b"y"), 2**20, 32)


def test_batched_expected_chunks_equal_single_ones_at_large_n():
    keys = WorkloadKeys.derive(keccak(b"batched"))
    n = 4096
    indices = [0, 63, 64, leaf_count(n) - 1, 123457]
    batch = expected_chunks(keys, n, indices)
    for row, index in zip(batch, indices):
        assert row.tolist() == expected_chunk(keys, n, index).tolist()


def test_batched_check_reports_the_bad_chunk(committed):
    _, product, _ = committed
    bad = product.copy()
    bad[10, 5] -= 3  # chunk 20, offset 5
    tree = commit(bad)
    answers = [(i, encode(bad.reshape(-1, 64)[i]), tree.proof(i)) for i in (3, 20, 200)]
    with pytest.raises(WrongElement) as err:
        check_chunks(SEED, 128, tree.root, answers)
    assert (err.value.index, err.value.offset) == (20, 5)
    check_chunks(SEED, 128, tree.root, [answers[0], answers[2]])
