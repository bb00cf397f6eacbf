"""Re-executes sampled job items in the sandboxed model executor of `client.sandbox`.

A job's model is the renter's code, untrusted by the verifier as much as by the provider: it
runs in the same warm sandbox the provider's jobs run in (namespaces, allowlisted environment,
memory, CPU and wall-clock limits, a fresh forked child per run), computing with
`protocol.inference` over the whole batches that hold the sampled items (same neighbours, same
batch size), so an honest provider's outputs are reproduced bit for bit.

Files only cross the boundary: the verifier writes the model and the inputs, the sandbox
copies them into its job directory and returns one encoded output per item; they are decoded
here as untrusted.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from client.sandbox import ItemBatch, Limits, SandboxFailed, run_model
from protocol.jobs import JobSpecError, decode_output
from verifier import VerifierError

logger = logging.getLogger(__name__)


class ReexecFailed(VerifierError):
    """The model could not be re-executed here (it raised, crashed, or overran its limits).

    Never a reason to challenge: without our own result there is no evidence."""

    def __init__(self, job_id: int, message: str) -> None:
        super().__init__(f"job {job_id}: re-execution failed: {message}")
        self.job_id = job_id


class ReexecTimedOut(ReexecFailed):
    """The child ran past its wall-clock budget and was killed."""


@dataclass(frozen=True)
class ReexecLimits:
    memory_bytes: int = 4 << 30
    timeout_s: float = 120.0
    threads: int = 1


@dataclass(frozen=True)
class Batch:
    """A run of consecutive items starting at item `start`, as encoded input bytes."""

    start: int
    inputs: tuple[bytes, ...]


def reexecute(job_id: int, model: bytes, model_format: str, batches: list[Batch], limits: ReexecLimits,
              work_dir: Path) -> dict[int, np.ndarray]:
    """Runs each batch through the model in a limited child; returns item index -> output."""
    work_dir = work_dir.resolve()
    work_dir.mkdir(parents=True, exist_ok=True)
    for stale in work_dir.glob("*"):
        if stale.is_file():
            stale.unlink()
    (work_dir / "model.bin").write_bytes(model)
    item_batches = []
    for batch in batches:
        paths = []
        for offset, data in enumerate(batch.inputs):
            path = work_dir / f"{batch.start + offset}.in"
            path.write_bytes(data)
            paths.append(path)
        # Each batch is one of the provider's whole batches: run as one, as the provider ran it.
        item_batches.append(ItemBatch(batch.start, tuple(paths), max(1, len(paths))))
    started = time.monotonic()
    try:
        run = run_model(work_dir / "model.bin", model_format, item_batches,
                        Limits(limits.memory_bytes, limits.timeout_s, limits.threads), label=f"job {job_id} re-execution")
    except SandboxFailed as exc:
        raise (ReexecTimedOut if exc.kind == "timeout" else ReexecFailed)(job_id, exc.message) from None
    outputs: dict[int, np.ndarray] = {}
    for index, data in sorted(run.outputs.items()):
        try:
            outputs[index] = decode_output(data)
        except JobSpecError as exc:
            raise ReexecFailed(job_id, f"item {index}: {exc}") from exc
    logger.info("job %s: re-executed %d items in %.2f s", job_id, len(outputs), time.monotonic() - started)
    return outputs


__all__ = ["Batch", "ReexecFailed", "ReexecLimits", "ReexecTimedOut", "reexecute"]
