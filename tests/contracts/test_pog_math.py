"""PogMath against PROTOCOL.md: the reference in proofs_support and the golden vectors of
tests/vectors/pog.json (when present), plus the gas of one element recomputation at n=4096."""

import json
from pathlib import Path

import brownie
import pytest
from brownie import ProofLibrariesHarness, accounts

import proofs_support as ref

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "pog.json"
SEED = bytes.fromhex("5a" * 32)


@pytest.fixture(scope="module")
def harness():
    return ProofLibrariesHarness.deploy({"from": accounts[0]})


def _pog_cases():
    if not VECTORS.exists():
        pytest.skip("tests/vectors/pog.json not written yet")
    return json.loads(VECTORS.read_text())["cases"]


def test_gpu_seed_binds_round_seed_gpu_index_and_uuid(harness):
    uuid = bytes.fromhex("11" * 32)
    expected = ref.gpu_seed(SEED, 3, uuid)
    assert bytes(harness.gpuSeed(SEED, 3, uuid)) == expected
    assert bytes(harness.gpuSeed(SEED, 2, uuid)) != expected


def test_keys_and_words_match_reference(harness):
    for m in (0, 1):
        assert tuple(harness.keys(SEED, m)) == ref.keys(SEED, m)
        for w in (0, 1, 7, 8, 511, 2**20 + 3, 2**29 - 1):
            assert harness.word(SEED, m, w) == ref.word(SEED, m, w)


def test_every_element_matches_reference_product_at_n64(harness):
    n = 64
    c = ref.product(SEED, n).tolist()
    for i, j in [(0, 0), (0, 63), (63, 0), (63, 63), (17, 42), (42, 17), (31, 32)]:
        assert harness.element(SEED, n, i, j) == c[i][j]
    # A full row too, so that every column's nibble position is exercised.
    assert [harness.element(SEED, n, 5, j) for j in range(n)] == c[5]


def test_element_rejects_bad_n_and_out_of_range_index(harness, custom_error):
    for n in (32, 96 + 1, 65536 + 64):
        with brownie.reverts(custom_error("PogMathBadN", n)):
            harness.element(SEED, n, 0, 0)
    with brownie.reverts(custom_error("PogMathIndexOutOfRange", 64, 0, 64)):
        harness.element(SEED, 64, 64, 0)
    with brownie.reverts(custom_error("PogMathIndexOutOfRange", 0, 64, 64)):
        harness.element(SEED, 64, 0, 64)


def test_chunk_element_reads_big_endian_int32(harness, custom_error):
    c = ref.product(SEED, 64)
    flat = c.reshape(-1).tolist()
    chunk = ref.chunks(c)[10]
    row, col = harness.chunkPosition(10, 37, 64)
    assert (row, col) == (10, 37)
    assert harness.chunkElement(chunk, 37) == flat[row * 64 + col]
    negative = ref.with_element(chunk, 0, -123456)
    assert harness.chunkElement(negative, 0) == -123456
    with brownie.reverts(custom_error("PogMathBadChunkLength", 255)):
        harness.chunkElement(chunk[:255], 0)
    with brownie.reverts(custom_error("PogMathBadElementOffset", 64)):
        harness.chunkElement(chunk, 64)


def test_challenge_indices_match_reference(harness):
    randomness, root = bytes.fromhex("ab" * 32), bytes.fromhex("cd" * 32)
    indices = ref.challenge_indices(randomness, root, 32, 4096 * 4096 // 64)
    assert [harness.challengeIndex(randomness, root, t, 4096 * 4096 // 64) for t in range(32)] == indices


def test_golden_vectors_keys_words_elements(harness):
    for case in _pog_cases():
        seed = case["gpu_seed"]
        assert harness.gpuSeed(case["round_seed"], case["gpu_index"], case["uuid_hash"]).hex() == seed[2:]
        assert list(harness.keys(seed, 0)) == case["keys"]["a"]
        assert list(harness.keys(seed, 1)) == case["keys"]["b"]
        for w in case["words"]:
            assert harness.word(seed, w["matrix"], w["w"]) == w["value"]
        for e in case["elements"]:
            assert harness.element(seed, case["n"], e["i"], e["j"]) == e["value"]


def test_golden_vectors_chunks_and_indices(harness):
    for case in _pog_cases():
        if "chunks" not in case:
            continue
        n, count = case["n"], case["leaf_count"]
        assert count == n * n // 64
        for chunk in case["chunks"]:
            data = bytes.fromhex(chunk["data"][2:])
            leaf = ref.leaf_hash(data)
            assert harness.verify(chunk["siblings"], case["root"], leaf, chunk["index"], count)
            for offset in (0, 31, 63):
                row, col = harness.chunkPosition(chunk["index"], offset, n)
                assert harness.chunkElement(data, offset) == harness.element(case["gpu_seed"], n, row, col)
        ch = case["challenge"]
        assert [
            harness.challengeIndex(ch["randomness"], case["root"], t, count) for t in range(ch["k"])
        ] == ch["indices"]


def test_block_randomness_is_the_hash_of_the_next_block_within_256_blocks(harness, custom_error):
    # eth_call on anvil runs with block.number = the latest block.
    recorded = brownie.chain.height
    with brownie.reverts(custom_error("BlockRandomnessNotYetAvailable", recorded + 1, recorded)):
        harness.hashAfter(recorded)
    brownie.chain.mine(2)
    assert bytes(harness.hashAfter(recorded)) == bytes(brownie.chain[recorded + 1].hash)
    brownie.chain.mine(255)  # block recorded+1 is now 256 blocks older than the latest: still served
    assert bytes(harness.hashAfter(recorded)) == bytes(brownie.chain[recorded + 1].hash)
    brownie.chain.mine()
    height = brownie.chain.height
    with brownie.reverts(custom_error("BlockRandomnessExpired", recorded + 1, height)):
        harness.hashAfter(recorded)


def test_gas_of_one_element_at_n4096(harness):
    n = 4096
    tx = harness.elementGas(SEED, n, 4095, 1234, {"from": accounts[0]})
    value = tx.events["ElementMeasured"]["value"]
    a_row = ref.matrix_row(SEED, 0, n, 4095)
    b_row = ref.matrix_row(SEED, 1, n, 1234)
    assert value == sum(int(a) * int(b) for a, b in zip(a_row, b_row))
    print(f"\nGAS element recomputation n=4096: {tx.gas_used} (transaction total)")


def test_element_at_largest_n_matches_reference_and_fits_a_block(harness):
    n = 65536
    # Estimated, not sent: a transaction this heavy is mined while brownie polls for it, and
    # brownie then sometimes sees the nonce used before the receipt ("Tx dropped").
    gas = harness.elementGas.estimate_gas(SEED, n, n - 1, 12345, {"from": accounts[0]})
    assert gas <= 6_000_000
    a_row = ref.matrix_row(SEED, 0, n, n - 1)
    b_row = ref.matrix_row(SEED, 1, n, 12345)
    assert harness.element(SEED, n, n - 1, 12345, {"gas_limit": 6_000_000}) == sum(a * b for a, b in zip(a_row, b_row))
    print(f"\nGAS element recomputation n=65536: {gas} (transaction total, estimated)")
