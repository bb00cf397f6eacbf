"""Model execution as every party must do it: the provider computing a job and a verifier
re-executing its samples run the same code, so a mismatch means a different result, never a
different way of batching or of loading the model.

Pure: a model arrives as bytes and items as decoded arrays; nothing here reads files or the
network. The caller runs it in a limited child process (the model is untrusted code).

Both parties batch items in the spec's batch size in item order (a verifier re-executing a
sample runs the whole batches that hold it, see `batches_holding`), because some kernels'
results depend on the batch they run in.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence

import numpy as np

from protocol.jobs import MODEL_FORMATS, JobSpecError

BatchFn = Callable[[np.ndarray], np.ndarray]


class InferenceError(JobSpecError):
    """The model cannot be loaded or returned something a job model must not return."""


def deterministic(threads: int = 1) -> None:
    """Settings that make torch's CPU results repeatable from run to run: fixed thread count
    and deterministic algorithms where torch offers them (warn-only, so a model using an op
    without a deterministic variant still runs). The kernels' instruction set cannot be chosen
    here: torch reads it when it loads, from the environment the sandbox gives every model
    child (protocol.execution).

    The switch is the one `torch.use_deterministic_algorithms(True, warn_only=True)` flips in
    ATen (`torch.are_deterministic_algorithms_enabled()` reads it back). That wrapper also sets
    `torch._inductor.config.deterministic`, which only `torch.compile`d code reads and which
    imports the whole compiler stack (about 800 modules, 1.6 s on these CPUs): job models are
    TorchScript or ONNX and never compiled, so the flag alone is set."""
    import torch

    torch.set_num_threads(max(1, threads))
    torch._C._set_deterministic_algorithms(True, warn_only=True)


def load_model(data: bytes, model_format: str, threads: int = 1) -> BatchFn:
    """A callable batch -> batch for a TorchScript or ONNX model given as bytes."""
    if model_format not in MODEL_FORMATS:
        raise InferenceError(f"unknown model format {model_format!r}; expected one of {MODEL_FORMATS}")
    if model_format == "torchscript":
        import torch

        deterministic(threads)
        module = torch.jit.load(io.BytesIO(data), map_location="cpu")
        module.eval()

        def run_torch(batch: np.ndarray) -> np.ndarray:
            # Not optimized: TorchScript's executor otherwise profiles a module's first calls and
            # then runs a graph it rewrote for what it saw, so the first batches of a job and the
            # later ones went through different graphs (a verifier re-executing one batch may run
            # the other one), and each freshly loaded model paid about 30 ms of CPU for the
            # rewriting: most of a small job in a forked child, which starts from scratch.
            with torch.jit.optimized_execution(False), torch.inference_mode():
                out = module(torch.from_numpy(batch))
            if not isinstance(out, torch.Tensor):
                raise InferenceError(f"the model returned {type(out).__name__}; a job model returns one tensor")
            return out.numpy()

        return run_torch
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = max(1, threads)
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    if len(session.get_inputs()) != 1:
        raise InferenceError(f"the ONNX model takes {len(session.get_inputs())} inputs; a job model takes one")
    name = session.get_inputs()[0].name
    return lambda batch: session.run(None, {name: batch})[0]


def batches_holding(indices: Sequence[int], batch_size: int, item_count: int) -> list[range]:
    """The provider's batches (consecutive runs of `batch_size` items from item 0) that hold
    `indices`, in order: a verifier re-runs whole batches, so each sampled item is computed
    beside the same neighbours as the provider computed it."""
    if batch_size < 1:
        raise InferenceError(f"batch size {batch_size} must be at least 1")
    starts = sorted({(i // batch_size) * batch_size for i in indices if 0 <= i < item_count})
    return [range(s, min(s + batch_size, item_count)) for s in starts]


def run_batches(run: BatchFn, items: Sequence[np.ndarray], batch_size: int,
                first_index: int = 0) -> list[np.ndarray]:
    """Runs `items` in consecutive batches of `batch_size`; one output array per item."""
    if batch_size < 1:
        raise InferenceError(f"batch size {batch_size} must be at least 1")
    outputs: list[np.ndarray] = []
    for start in range(0, len(items), batch_size):
        batch = list(items[start:start + batch_size])
        shapes = {item.shape for item in batch}
        if len(shapes) != 1:
            first = first_index + start
            raise InferenceError(f"items {first}..{first + len(batch) - 1} have different shapes {sorted(shapes)}")
        result = np.asarray(run(np.stack(batch)))
        if result.ndim == 0 or result.shape[0] != len(batch):
            raise InferenceError(f"the model returned shape {result.shape} for a batch of {len(batch)}")
        outputs.extend(np.ascontiguousarray(row) for row in result)
    return outputs


__all__ = ["BatchFn", "InferenceError", "batches_holding", "deterministic", "load_model", "run_batches"]
