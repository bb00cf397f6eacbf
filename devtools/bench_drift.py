"""How far a job's float outputs move when the same model runs the same items another way
(issue 33): on the CPU with 1, 2 and all torch threads, in batches of 1 instead of 32, and on
each other device (a GPU: its default settings and a strict mode with deterministic algorithms
and no TF32 or reduced-precision reductions).

Needs only torch and numpy (a GPU machine has nothing else of the project), so nothing from
`protocol/` is imported: `PPM_METRIC` below is the metric of `protocol.jobs.within_tolerance`
(tests/cli/test_bench_drift.py holds the two together).

The models are small, built with plain torch from a fixed seed (an MLP classifier, a conv net
classifier, a transformer encoder block), in fp32 and in fp16 and bf16 where the device runs
them; the items are 32 fixed inputs from a seeded generator. Each figure compares one run
with another of the same model, dtype and items:

- bit_identical: every element equal (what a tolerance of 0 ppm accepts);
- max_abs: max |a - b|;
- max_ppm: max |a - b| / max(1, |b|) x 1e6, b the reference: the least `tolerancePpm` that
  accepts the pair (`protocol.jobs.within_tolerance`'s metric);
- beyond_default: the fraction of elements beyond the renter's default tolerance (10 ppm);
- beyond: the fraction beyond each of TOLERANCES_PPM;
- argmax_flips: the fraction of rows (last axis) whose argmax differs (a classifier's label).

Run: `python -m devtools.bench_drift [cpu] [cuda:0 ...]` (prints the table).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

DEFAULT_TOLERANCE_PPM = 10  # the renter's default (protocol.execution, held equal by the tests)
TOLERANCES_PPM = (1, 10, 100, 1_000, 10_000)
ITEMS = 32
SEED = 33
COST_RUNS = 20
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


# A CPU that has no AVX-512 (ATen, MKL and oneDNN capped at AVX2, as they dispatch on such a host).
AVX2_ONLY_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
# The kernels pinned to AVX2 on every host (protocol.execution.PINNED_KERNELS, held equal by the tests).
PINNED_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
REFERENCE = "cpu t1 b32"
AVX2_ONLY, PINNED = f"{REFERENCE} avx2-only cpu", f"{REFERENCE} pinned"
SUBPROCESS_CONFIGS = {AVX2_ONLY: AVX2_ONLY_ENV, PINNED: PINNED_ENV}
REPO_ROOT = Path(__file__).resolve().parent.parent


def _configs(devices: list[str]) -> tuple[list[Config], list[tuple[str, str]]]:
    """The runs in this process and the pairs compared (reference label, other label)."""
    everything = os.cpu_count() or 1
    configs = [Config(REFERENCE, "cpu"), Config(f"{REFERENCE} again", "cpu"), Config("cpu t1 b1", "cpu", batch=1)]
    pairs = [(REFERENCE, f"{REFERENCE} again"), (REFERENCE, "cpu t1 b1")]
    for threads in sorted({2, everything}):
        label = f"cpu t{threads} b32"
        configs.append(Config(label, "cpu", threads=threads))
        pairs.append((REFERENCE, label))
    pairs += [(REFERENCE, label) for label in SUBPROCESS_CONFIGS]
    for device in devices:
        if device == "cpu":
            continue
        for strict in (False, True):
            name = f"{device}{' strict' if strict else ''}"
            configs += [Config(f"{name} b32", device, strict=strict), Config(f"{name} b32 again", device, strict=strict),
                        Config(f"{name} b1", device, batch=1, strict=strict)]
            pairs += [(REFERENCE, f"{name} b32"), (f"{name} b32", f"{name} b32 again"),
                      (f"{name} b32", f"{name} b1")]
    return configs, pairs


def reference_run(directory: str, timed: str) -> None:
    """In a child whose environment pins or caps the kernels (torch reads it once, when it
    loads): every model's outputs in every dtype the CPU runs, as REFERENCE runs them, into
    outputs.npz (keys "model|dtype"), and with `timed` == "1" their times into seconds.json."""
    outputs = {}
    for model in MODELS:
        module, items = build(model)
        for dtype_name, dtype in DTYPES.items():
            try:
                outputs[f"{model.name}|{dtype_name}"] = run(module, items, dtype, Config(REFERENCE, "cpu"))
            except (RuntimeError, NotImplementedError):
                continue  # skipped in the parent too, and reported there
    np.savez(Path(directory) / "outputs.npz", **outputs)  # type: ignore[arg-type]
    if timed == "1":
        (Path(directory) / "seconds.json").write_text(json.dumps(reference_times()))


def _child(env: dict[str, str], timed: bool) -> tuple[dict[str, np.ndarray], dict[str, float] | None]:
    """reference_run in a child with `env` added: its outputs, and its times when `timed`."""
    with tempfile.TemporaryDirectory() as tmp:
        child_env = {**os.environ, **env, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT),
                                                                                       os.environ.get("PYTHONPATH")]))}
        subprocess.run([sys.executable, "-c", "import sys; from devtools.bench_drift import reference_run; "
                        "reference_run(*sys.argv[1:])", tmp, "1" if timed else "0"],
                       env=child_env, cwd=REPO_ROOT, check=True)
        with np.load(Path(tmp) / "outputs.npz") as saved:
            outputs = {key: saved[key] for key in saved.files}
        return outputs, json.loads((Path(tmp) / "seconds.json").read_text()) if timed else None


def reference_times() -> dict[str, float]:
    """Seconds per batch of ITEMS for every model in fp32 and bf16 on one CPU thread with this
    process's kernels (the best of COST_RUNS after a warm-up: the least disturbed by other load)."""
    seconds = {}
    for model in MODELS:
        module, items = build(model)
        for dtype_name in ("fp32", "bf16"):
            dtype = DTYPES[dtype_name]
            with _settings(Config(REFERENCE, "cpu")), torch.inference_mode():
                runnable, x = copy.deepcopy(module).to(dtype=dtype), items.to(dtype=dtype)
                runnable(x)
                times = []
                for _ in range(COST_RUNS):
                    began = time.perf_counter()
                    runnable(x)
                    times.append(time.perf_counter() - began)
            seconds[f"{model.name}|{dtype_name}"] = min(times)
    return seconds


