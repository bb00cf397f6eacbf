"""Job models run on CPU kernels pinned to AVX2 (protocol.execution), so a provider whose CPU has
AVX-512 and a verifier whose CPU has only AVX2 compute the same bits. Without the pin an fp32
MLP's outputs moved in most elements between the two (docs/BENCHMARKS.md, "Cross-device drift"),
and a tolerance of 0 ppm (the default then) made the verifier challenge an honest provider. On a host
without AVX-512 both sides ran AVX2 already and this holds either way."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from client.sandbox import ItemBatch, Limits, child_environment, run_model
from protocol.jobs import encode_output
from protocol.execution import PINNED_KERNELS

REPO = Path(__file__).resolve().parents[2]
# How torch, MKL and oneDNN dispatch on a host whose CPU stops at AVX2.
AVX2_ONLY_HOST = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
BATCH = 32


def _job(tmp_path: Path) -> tuple[Path, list[Path]]:
    torch.manual_seed(33)
    mlp = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 512), torch.nn.GELU(),
                              torch.nn.Linear(512, 10)).eval()
    model = tmp_path / "mlp.pt"
    torch.jit.save(torch.jit.script(mlp), str(model))
    rng = np.random.default_rng(34)
    inputs = []
    for i in range(BATCH):
        inputs.append(tmp_path / f"{i}.in")
        inputs[-1].write_bytes(encode_output(rng.standard_normal(256).astype(np.float32)))
    return model, inputs


def test_a_sandboxed_run_is_bit_identical_to_one_on_an_avx2_only_host(tmp_path: Path) -> None:
    model, inputs = _job(tmp_path)
    ours = run_model(model, "torchscript", [ItemBatch(0, tuple(inputs), BATCH)], Limits(2 << 30, 60.0)).outputs
    # The other host: the same executor code (protocol.inference) in a plain child with its ISA.
    probe = ("import sys; from pathlib import Path; from protocol.inference import load_model, run_batches;"
             "from protocol.jobs import decode_output, encode_output; d = Path(sys.argv[1]);"
             f"items = [decode_output((d / f'{{i}}.in').read_bytes()).copy() for i in range({BATCH})];"
             "outs = run_batches(load_model((d / 'mlp.pt').read_bytes(), 'torchscript'), items, "
             f"{BATCH});"
             "[(d / f'{i}.theirs').write_bytes(encode_output(o)) for i, o in enumerate(outs)]")
    subprocess.run([sys.executable, "-c", probe, str(tmp_path)], cwd=REPO, check=True,
                   env={**os.environ, **AVX2_ONLY_HOST, "PYTHONPATH": str(REPO)})
    differing = [i for i in range(BATCH) if ours[i] != (tmp_path / f"{i}.theirs").read_bytes()]
    assert differing == []


def test_the_pin_reaches_every_model_child_whatever_the_parent_says(tmp_path: Path) -> None:
    parent = {"PATH": "/usr/bin", "ATEN_CPU_CAPABILITY": "avx512", "MKL_CBWR": "AUTO"}
    env = child_environment(1, tmp_path, parent)
    assert {name: env[name] for name in PINNED_KERNELS} == PINNED_KERNELS
