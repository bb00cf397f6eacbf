"""PoG workload v1 checked against an independent pure-Python reading of PROTOCOL.md and the
golden vectors (which the Solidity side checks too)."""

import json
from pathlib import Path

import numpy as np
import pytest
from eth_abi import encode as abi_encode
from eth_utils import keccak

from protocol.errors import InvalidParameter
from protocol.pog.workload import (
    MatrixKeys,
    WorkloadKeys,
    check_n,
    element,
    gpu_seed,
    reference_product,
    rows,
    select_rows,
    word,
)

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
M32 = 0xFFFFFFFF


def cases():
    return json.loads((VECTORS / "pog.json").read_text())["cases"]


def b32(text):
    return bytes.fromhex(text[2:])


def py_mix(x):
    x ^= x >> 16
    x = (x * 0x7FEB352D) & M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & M32
    return x ^ (x >> 16)


def py_word(k1, k2, w):
    return py_mix(py_mix(w ^ k1) ^ k2)


def py_entry(k1, k2, n, r, c):
    return ((py_word(k1, k2, r * (n // 8) + c // 8) >> (4 * (c % 8))) & 15) - 8


def test_vector_seeds_and_keys_match_abi_encoding():
    for case in cases():
        seed = keccak(abi_encode(["bytes32", "uint256", "bytes32"],
                                 [b32(case["round_seed"]), case["gpu_index"],
                                  b32(case["uuid_hash"])]))
        assert seed == b32(case["gpu_seed"])
        assert gpu_seed(b32(case["round_seed"]), case["gpu_index"], b32(case["uuid_hash"])) == seed
        for name, m in (("a", 0), ("b", 1)):
            digest = keccak(seed + bytes([m]))
            expected = [int.from_bytes(digest[0:4], "big"), int.from_bytes(digest[4:8], "big")]
            assert case["keys"][name] == expected
            assert [*vars(MatrixKeys.derive(seed, m)).values()] == expected


def test_vector_words_match_pure_python_hash():
    for case in cases():
        keys = WorkloadKeys.derive(b32(case["gpu_seed"]))
        for item in case["words"]:
            k = keys.a if item["matrix"] == 0 else keys.b
            assert py_word(k.k1, k.k2, item["w"]) == item["value"]
            assert word(k, item["w"]) == item["value"]


def test_vector_elements_match_pure_python_dot_product():
    for case in cases():
        keys = WorkloadKeys.derive(b32(case["gpu_seed"]))
        n = case["n"]
        for item in case["elements"][:4]:  # corners, in pure Python (n=4096 is 8k entries each)
            i, j = item["i"], item["j"]
            value = sum(py_entry(keys.a.k1, keys.a.k2, n, i, t) *
                        py_entry(keys.b.k1, keys.b.k2, n, j, t) for t in range(n))
            assert value == item["value"]
        for item in case["elements"]:
            assert element(keys, n, item["i"], item["j"]) == item["value"]


def test_rows_unpack_nibbles_low_first_as_protocol_says():
    keys = WorkloadKeys.derive(keccak(b"rows"))
    n = 128
    block = rows(keys.a, n, 5, 9)
    for r in range(4):
        for c in (0, 1, 7, 8, 63, 127):
            assert block[r, c] == py_entry(keys.a.k1, keys.a.k2, n, 5 + r, c)
    assert np.array_equal(select_rows(keys.b, n, np.array([9, 2, 9])),
                          rows(keys.b, n, 0, n)[[9, 2, 9]])


def test_entries_are_uniform_in_range_without_hankel_structure():
    keys = WorkloadKeys.derive(keccak(b"uniform"))
    a = rows(keys.a, 512, 0, 512).astype(np.int64)
    assert a.min() == -8 and a.max() == 7
    counts = np.bincount((a + 8).ravel(), minlength=16)
    assert counts.min() > 0.9 * a.size / 16 and counts.max() < 1.1 * a.size / 16
    # A Hankel matrix (the anchor's weakness) has A[i][j] == A[i+1][j-1]: ours agrees 1/16.
    agree = np.mean(a[:-1, 1:] == a[1:, :-1])
    assert 0.05 < agree < 0.08


def test_product_is_exact_and_bounded():
    keys = WorkloadKeys.derive(keccak(b"exact"))
    n = 192
    product = reference_product(keys, n)
    a = rows(keys.a, n, 0, n).astype(np.float32)
    bt = rows(keys.b, n, 0, n).astype(np.float32)
    assert np.array_equal((a @ bt.T).astype(np.int32), product)
    assert np.abs(product).max() <= 64 * n
    assert product[7, 100] == element(keys, n, 7, 100)


@pytest.mark.parametrize("n", [0, 32, 100, 65600, True])
def test_invalid_n_is_refused(n):
    with pytest.raises(InvalidParameter):
        check_n(n)


def test_seed_inputs_must_be_32_bytes():
    with pytest.raises(InvalidParameter):
        gpu_seed(b"short", 0, bytes(32))
    with pytest.raises(InvalidParameter):
        MatrixKeys.derive(bytes(32), 2)