def pinning_cost(pinned: dict[str, float]) -> dict[str, dict[str, float]]:
    """Per model and dtype: seconds per batch of 32 on one CPU thread with this process's (the
    host's) kernels and with the pinned ones, and their ratio (the execution mode's price here)."""
    host = reference_times()
    return {key: {"host s": host[key], "pinned s": pinned[key], "pinned / host": pinned[key] / host[key]}
            for key in host}


def flippable(reference: np.ndarray, tolerance_ppm: int) -> float:
    """The fraction of rows (last axis) whose argmax a cheat could move while every element stays
    within `tolerance_ppm` of `reference`: the top two are within the sum of their allowances."""
    rows = reference.reshape(-1, reference.shape[-1])
    top2 = np.sort(rows, axis=-1)[:, -2:]
    allowance = tolerance_ppm / 1e6 * np.maximum(1.0, np.abs(top2)).sum(axis=-1)
    return float(np.mean(top2[:, 1] - top2[:, 0] <= allowance))


# Reductions of one item over many elements (a global average pool of a large feature map, a sum
# over a long signal): ATen splits those across its threads once they pass 2^22 elements.
REDUCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "sum over 2^22 elements": lambda x: x.reshape(1, -1).sum(-1),
    "mean over 64x256x256": lambda x: x.reshape(1, 64, 256, 256).mean((1, 2, 3)),
    "softmax over 2^22": lambda x: x.reshape(1, -1).softmax(-1),
    "sum rows of 32x2^17": lambda x: x.reshape(32, -1).sum(-1),
}


def reduction_threads(inputs: int = 8) -> dict[str, dict[int, str]]:
    """Per long reduction over `inputs` random items: on how many the result on 2 and on all
    threads differs from 1 thread, and by how much at most."""
    items = [torch.randn(1 << 22, generator=torch.Generator().manual_seed(SEED + i)) for i in range(inputs)]
    results: dict[str, dict[int, str]] = {}
    for name, reduce in REDUCTIONS.items():
        outputs = {}
        for threads in sorted({1, 2, os.cpu_count() or 1}):
            with _settings(Config(REFERENCE, "cpu", threads=threads)), torch.inference_mode():
                outputs[threads] = [reduce(x) for x in items]
        results[name] = {}
        for threads in outputs:
            if threads != 1:
                diffs = [float((a - b).abs().max()) for a, b in zip(outputs[threads], outputs[1], strict=True)]
                results[name][threads] = f"{sum(d > 0 for d in diffs)}/{inputs} differ, max {max(diffs):.3g}"
    return results


