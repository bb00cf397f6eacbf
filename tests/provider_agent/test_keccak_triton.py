"""The Triton keccak (provider_agent.keccak_triton) bit-exact against the protocol's reference and
the torch keccak: on a CUDA GPU where there is one, else under Triton's interpreter on the CPU.

Skipped where triton is not installed: CPU CI, whose `dev` extra leaves it out (a ~290 MB wheel,
~1 GB installed, for a test that CUDA machines run natively; CUDA builds of torch bring it)."""

import importlib.util
import os
import sys

import provider_agent  # noqa: F401  first: sets OMP_WAIT_POLICY before torch is loaded
import numpy as np
import pytest
import torch
from eth_hash.auto import keccak as eth_keccak

if importlib.util.find_spec("triton") is None:
    pytest.skip("triton is not installed (the dev extra leaves it out; CUDA builds of torch bring "
                "it)", allow_module_level=True)
if not torch.cuda.is_available():
    # Triton reads it when a kernel is defined, and triton.language defines its own on import:
    # set before anything imports triton (keccak_torch imports keccak_triton lazily).
    if "triton.language" in sys.modules and not os.environ.get("TRITON_INTERPRET"):
        pytest.skip("triton was imported before its interpreter could be chosen: run this module "
                    "alone", allow_module_level=True)
    os.environ["TRITON_INTERPRET"] = "1"

from protocol.merkle import LEAF_PREFIX, NODE_PREFIX, MerkleTree, keccak256  # noqa: E402
from protocol.pog.commitment import chunk_hashes  # noqa: E402
from provider_agent import keccak_torch  # noqa: E402
from provider_agent.keccak_torch import (  # noqa: E402
    chosen_permutation,
    device_ready,
    hash_prefixed,
    keccak256_batch,
    leaf_hashes,
    tree_levels,
)

DEVICE = "cuda:0" if torch.cuda.is_available() else "cpu"
RNG = np.random.default_rng(11)


@pytest.fixture
def triton_keccak(monkeypatch):
    """The permutation keccak_torch chooses by default: keccak_triton's."""
    monkeypatch.delenv("UNCHAINED_TORCH_KECCAK", raising=False)
    from provider_agent import keccak_triton

    permutation = chosen_permutation()
    assert permutation is keccak_triton.permute
    return permutation


def digests(hashes: torch.Tensor) -> list[bytes]:
    return [bytes(row) for row in hashes.cpu().numpy()]


def int32s(count: int) -> np.ndarray:
    values = RNG.integers(-(2**31), 2**31, count, dtype=np.int64).astype(np.int32)
    values[:4] = [-1, 0, 2**31 - 1, -(2**31)][: min(4, count)]
    return values


@pytest.mark.parametrize("leaves", [1, 3, 129])  # 129: two programs, the second nearly empty
def test_leaf_hashes_equal_reference_and_eager(triton_keccak, leaves):
    values = int32s(64 * leaves)
    got = leaf_hashes(torch.from_numpy(values).to(DEVICE), triton_keccak)
    assert got.shape == (leaves, 32) and got.device.type == torch.device(DEVICE).type
    assert b"".join(digests(got)) == chunk_hashes(values)
    assert torch.equal(got.cpu(), leaf_hashes(torch.from_numpy(values)))  # the eager path


def test_leaf_hashes_of_an_unaligned_panel(triton_keccak):
    # a view starting 4 bytes into its storage: int64 lanes cannot view it, the kernel gets a copy
    values = int32s(64 * 3 + 1)
    panel = torch.from_numpy(values).to(DEVICE)[1:]
    assert b"".join(digests(leaf_hashes(panel, triton_keccak))) == chunk_hashes(values[1:])


def test_empty_batches(triton_keccak):
    assert leaf_hashes(torch.empty(0, dtype=torch.int32, device=DEVICE), triton_keccak).shape \
        == (0, 32)
    empty = torch.empty((0, 64), dtype=torch.uint8, device=DEVICE)
    assert hash_prefixed(empty, NODE_PREFIX, triton_keccak).shape == (0, 32)
    assert keccak256_batch(torch.empty((0, 9), dtype=torch.uint8, device=DEVICE),
                           triton_keccak).shape == (0, 32)


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 7, 8, 130, 257])
def test_merkle_levels_equal_merkle_tree_and_eager(triton_keccak, count):
    leaves = torch.from_numpy(RNG.integers(0, 256, (count, 32), dtype=np.uint8))
    levels = tree_levels(leaves.to(DEVICE), triton_keccak)
    assert bytes(levels[-1].cpu().numpy()) == MerkleTree(leaves.numpy().tobytes()).root
    eager = tree_levels(leaves)
    assert len(levels) == len(eager)
    assert all(torch.equal(a.cpu(), b) for a, b in zip(levels, eager))


def test_single_node_is_keccak_of_prefixed_pair(triton_keccak):
    pair = torch.from_numpy(RNG.integers(0, 256, (1, 64), dtype=np.uint8))
    got = digests(hash_prefixed(pair.to(DEVICE), NODE_PREFIX, triton_keccak))
    assert got == [keccak256(NODE_PREFIX + bytes(pair[0].numpy()))]
    leaf = digests(hash_prefixed(pair.repeat(1, 4).to(DEVICE), LEAF_PREFIX, triton_keccak))
    assert leaf == [keccak256(LEAF_PREFIX + bytes(pair[0].numpy()) * 4)]


# Whole lanes with no prefix take the fused kernel (0, 64, 136, 272 bytes); the others absorb in
# torch and permute with the Triton keccak-f: both are Ethereum's keccak256 for any length.
@pytest.mark.parametrize("size", [0, 1, 64, 65, 135, 136, 137, 257, 272])
def test_any_message_equals_ethereum_keccak256(triton_keccak, size):
    messages = torch.from_numpy(RNG.integers(0, 256, (5, size), dtype=np.uint8))
    got = digests(keccak256_batch(messages.to(DEVICE), triton_keccak))
    assert got == [eth_keccak(bytes(m)) for m in messages.numpy()]


def test_two_byte_prefix_takes_the_permutation_path(triton_keccak):
    messages = torch.from_numpy(RNG.integers(0, 256, (3, 64), dtype=np.uint8))
    got = digests(hash_prefixed(messages.to(DEVICE), b"\x01\x02", triton_keccak))
    assert got == [keccak256(b"\x01\x02" + bytes(m)) for m in messages.numpy()]


def test_known_vector_all_ones():
    from provider_agent.keccak_triton import absorb

    empty = absorb(torch.empty((1, 0), dtype=torch.int64, device=DEVICE), b"")
    assert digests(empty)[0].hex() == (
        "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470")
    ones = torch.full((2, 17), -1, dtype=torch.int64, device=DEVICE)  # 136 bytes of 0xff
    assert digests(absorb(ones, b"")) == [keccak256(b"\xff" * 136)] * 2


def test_device_check_passes_for_the_default_and_names_bad_choices(monkeypatch):
    check = device_ready.__wrapped__  # uncached
    monkeypatch.delenv("UNCHAINED_TORCH_KECCAK", raising=False)
    assert check(DEVICE)
    monkeypatch.setenv("UNCHAINED_TORCH_KECCAK", "eager")
    assert chosen_permutation() is keccak_torch.permute
    monkeypatch.setenv("UNCHAINED_TORCH_KECCAK", "cuda")
    assert not check(DEVICE)  # an unknown choice: logged, and the host hashes
