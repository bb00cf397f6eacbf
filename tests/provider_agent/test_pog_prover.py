"""The PoG prover on CPU: torch generation bit-identical to numpy, commitments equal to the
protocol reference, answers self-checked, the benchmark, and the `pog run` command."""

import random

import provider_agent  # noqa: F401  first: sets OMP_WAIT_POLICY before torch is loaded
import numpy as np
import pytest
import torch
from eth_utils import keccak
from pymerkle import InmemoryTree
from typer.testing import CliRunner

from protocol.errors import InvalidParameter
from protocol.merkle import MerkleTree, hash_messages
from protocol.pog.commitment import commit
from protocol.pog.workload import WorkloadKeys, gpu_seed, reference_product, rows
from provider_agent.cli import pog_app
from provider_agent.gpus import Device, UnknownDevice, cpu_device, detect, resolve
from provider_agent.keccak_native import native_hasher
from provider_agent.pog_prover import (
    InconsistentCommitment,
    PogProver,
    ProverError,
    benchmark_tflops,
    compute_device,
    exact_matmul,
    generate,
    torch_rows,
)

KEYS = WorkloadKeys.derive(keccak(b"prover"))


@pytest.mark.parametrize("n,start,stop", [(64, 0, 64), (128, 5, 77), (1024, 1000, 1024)])
def test_torch_generation_is_bit_identical_to_numpy(n, start, stop):
    for keys in (KEYS.a, KEYS.b):
        expected = torch.from_numpy(rows(keys, n, start, stop))
        assert torch.equal(torch_rows(keys, n, start, stop, "cpu"), expected)


def test_generate_gives_the_matmul_dtype_with_exact_entries():
    block = generate(KEYS.a, 128, 3, 9, "cpu", torch.float32)
    assert block.dtype == torch.float32
    assert np.array_equal(block.numpy().astype(np.int8), rows(KEYS.a, 128, 3, 9))


@pytest.mark.parametrize("n,panel", [(64, None), (192, 64), (256, 96)])
def test_committed_root_equals_protocol_reference(n, panel):
    work = compute_device(cpu_device(), 0, KEYS, n, "fp32", panel_rows=panel)
    assert work.tree.root == commit(reference_product(KEYS, n)).root
    assert work.timings.seed_to_root > 0 and work.tflops > 0


def test_int8_commitment_equals_protocol_reference():
    # int8 inputs, int32 accumulation (torch._int_mm): the fastest exact path on tensor cores
    work = compute_device(cpu_device(), 0, KEYS, 192, "int8", panel_rows=64)
    assert work.tree.root == commit(reference_product(KEYS, 192)).root


def test_int8_matmul_is_exact_at_the_largest_sums():
    a = torch.full((64, 256), -8, dtype=torch.int8)
    assert torch.equal(exact_matmul(a, a), torch.full((64, 64), 64 * 256, dtype=torch.int32))


def test_fp16_on_cpu_is_refused_as_inexact():
    a = torch.zeros((64, 64), dtype=torch.float16)
    with pytest.raises(ProverError):
        exact_matmul(a, a)


def test_round_binds_each_device_to_its_own_seed():
    devices = [Device("cpu", "cpu test", f"CPU-{i}", 0) for i in range(2)]
    prover = PogProver(devices)
    seed = keccak(b"round")
    commitment = prover.commit_round(seed, 64)
    for g, gpu in enumerate(commitment.gpus):
        keys = WorkloadKeys.derive(gpu_seed(seed, g, devices[g].uuid_hash))
        assert gpu.root == commit(reference_product(keys, 64)).root
    assert commitment.gpus[0].root != commitment.gpus[1].root


def test_answers_are_checked_against_the_committed_leaves():
    prover = PogProver([cpu_device()])
    prover.commit_round(keccak(b"round"), 64)
    answers = prover.answer_round(keccak(b"r"), 32)
    assert len(answers.gpus[0].answers) == 32
    other = compute_device(cpu_device(), 0, WorkloadKeys.derive(keccak(b"x")), 64, "fp32")
    prover.work[0].tree = other.tree  # a device whose product disagrees with the seed
    with pytest.raises(InconsistentCommitment):
        prover.answer_round(keccak(b"r"), 32)


def test_answer_before_commit_is_refused():
    with pytest.raises(ProverError):
        PogProver([cpu_device()]).answer_round(bytes(32), 32)


@pytest.mark.parametrize("dtype", ["fp32", "int8"])
def test_benchmark_measures_a_positive_rate(dtype):
    rate = benchmark_tflops("cpu", dtype, n=256, warmup=1, repeats=2)
    assert 0 < rate < 100


def test_detection_falls_back_to_the_cpu_class():
    devices = detect()
    assert devices
    if not torch.cuda.is_available():
        assert devices[0].is_cpu and devices[0].name.startswith("cpu")
    assert resolve("cpu").uuid_hash == cpu_device().uuid_hash
    with pytest.raises(UnknownDevice):
        resolve("cuda:99")