def cpu_model() -> str:
    """The CPU's name and the instruction sets its kernels could pick (what the pin overrides)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown"
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    flags = next((set(line.split(":", 1)[1].split()) for line in info.splitlines() if line.startswith("flags")), set())
    wanted = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_fp16")
    return f"{name} ({', '.join(f for f in wanted if f in flags) or 'no AVX2'})"


def _digest(values: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest()[:16]


def measure_drift(devices: list[str]) -> dict[str, Any]:
    """Runs every model in every dtype the devices take under every config, and compares the
    pairs; see the module's docstring for the figures. The CPU always runs (it is the
    reference); `devices` adds others such as "cuda:0". Also: each lower precision against
    fp32 on the same device (a provider that runs a cheaper dtype than the model's), the rows
    of each fp32 model a cheat could flip within each tolerance, and digests of the
    reference's and the pinned mode's outputs (to compare across machines)."""
    # cuBLAS reads this when its first handle is made: the strict mode's matmuls are then
    # deterministic (a process that has already used cuBLAS keeps its own setting).
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    started = time.monotonic()
    configs, pairs = _configs(devices)
    children = {label: _child(env, timed=label == PINNED) for label, env in SUBPROCESS_CONFIGS.items()}
    in_children = {label: outputs for label, (outputs, _) in children.items()}
    rows: list[dict[str, Any]] = []
    downcasts: list[dict[str, Any]] = []
    flips: list[dict[str, Any]] = []
    digests: dict[str, dict[str, str]] = {REFERENCE: {}, PINNED: {}}
    skipped: list[str] = []
    for model in MODELS:
        module, items = build(model)
        outputs: dict[tuple[str, str], np.ndarray] = {}
        for dtype_name, dtype in DTYPES.items():
            for config in configs:
                try:
                    outputs[dtype_name, config.label] = run(module, items, dtype, config)
                except (RuntimeError, NotImplementedError) as exc:  # a dtype the device does not run
                    skipped.append(f"{model.name} {dtype_name} {config.label}: {str(exc).splitlines()[0][:120]}")
            for label, saved in in_children.items():
                if f"{model.name}|{dtype_name}" in saved:
                    outputs[dtype_name, label] = saved[f"{model.name}|{dtype_name}"]
            for reference, other in pairs:
                if (dtype_name, reference) in outputs and (dtype_name, other) in outputs:
                    rows.append({"model": model.name, "dtype": dtype_name, "reference": reference, "other": other,
                                 **compare(outputs[dtype_name, reference], outputs[dtype_name, other])})
            for label in digests:
                if (dtype_name, label) in outputs:
                    digests[label][f"{model.name}|{dtype_name}"] = _digest(outputs[dtype_name, label])
        for label in [c.label for c in configs if c.batch == ITEMS and "again" not in c.label
                      and (c.device != "cpu" or c.label == REFERENCE)]:
            for low in ("fp16", "bf16"):
                if ("fp32", label) in outputs and (low, label) in outputs:
                    downcasts.append({"model": model.name, "dtype": f"{low} for fp32", "reference": label,
                                      "other": label, **compare(outputs["fp32", label], outputs[low, label])})
        flips.append({"model": model.name,
                      "flippable": {tol: flippable(outputs["fp32", REFERENCE], tol) for tol in TOLERANCES_PPM}})
    reductions, cost = reduction_threads(), pinning_cost(children[PINNED][1] or {})
    # The short parts first: a reader that cuts the JSON short still sees what moved.
    return {
        "summary": summary(rows + downcasts),
        "devices": ["cpu", *(d for d in devices if d != "cpu")],
        "torch": torch.__version__,
        "cpu_threads_all": os.cpu_count() or 1,
        "cpu": cpu_model(),
        "seconds": round(time.monotonic() - started, 1),
        "skipped": skipped,
        "reduction_threads": reductions,
        "pinning_cost": cost,
        "digests": digests,
        "flippable": flips,
        "default_tolerance_ppm": DEFAULT_TOLERANCE_PPM,
        "tolerances_ppm": list(TOLERANCES_PPM),
        "ppm_metric": PPM_METRIC,
        "rows": rows,
        "downcasts": downcasts,
    }


def summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per pair ("other / reference") and dtype: the largest max ppm over the models (0: all
    bit-identical), so the result's first lines say what moved."""
    worst: dict[str, dict[str, float]] = {}
    for r in rows:
        pair = worst.setdefault(f"{r['other']} / {r['reference']}", {})
        pair[r["dtype"]] = max(pair.get(r["dtype"], 0.0), round(r["max_ppm"], 3))
    return worst


def markdown(result: dict[str, Any]) -> str:
    """The result as markdown: the pairs (then each lower precision against fp32), the rows a
    cheat could flip, the digests."""
    tolerances = result["tolerances_ppm"]
    beyond = " | ".join(f"> {tol:,} ppm" for tol in tolerances)
    lines = [f"| model | dtype | reference | other | bit-identical | max abs | max ppm "
             f"| > {result['default_tolerance_ppm']} ppm (default) | {beyond} | argmax flips |",
             "| --- | --- | --- | --- | --- | ---: | ---: | ---: | " + "---: | " * len(tolerances) + "---: |"]
    for r in result["rows"] + result["downcasts"]:
        fractions = " | ".join(_fraction(r["beyond"][tol]) for tol in tolerances)
        lines.append(f"| {r['model']} | {r['dtype']} | {r['reference']} | {r['other']} "
                     f"| {'yes' if r['bit_identical'] else 'no'} | {r['max_abs']:.3g} | {r['max_ppm']:,.3g} "
                     f"| {_fraction(r['beyond_default'])} | {fractions} | {_fraction(r['argmax_flips'])} |")
    lines += ["", f"ppm: {result['ppm_metric']} (the least tolerancePpm that accepts the pair); fractions of "
              f"elements beyond each tolerance; argmax flips: fraction of rows whose largest element moved. "
              f"\"fp16 for fp32\": the model run in fp16 against fp32 on the same device (a cheaper run than "
              f"the model's). torch {result['torch']}, CPU {result['cpu']}, all CPU threads = {result['cpu_threads_all']}, "
              f"{result['seconds']} s.", "",
              "Rows of the fp32 reference a cheat could flip (top two within the tolerance's allowance):", "",
              "| model | " + " | ".join(f"{tol:,} ppm" for tol in tolerances) + " |",
              "| --- | " + "---: | " * len(tolerances)]
    for f in result["flippable"]:
        lines.append(f"| {f['model']} | " + " | ".join(_fraction(f["flippable"][tol]) for tol in tolerances) + " |")
    lines += ["", "Output digests (sha256 of the float64 outputs, first 16 hex digits; equal across machines "
              "means bit-identical there):", "", "| run | " + " | ".join(result["digests"]) + " |",
              "| --- | " + "--- | " * len(result["digests"])]
    keys = sorted({k for d in result["digests"].values() for k in d})
    for key in keys:
        lines.append(f"| {key.replace('|', ', ')} | " + " | ".join(d.get(key, "") for d in result["digests"].values())
                     + " |")
    lines += ["", "The pinned kernels' price (one CPU thread, a batch of 32, best of "
              f"{COST_RUNS}):", "", "| model, dtype | host kernels ms | pinned ms | pinned / host |", "| --- | ---: | ---: | ---: |"]
    for key, cost in result["pinning_cost"].items():
        lines.append(f"| {key.replace('|', ', ')} | {cost['host s'] * 1e3:.2f} | {cost['pinned s'] * 1e3:.2f} "
                     f"| {cost['pinned / host']:.2f} |")
    lines += ["", "One item's long reductions, 1 thread against more (max |a - b|):", ""]
    lines += [f"- {name}: " + "; ".join(f"{t} threads: {d}" for t, d in diffs.items())
              for name, diffs in result["reduction_threads"].items()]
    lines += [f"Skipped: {s}" for s in result["skipped"]]
    return "\n".join(lines)


def _fraction(value: float) -> str:
    return "0" if value == 0 else f"{value:.2%}" if value >= 1e-4 else f"{value:.1e}"


def main(argv: list[str]) -> None:
    devices = argv or ["cpu", *(["cuda:0"] if torch.cuda.is_available() else [])]
    print(markdown(measure_drift(devices)))


if __name__ == "__main__":
    main(sys.argv[1:])
