"""How far a job's float outputs move when the same model runs the same items another way
(issue 33): on the CPU with 1, 2 and all torch threads, in batches of 1 instead of 32, and on
each other device (a GPU: its default settings and a strict mode with deterministic algorithms
and no TF32 or reduced-precision reductions).

Needs only torch and numpy (a GPU machine has nothing else of the project), so nothing from
`protocol/` is imported: `PPM_METRIC` below is the metric of `protocol.jobs.within_tolerance`
(tests/devtools/test_bench_drift.py holds the two together).

The models are small, built with plain torch from a fixed seed (an MLP classifier, a conv net
classifier, a transformer encoder block), in fp32 and in fp16 and bf16 where the device runs
them; the items are 32 fixed inputs from a seeded generator. Each figure compares one run
with another of the same model, dtype and items:

- bit_identical: every element equal (what a tolerance of 0 ppm, the renter's default, accepts);
- max_abs: max |a - b|;
- max_ppm: max |a - b| / max(1, |b|) x 1e6, b the reference: the least `tolerancePpm` that
  accepts the pair (`protocol.jobs.within_tolerance`'s metric);
- beyond_default: the fraction of elements beyond the default tolerance (0 ppm: unequal);
- beyond: the fraction beyond each of TOLERANCES_PPM;
- argmax_flips: the fraction of rows (last axis) whose argmax differs (a classifier's label).

Run: `python -m devtools.bench_drift [cpu] [cuda:0 ...]` (prints the table).
"""

from __future__ import annotations

import copy
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

DEFAULT_TOLERANCE_PPM = 0  # the renter's default (`unchained job submit --tolerance-ppm`)
TOLERANCES_PPM = (1, 10, 100, 1_000, 10_000)
ITEMS = 32
SEED = 33
PPM_METRIC = "max |a - b| / max(1, |b|) x 1e6"


def _mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 512),
                               torch.nn.GELU(), torch.nn.Linear(512, 10))


def _convnet() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 8 * 8, 10))


def _transformer() -> torch.nn.Module:
    # eval() and no mask: torch's fused encoder fast path on every device, as a job would run it.
    return torch.nn.Sequential(torch.nn.TransformerEncoderLayer(128, 4, 256, dropout=0.0, batch_first=True),
                               torch.nn.LayerNorm(128))


@dataclass(frozen=True)
class Model:
    name: str
    build: Callable[[], torch.nn.Module]
    item_shape: tuple[int, ...]


MODELS = (
    Model("mlp 256-512-512-10", _mlp, (256,)),
    Model("convnet 3x32x32 -> 10", _convnet, (3, 32, 32)),
    Model("transformer block d128 h4, 16 tokens", _transformer, (16, 128)),
)
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def build(model: Model) -> tuple[torch.nn.Module, torch.Tensor]:
    """The model (eval mode, fp32, on the CPU) and its ITEMS inputs, the same on every call."""
    torch.manual_seed(SEED)
    module = model.build().eval()
    generator = torch.Generator().manual_seed(SEED + 1)
    items = torch.randn((ITEMS, *model.item_shape), generator=generator)
    return module, items


@dataclass(frozen=True)
class Config:
    """One way of running: device, torch threads (CPU), batch size, strict mode (GPU)."""

    label: str
    device: str
    threads: int = 1
    batch: int = ITEMS
    strict: bool = False


@contextmanager
def _settings(config: Config) -> Iterator[None]:
    """torch's global switches for `config`, restored afterwards (the bench shares its process)."""
    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    matmul_tf32 = torch.backends.cuda.matmul.allow_tf32
    cudnn_tf32 = torch.backends.cudnn.allow_tf32
    fp16_reduced = torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
    bf16_reduced = torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
    benchmark = torch.backends.cudnn.benchmark
    try:
        torch.set_num_threads(config.threads)
        if config.strict:
            torch.use_deterministic_algorithms(True, warn_only=True)
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
            torch.backends.cudnn.benchmark = False
        yield
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
        torch.backends.cuda.matmul.allow_tf32 = matmul_tf32
        torch.backends.cudnn.allow_tf32 = cudnn_tf32
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = fp16_reduced
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = bf16_reduced
        torch.backends.cudnn.benchmark = benchmark


def run(module: torch.nn.Module, items: torch.Tensor, dtype: torch.dtype, config: Config) -> np.ndarray:
    """The outputs of every item (float64 on the host) run as `config` says."""
    with _settings(config), torch.inference_mode():
        # A copy: `to` converts in place, and fp16 -> bf16 would lose what fp32 -> bf16 keeps.
        model = copy.deepcopy(module).to(device=config.device, dtype=dtype)
        x = items.to(device=config.device, dtype=dtype)
        out = torch.cat([model(x[s:s + config.batch]) for s in range(0, len(x), config.batch)])
        return out.float().cpu().numpy().astype(np.float64)


