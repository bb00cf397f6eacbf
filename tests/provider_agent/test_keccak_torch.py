"""The torch keccak (provider_agent.keccak_torch) against the protocol's reference: digests,
PoG leaf hashes and Merkle roots bit-exact on CPU; the chosen kernel on a GPU when present (the
Triton one by default: tests/provider_agent/test_keccak_triton.py)."""

import importlib.util

import provider_agent  # noqa: F401  first: sets OMP_WAIT_POLICY before torch is loaded
import numpy as np
import pytest
import torch
from eth_hash.auto import keccak as eth_keccak

from protocol.errors import InvalidParameter
from protocol.merkle import MerkleTree, hash_messages, keccak256
from protocol.pog.commitment import chunk_hashes, commit
from protocol.pog.workload import WorkloadKeys, reference_product
from provider_agent import keccak_torch
from provider_agent.gpus import resolve
from provider_agent.keccak_torch import (
    compiled_permutation,
    device_ready,
    keccak256_batch,
    leaf_hashes,
    torch_hasher,
    tree_levels,
)
from provider_agent.pog_prover import compute_device

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
RNG = np.random.default_rng(7)


def random_bytes(count: int, size: int) -> torch.Tensor:
    return torch.from_numpy(RNG.integers(0, 256, (count, size), dtype=np.uint8))


def digests(hashes: torch.Tensor) -> list[bytes]:
    return [bytes(row) for row in hashes.cpu().numpy()]


@pytest.mark.parametrize("size", [0, 1, 64, 65, 135, 136, 137, 257, 272, 300])
def test_digests_equal_ethereum_keccak256(size):
    messages = random_bytes(5, size)
    got = digests(keccak256_batch(messages))
    assert got == [eth_keccak(bytes(m)) for m in messages.numpy()]


def test_known_vector_and_all_ones():
    # keccak256("") as Ethereum defines it (SHA3-256("") would be a7ffc6f8...)
    empty = keccak256_batch(torch.empty((1, 0), dtype=torch.uint8))
    assert digests(empty)[0].hex() == (
        "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470")
    ones = torch.full((3, 200), 0xFF, dtype=torch.uint8)  # every lane negative as int64
    assert digests(keccak256_batch(ones)) == [keccak256(b"\xff" * 200)] * 3
    assert keccak256_batch(torch.empty((0, 9), dtype=torch.uint8)).shape == (0, 32)


def test_random_batch_crossing_batch_boundaries(monkeypatch):
    monkeypatch.setitem(keccak_torch._BATCH, "cpu", 7)  # 30 messages: five batches
    messages = random_bytes(30, 257)
    assert b"".join(digests(keccak256_batch(messages))) == hash_messages(
        messages.numpy().tobytes(), 257, b"")


def test_leaf_hashes_equal_commitment_chunk_hashes():
    values = RNG.integers(-(2**31), 2**31, (6, 192), dtype=np.int64).astype(np.int32)
    values[0, :4] = [-1, 0, 2**31 - 1, -(2**31)]
    got = leaf_hashes(torch.from_numpy(values))
    assert got.shape == (18, 32)
    assert b"".join(digests(got)) == chunk_hashes(values)


def test_leaf_hashes_refuse_partial_chunks_and_other_dtypes():
    with pytest.raises(InvalidParameter):
        leaf_hashes(torch.zeros(65, dtype=torch.int32))
    with pytest.raises(InvalidParameter):
        leaf_hashes(torch.zeros(64, dtype=torch.float32))


@pytest.mark.parametrize("count", [*range(1, 41), 333])
def test_tree_levels_match_merkle_tree(count):
    leaves = random_bytes(count, 32)
    reference = MerkleTree(leaves.numpy().tobytes())
    levels = tree_levels(leaves)
    assert bytes(levels[-1].numpy()) == reference.root
    assert levels[-1].shape == (1, 32)


def test_torch_hasher_builds_the_same_tree():
    leaves = random_bytes(77, 32).numpy().tobytes()
    assert MerkleTree(leaves, torch_hasher("cpu")).root == MerkleTree(leaves).root


@cuda
def test_cuda_compiled_hashing_is_bit_exact(monkeypatch):
    monkeypatch.setenv("UNCHAINED_TORCH_KECCAK", "compiled")
    assert device_ready.__wrapped__("cuda:0")
    permutation = compiled_permutation()
    values = RNG.integers(-(2**24), 2**24, (128, 512), dtype=np.int64).astype(np.int32)
    on_device = torch.from_numpy(values).to("cuda:0")
    leaves = leaf_hashes(on_device, permutation)
    assert b"".join(digests(leaves)) == chunk_hashes(values)
    reference = MerkleTree(chunk_hashes(values))
    assert bytes(tree_levels(leaves, permutation)[-1].cpu().numpy()) == reference.root
    messages = random_bytes(1000, 300)
    got = digests(keccak256_batch(messages.to("cuda:0"), permutation))
    assert got == [eth_keccak(bytes(m)) for m in messages.numpy()]


def test_device_check_refuses_a_wrong_kernel(monkeypatch):
    check = device_ready.__wrapped__  # uncached: the real check compiles, too slow for CPU CI
    monkeypatch.setenv("UNCHAINED_TORCH_KECCAK", "compiled")
    monkeypatch.setattr(keccak_torch, "compiled_permutation", lambda: keccak_torch.permute)
    assert check("cpu")
    monkeypatch.setattr(keccak_torch, "compiled_permutation", lambda: lambda state: state)
    assert not check("cpu")

    def broken() -> None:
        raise RuntimeError("no triton")

    monkeypatch.setattr(keccak_torch, "compiled_permutation", broken)
    assert not check("cpu")


def test_without_triton_the_default_choice_leaves_hashing_to_the_host(monkeypatch):
    if importlib.util.find_spec("triton") is not None:
        pytest.skip("triton is installed here: tests/provider_agent/test_keccak_triton.py")
    monkeypatch.delenv("UNCHAINED_TORCH_KECCAK", raising=False)
    with pytest.raises(ImportError, match="triton"):
        keccak_torch.chosen_permutation()
    assert not device_ready.__wrapped__("cpu")
    monkeypatch.setenv("UNCHAINED_TORCH_KECCAK", "eager")
    assert device_ready.__wrapped__("cpu")


@cuda
def test_cuda_prover_commits_on_the_device():
    assert device_ready("cuda:0")  # so compute_device below hashes on the GPU
    keys = WorkloadKeys.derive(keccak256(b"keccak torch"))
    work = compute_device(resolve("cuda:0"), 0, keys, 512, "fp16", panel_rows=192)
    assert work.tree.root == commit(reference_product(keys, 512)).root
