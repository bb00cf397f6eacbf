"""Runs a job's model in the sandboxed child of `client.sandbox` (the verifiers re-execute with
the same executor, so outputs are bit-identical): an allowlisted environment, memory, CPU and
wall-clock limits, its own session. Every way a model can fail ends as one `JobFailed` subclass
with a clear message; the agent process itself is never at risk.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from client.sandbox import ItemBatch, Limits, SandboxFailed, prewarm, run_model
from protocol.jobs import JobSpecError, decode_output
from provider_agent import ProviderAgentError

logger = logging.getLogger(__name__)


class JobFailed(ProviderAgentError):
    """A job cannot be completed; `kind` says why in one word (for logs, metrics and reports)."""

    kind = "failed"

    def __init__(self, job_id: int, message: str) -> None:
        super().__init__(f"job {job_id}: {self.kind}: {message}")
        self.job_id = job_id
        self.message = message


class ModelRaised(JobFailed):
    kind = "model-error"


class ModelTimedOut(JobFailed):
    kind = "timeout"


class ModelOutOfMemory(JobFailed):
    kind = "out-of-memory"


class ModelCrashed(JobFailed):
    kind = "crashed"


class BadJobInput(JobFailed):
    """The spec, the model file or an input is malformed or missing."""

    kind = "bad-input"


_BY_KIND: dict[str, type[JobFailed]] = {cls.kind: cls for cls in (ModelRaised, ModelTimedOut, ModelOutOfMemory,
                                                                    ModelCrashed)}


@dataclass(frozen=True)
class InferenceRun:
    outputs: list[bytes]  # encoded per item, in item order
    seconds: float


def run_inference(job_id: int, model_path: Path, model_format: str, input_paths: list[Path],
                  batch_size: int, limits: Limits) -> InferenceRun:
    """Runs the model over the items in a fresh child of a warm sandbox; returns the encoded outputs."""
    try:
        run = run_model(model_path, model_format, [ItemBatch(0, tuple(input_paths), batch_size)], limits,
                        label=f"job {job_id}")
    except SandboxFailed as exc:
        raise _BY_KIND.get(exc.kind, ModelCrashed)(job_id, exc.message) from None
    outputs = []
    for index in range(len(input_paths)):
        data = run.outputs[index]
        try:
            decode_output(data)  # the child is untrusted too: only well-formed outputs are committed
        except JobSpecError as exc:
            raise ModelRaised(job_id, f"item {index}: {exc}") from exc
        outputs.append(data)
    logger.info("job %s: %d items in %.2f s", job_id, len(outputs), run.seconds)
    return InferenceRun(outputs=outputs, seconds=run.seconds)


__all__ = ["BadJobInput", "InferenceRun", "JobFailed", "Limits", "ModelCrashed", "ModelOutOfMemory", "ModelRaised",
           "ModelTimedOut", "prewarm", "run_inference"]