def test_pog_run_command_proves_and_names_the_class():
    result = CliRunner().invoke(pog_app, ["run", "--n", "128", "--device", "cpu", "--k", "32"])
    assert result.exit_code == 0, result.output
    assert "CPU" in result.output and "pass" in result.output
    assert "PoG TFLOPS" in result.output and "1 of 1" in result.output  # devices proven


def class_row(output):
    """The table's class cell, its wrapped lines joined (the console's width depends on the
    environment the CLI module was imported in)."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("│ class"))
    cell = [lines[start].split("│")[2].strip()]
    for line in lines[start + 1:]:
        cells = line.split("│")
        if len(cells) < 3 or cells[1].strip():
            break
        cell.append(cells[2].strip())
    return " ".join(cell)


def test_pog_run_never_names_this_cpu_a_t4(monkeypatch):
    monkeypatch.setattr("provider_agent.gpus.resolve",
                        lambda spec: Device("cpu", "Tesla T4", "GPU-t4", 0))
    result = CliRunner().invoke(pog_app, ["run", "--n", "128", "--device", "cpu"])
    row = class_row(result.output)
    assert row.startswith("unidentified") and "class is not shown" in row, result.output


def test_pog_run_says_unidentified_when_a_cpu_server_could_match(monkeypatch):
    # A CPU a thousand times this one (a fast server) claiming a T4: the rate is stood in by
    # scaling the measured one; the work passes and the class cell says why it is not a T4.
    import provider_agent.pog_local as local

    real = local.identify
    monkeypatch.setattr(local, "identify", lambda name, tflops, dtype, count:
                        real(name, max(tflops * 1000, 5.0), dtype, count))
    monkeypatch.setattr("provider_agent.gpus.resolve",
                        lambda spec: Device("cpu", "Tesla T4", "GPU-t4", 0))
    result = CliRunner(env={"COLUMNS": "200"}).invoke(pog_app, ["run", "--n", "128", "--device",
                                                               "cpu"])
    assert result.exit_code == 0, result.output
    row = class_row(result.output)
    assert "unidentified" in row and "CPU server" in row and "pass" in result.output


@pytest.mark.parametrize("args", [["--device", "cuda:99"], ["--n", "100", "--device", "cpu"],
                                  ["--n", "128", "--device", "cpu", "--dtype", "fp8"]])
def test_pog_run_rejects_bad_arguments(args):
    result = CliRunner().invoke(pog_app, ["run", *args])
    assert result.exit_code == 2


@pytest.fixture(scope="module")
def native():
    return native_hasher()  # the provider extra's unchained-keccak; its absence fails here, never skips


@pytest.mark.parametrize("size", [1, 32, 64, 134, 135, 136, 137, 256, 271, 272, 4096])
def test_native_keccak_equals_reference_at_rate_boundaries(native, size):
    data = random.Random(size).randbytes(size * 2500)
    for prefix in (b"\x00", b"\x01"):
        assert native(data, size, prefix) == hash_messages(data, size, prefix)


def test_native_tree_equals_pymerkle(native):
    rng = random.Random(3)
    for size in (1, 2, 3, 5, 64, 1000, 4097):
        leaves = [rng.randbytes(256) for _ in range(size)]
        reference = InmemoryTree(algorithm="keccak_256")
        for leaf in leaves:
            reference.append_entry(leaf)
        tree = MerkleTree(native(b"".join(leaves), 256, b"\x00"), native)
        assert tree.root == reference.get_root()
        assert tree.proof(size - 1) == list(reference.prove_inclusion(size).path[1:])


def test_native_hasher_refuses_bad_sizes(native):
    with pytest.raises(InvalidParameter):
        native(bytes(100), 3, b"\x00")
    with pytest.raises(InvalidParameter):
        native(bytes(8192), 8192, b"\x00")


def test_reference_and_native_commitments_agree(native):
    roots = {compute_device(cpu_device(), 0, KEYS, 256, "fp32", hasher=h).tree.root
             for h in (native, hash_messages)}
    assert len(roots) == 1


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@cuda
def test_cuda_generation_is_bit_identical_to_numpy():
    for start, stop in ((0, 512), (100, 2048)):
        got = torch_rows(KEYS.a, 2048, start, stop, "cuda:0").cpu()
        assert torch.equal(got, torch.from_numpy(rows(KEYS.a, 2048, start, stop)))


@cuda
@pytest.mark.parametrize("dtype", ["int8", "fp16", "bf16", "fp32"])
def test_cuda_commitment_equals_protocol_reference(dtype):
    device = resolve("cuda:0")
    work = compute_device(device, 0, KEYS, 512, dtype, panel_rows=128)
    assert work.tree.root == commit(reference_product(KEYS, 512)).root
