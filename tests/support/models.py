"""Tiny models saved into a content directory under their content hash (built here, never downloaded)."""

from __future__ import annotations

from pathlib import Path

import provider_agent  # noqa: F401  first: sets OMP_WAIT_POLICY before torch is loaded
import torch

from provider_agent.cache import DirectorySource


def put(directory: Path, data: bytes) -> str:
    return DirectorySource(directory).put(data)


def save_torchscript(module: torch.nn.Module, directory: Path) -> str:
    path = directory / "model.pt"
    torch.jit.save(torch.jit.script(module), str(path))
    return put(directory, path.read_bytes())


def save_onnx(module: torch.nn.Module, directory: Path) -> str:
    path = directory / "model.onnx"
    torch.onnx.export(module, (torch.zeros(2, 8),), str(path), dynamo=False, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    return put(directory, path.read_bytes())