def compare(reference: np.ndarray, other: np.ndarray) -> dict[str, Any]:
    """The figures of one pair; `reference` is b in |a - b| / max(1, |b|)."""
    diff = np.abs(other - reference)
    ppm = diff / np.maximum(1.0, np.abs(reference)) * 1e6
    rows_ref = reference.reshape(-1, reference.shape[-1]).argmax(axis=-1)
    rows_other = other.reshape(-1, other.shape[-1]).argmax(axis=-1)
    return {
        "bit_identical": bool(np.array_equal(reference, other)),
        "max_abs": float(diff.max()),
        "max_ppm": float(ppm.max()),
        "beyond_default": float(np.mean(ppm > DEFAULT_TOLERANCE_PPM)),
        "beyond": {tol: float(np.mean(ppm > tol)) for tol in TOLERANCES_PPM},
        "argmax_flips": float(np.mean(rows_ref != rows_other)),
    }


def _configs(devices: list[str]) -> tuple[list[Config], list[tuple[str, str]]]:
    """The runs and the pairs compared (reference label, other label)."""
    everything = os.cpu_count() or 1
    configs = [Config("cpu t1 b32", "cpu"), Config("cpu t1 b32 again", "cpu"), Config("cpu t1 b1", "cpu", batch=1)]
    pairs = [("cpu t1 b32", "cpu t1 b32 again"), ("cpu t1 b32", "cpu t1 b1")]
    for threads in sorted({2, everything}):
        label = f"cpu t{threads} b32"
        configs.append(Config(label, "cpu", threads=threads))
        pairs.append(("cpu t1 b32", label))
    for device in devices:
        if device == "cpu":
            continue
        for strict in (False, True):
            name = f"{device}{' strict' if strict else ''}"
            configs += [Config(f"{name} b32", device, strict=strict), Config(f"{name} b32 again", device, strict=strict),
                        Config(f"{name} b1", device, batch=1, strict=strict)]
            pairs += [("cpu t1 b32", f"{name} b32"), (f"{name} b32", f"{name} b32 again"),
                      (f"{name} b32", f"{name} b1")]
    return configs, pairs


def measure_drift(devices: list[str]) -> dict[str, Any]:
    """Runs every model in every dtype the devices take under every config, and compares the
    pairs; see the module's docstring for the figures. The CPU always runs (it is the
    reference); `devices` adds others such as "cuda:0"."""
    # cuBLAS reads this when its first handle is made: the strict mode's matmuls are then
    # deterministic (a process that has already used cuBLAS keeps its own setting).
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    started = time.monotonic()
    configs, pairs = _configs(devices)
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    for model in MODELS:
        module, items = build(model)
        for dtype_name, dtype in DTYPES.items():
            outputs: dict[str, np.ndarray] = {}
            for config in configs:
                try:
                    outputs[config.label] = run(module, items, dtype, config)
                except (RuntimeError, NotImplementedError) as exc:  # a dtype the device does not run
                    skipped.append(f"{model.name} {dtype_name} {config.label}: {str(exc).splitlines()[0][:120]}")
            for reference, other in pairs:
                if reference in outputs and other in outputs:
                    rows.append({"model": model.name, "dtype": dtype_name, "reference": reference, "other": other,
                                 **compare(outputs[reference], outputs[other])})
    return {
        "devices": ["cpu", *(d for d in devices if d != "cpu")],
        "torch": torch.__version__,
        "cpu_threads_all": os.cpu_count() or 1,
        "default_tolerance_ppm": DEFAULT_TOLERANCE_PPM,
        "tolerances_ppm": list(TOLERANCES_PPM),
        "ppm_metric": PPM_METRIC,
        "rows": rows,
        "skipped": skipped,
        "seconds": round(time.monotonic() - started, 1),
    }


def markdown(result: dict[str, Any]) -> str:
    """The result as a markdown table (one row per model, dtype and pair)."""
    beyond = " | ".join(f"> {tol:,} ppm" for tol in result["tolerances_ppm"])
    lines = [f"| model | dtype | reference | other | bit-identical | max abs | max ppm "
             f"| > {result['default_tolerance_ppm']} ppm (default) | {beyond} | argmax flips |",
             "| --- | --- | --- | --- | --- | ---: | ---: | ---: | " + "---: | " * len(result["tolerances_ppm"]) + "---: |"]
    for r in result["rows"]:
        fractions = " | ".join(_fraction(r["beyond"][tol]) for tol in result["tolerances_ppm"])
        lines.append(f"| {r['model']} | {r['dtype']} | {r['reference']} | {r['other']} "
                     f"| {'yes' if r['bit_identical'] else 'no'} | {r['max_abs']:.3g} | {r['max_ppm']:,.3g} "
                     f"| {_fraction(r['beyond_default'])} | {fractions} | {_fraction(r['argmax_flips'])} |")
    lines += ["", f"ppm: {result['ppm_metric']} (the least tolerancePpm that accepts the pair); fractions of "
              f"elements beyond each tolerance; argmax flips: fraction of rows whose largest element moved. "
              f"torch {result['torch']}, all CPU threads = {result['cpu_threads_all']}, {result['seconds']} s."]
    lines += [f"Skipped: {s}" for s in result["skipped"]]
    return "\n".join(lines)


def _fraction(value: float) -> str:
    return "0" if value == 0 else f"{value:.2%}" if value >= 1e-4 else f"{value:.1e}"


def main(argv: list[str]) -> None:
    devices = argv or ["cpu", *(["cuda:0"] if torch.cuda.is_available() else [])]
    print(markdown(measure_drift(devices)))


if __name__ == "__main__":
    main(sys.argv[1:])
