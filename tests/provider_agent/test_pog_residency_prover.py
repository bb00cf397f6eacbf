"""Residency fills on the prover (provider_agent/pog_residency.py), CPU path: the torch build is
block for block the protocol's reference, the committed root is the full tree's, answers check
out, each simulated device builds its own fill within its memory."""

import provider_agent  # noqa: F401  first: sets OMP_WAIT_POLICY before torch is loaded
import numpy as np
import pytest
import torch

from protocol.merkle import keccak256
from protocol.pog.messages import decode_fills, decode_probes, encode_fills, encode_probes
from protocol.pog.residency import (
    PROBES,
    FillParams,
    check_probes,
    fill_tree,
    probe_indices,
    reference_fill,
)
from protocol.pog.workload import gpu_seed
from provider_agent import keccak_torch
from provider_agent.gpus import Device
from provider_agent.pog_residency import (
    FillError,
    ResidencyProver,
    build_fill,
    host_hasher,
    ref_indices,
)

ROUND = keccak256(b"residency-round")


def device(i, memory_bytes=0):
    return Device("cpu", "NVIDIA H100 80GB HBM3", f"GPU-sim-{i}", memory_bytes)


@pytest.mark.parametrize("params", [FillParams(16, 40, 1), FillParams(32, 24, 3),
                                    FillParams(2048, 3, 1)], ids=str)
def test_the_torch_fill_is_the_reference_and_commits_to_the_full_trees_root(params):
    seed = gpu_seed(ROUND, 0, device(0).uuid_hash)
    fill = build_fill(device(0), 0, seed, params)
    reference = reference_fill(seed, params)
    assert np.array_equal(fill.blocks.numpy(), reference)
    tree = fill_tree(reference)
    assert fill.root == tree.root
    # proofs from the kept subtree roots are the full tree's own
    indices = probe_indices(keccak256(b"R"), fill.root, params) + [0, params.blocks - 1]
    for opening in fill.open(indices):
        assert list(opening.siblings) == tree.proof(opening.index)
        assert opening.block == bytes(reference[opening.index])
    check_probes(seed, params, fill.root, indices, fill.answer(indices))


def test_ref_indices_in_torch_match_the_protocol_at_the_extremes():
    from protocol.pog.residency import ref_indices as reference

    prev = np.random.default_rng(3).integers(0, 256, (64, 32), dtype=np.uint8)
    prev[0], prev[1] = 0xFF, 0
    for step, lanes in ((1, 64), (17, 2**18), (2**14 - 1, 2**18)):
        got = ref_indices(torch.from_numpy(prev), step, lanes, host_hasher())
        assert np.array_equal(got.numpy(), reference(prev, step, lanes))


def test_a_fill_that_does_not_fit_the_device_is_refused():
    params = FillParams(16, 40, 1)
    with pytest.raises(FillError, match="does not fit"):
        build_fill(device(0, memory_bytes=params.bytes - 1), 0, bytes(32), params)


def test_every_simulated_device_holds_its_own_fill_and_answers_the_probe():
    devices = [device(i, memory_bytes=64 * 1024) for i in range(3)]
    params = FillParams(16, 32, 2)
    prover = ResidencyProver(devices)
    fills = decode_fills(encode_fills(prover.commit_fills(ROUND, params)), 3)
    assert [f.gpu_index for f in fills.gpus] == [0, 1, 2]
    assert len({f.root for f in fills.gpus}) == 3  # one fill per device, each its own
    randomness = keccak256(b"probe")
    answers = decode_probes(encode_probes(prover.answer_probes(randomness)), 3, PROBES)
    for g, (fill, gpu) in enumerate(zip(fills.gpus, answers.gpus)):
        indices = probe_indices(randomness, fill.root, params)
        check_probes(gpu_seed(ROUND, g, devices[g].uuid_hash), params, fill.root, indices,
                     gpu.probes)


def test_answering_before_any_fill_is_refused():
    with pytest.raises(FillError, match="before commit_fills"):
        ResidencyProver([device(0)]).answer_probes(bytes(32))


def test_the_torch_keccak_path_a_gpu_uses_builds_the_same_fill():
    # CUDA devices hash with keccak_torch (compiled there); its eager form on the CPU must give
    # the same blocks, root and answers as the native keccak the CPU path uses.
    params = FillParams(8, 4, 2)
    seed = gpu_seed(ROUND, 0, device(0).uuid_hash)
    fill = build_fill(device(0), 0, seed, params,
                      hasher=lambda messages, prefix: keccak_torch.hash_prefixed(messages, prefix))
    assert np.array_equal(fill.blocks.numpy(), reference_fill(seed, params))
    indices = probe_indices(keccak256(b"R"), fill.root, params)
    check_probes(seed, params, fill.root, indices, fill.answer(indices))


def test_the_gpu_bench_hook_builds_commits_and_probes_a_fill_on_the_cpu():
    from devtools.bench_residency import residency_probe_bench

    result = residency_probe_bench("cpu", 256 * 1024)
    assert (result["lanes"], result["steps"], result["fill_bytes"]) == (1024, 8, 256 * 1024)
    assert result["keccak"] == "native (host)"
    assert min(result[k] for k in ("build_s", "commit_s", "probe_s", "verify_s")) > 0
    assert result["build_permutations_per_s"] > 0


def test_pog_run_on_several_devices_builds_and_probes_their_fills():
    from provider_agent.pog_local import local_round

    box = [Device("cpu", "cpu sim", f"CPU-sim-{i}", 1 << 20) for i in range(2)]
    results = local_round(box, {0: 128, 1: 128}, "fp32", 32, fill=FillParams(16, 16, 1))
    for r in results:
        assert r.failure is None and r.resident and r.probe_s > 0
        assert (r.gpu_class, r.proven_devices) == ("CPU", 2)
    small = [Device("cpu", "cpu sim", f"CPU-small-{i}", 1024) for i in range(2)]
    results = local_round(small, {0: 128, 1: 128}, "fp32", 32, fill=FillParams(16, 16, 1))
    assert all("does not fit" in r.failure and r.resident is False for r in results)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_cuda_fill_hashed_on_the_device_is_the_reference():
    assert keccak_torch.device_ready("cuda:0")  # so build_fill hashes on the GPU
    params = FillParams(1024, 8, 3)
    gpu = Device("cuda:0", "cuda", "GPU-cuda-0", 0)
    seed = gpu_seed(ROUND, 0, gpu.uuid_hash)
    fill = build_fill(gpu, 0, seed, params)
    reference = reference_fill(seed, params)
    assert np.array_equal(fill.blocks.cpu().numpy(), reference)
    assert fill.root == fill_tree(reference).root
    indices = probe_indices(keccak256(b"R"), fill.root, params)
    check_probes(seed, params, fill.root, indices, fill.answer(indices))
