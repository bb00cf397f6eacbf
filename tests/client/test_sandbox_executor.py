"""The one sandboxed model executor: the provider's job runner and the verifier's re-execution
go through it, so the verifier reproduces an honest provider's outputs bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from client.sandbox import ItemBatch, Limits, SandboxFailed, run_model
from protocol.jobs import decode_output, encode_output
from provider_agent.runner import Limits as ProviderLimits
from provider_agent.runner import run_inference
from tests.tiny_models import Tiny
from verifier.reexec import Batch, ReexecLimits, reexecute

ITEMS = [np.random.default_rng(i).standard_normal(8).astype(np.float32) for i in range(7)]


def test_provider_and_verifier_outputs_are_bit_identical(tmp_path: Path) -> None:
    model = tmp_path / "tiny.pt"
    torch.jit.save(torch.jit.script(Tiny()), str(model))
    inputs = []
    for i, item in enumerate(ITEMS):
        inputs.append(tmp_path / f"item-{i}")
        inputs[-1].write_bytes(encode_output(item))
    assert ProviderLimits is Limits  # one limits type for both
    provider = run_inference(1, model, "torchscript", inputs, 3, Limits(2 << 30, 60.0))
    verifier = reexecute(1, model.read_bytes(), "torchscript",
                         [Batch(3, tuple(encode_output(x) for x in ITEMS[3:6])), Batch(6, (encode_output(ITEMS[6]),))],
                         ReexecLimits(2 << 30, 60.0), tmp_path / "verifier")
    assert sorted(verifier) == [3, 4, 5, 6]
    for index, output in verifier.items():
        assert encode_output(output) == provider.outputs[index], index


def test_outputs_are_keyed_by_item_index(tmp_path: Path) -> None:
    model = tmp_path / "identity.pt"
    torch.jit.save(torch.jit.script(torch.nn.Identity()), str(model))
    paths = []
    for i in range(5):
        paths.append(tmp_path / f"{i}.in")
        paths[-1].write_bytes(encode_output(np.full(2, i, np.float32)))
    run = run_model(model, "torchscript", [ItemBatch(10, tuple(paths[:2]), 2), ItemBatch(20, tuple(paths[2:]), 2)],
                    Limits(2 << 30, 60.0))
    assert sorted(run.outputs) == [10, 11, 20, 21, 22]
    assert [float(decode_output(run.outputs[i])[0]) for i in (10, 11, 20, 21, 22)] == [0, 1, 2, 3, 4]


def test_a_bad_input_is_called_an_input(tmp_path: Path) -> None:
    model = tmp_path / "identity.pt"
    torch.jit.save(torch.jit.script(torch.nn.Identity()), str(model))
    junk = tmp_path / "0.in"
    junk.write_bytes(b"a text file is not an encoded array")
    with pytest.raises(SandboxFailed) as failed:
        run_model(model, "torchscript", [ItemBatch(0, (junk,), 1)], Limits(2 << 30, 60.0))
    assert failed.value.stage == "input" and "output" not in failed.value.message, failed.value.message
    assert "input item 0 is not an encoded array: input has no header line" in failed.value.message
