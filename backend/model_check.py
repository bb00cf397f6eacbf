"""Does a model load, and do a job's inputs run through it? Asked of untrusted files, so the
answer comes from the one model sandbox of `client.sandbox`, the executor providers and
verifiers run jobs in: namespaces (no network, no file of the backend's), an allowlisted
environment (nothing of the backend's, such as its database URL, reaches the model), memory,
CPU and wall-clock limits, a fresh forked child per check. It loads the model exactly as
providers and verifiers do (`protocol.inference`, which reads TorchScript with `torch.jit.load`,
never Python's pickle, and ONNX with onnxruntime) and, for a dry run, runs the job's own items
as one batch. Whatever the file does (raise, loop, allocate without end, crash the interpreter)
happens in the sandbox; the backend gets a verdict.

Checks are bounded: at most `max_concurrent` at once (others wait up to their own budget, then
get `CheckBusy`), and a verdict is cached per (model, format, input signature).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from backend.errors import BackendError
from client.sandbox import KILLED, ItemBatch, Limits, SandboxFailed, run_model
from protocol.jobs import decode_output

log = logging.getLogger(__name__)



class CheckBusy(BackendError):
    """Every checking slot stayed busy for the whole wait: try again shortly."""


@dataclass(frozen=True)
class CheckLimits:
    memory_bytes: int = 4 << 30
    timeout_s: float = 60.0
    max_concurrent: int = 2


@dataclass(frozen=True)
class Verdict:
    ok: bool
    stage: str  # load | input | run | limits (where it failed), or "ok"
    error: str = ""
    output_shape: tuple[int, ...] | None = None  # of one item, after a dry run
    output_dtype: str | None = None


@dataclass
class ModelChecker:
    limits: CheckLimits = field(default_factory=CheckLimits)
    cache_size: int = 512
    _slots: threading.BoundedSemaphore = field(init=False)
    _cache: OrderedDict[tuple[str, ...], Verdict] = field(default_factory=OrderedDict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        self._slots = threading.BoundedSemaphore(self.limits.max_concurrent)

    def check(self, model: Path, fmt: str, items: list[Path] | None = None, key: tuple[str, ...] | None = None,
              threads: int = 1) -> Verdict:
        """Loads `model` as `fmt` in a child; with `items`, also runs them as one batch. `key`
        (content hashes and the like) caches the verdict."""
        if key is not None:
            with self._lock:
                if key in self._cache:
                    self._cache.move_to_end(key)
                    return self._cache[key]
        refused = precheck(model, fmt)
        if refused is not None:
            return refused
        if not self._slots.acquire(timeout=self.limits.timeout_s):
            raise CheckBusy("the model checker is busy with other uploads; try again in a minute")
        try:
            verdict = self._run(model, fmt, items or [], threads)
        finally:
            self._slots.release()
        if key is not None and verdict.stage != "limits":  # a busy machine may pass next time
            with self._lock:
                self._cache[key] = verdict
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return verdict

    def _run(self, model: Path, fmt: str, items: list[Path], threads: int) -> Verdict:
        batches = [ItemBatch(0, tuple(items), len(items))] if items else []
        try:
            run = run_model(model, fmt, batches, Limits(self.limits.memory_bytes, self.limits.timeout_s, threads),
                            label="model check")
        except SandboxFailed as exc:
            if exc.kind == "timeout":
                return Verdict(False, "limits", f"the check ran past its {self.limits.timeout_s:.0f} s budget")
            if exc.kind == "crashed" and exc.message.startswith(KILLED):
                return Verdict(False, "limits", "the check was killed at its CPU or memory limit "
                                                f"({self.limits.memory_bytes >> 20} MiB)")
            if exc.kind == "crashed":
                return Verdict(False, "load", f"the model crashed the loader: {exc.message[:500]}")
            return Verdict(False, exc.stage or "load", exc.message[:2000])
        if not items:
            return Verdict(True, "ok")
        first = np.asarray(decode_output(run.outputs[0]))  # the sandbox's output is untrusted: decoded, checked
        return Verdict(True, "ok", output_shape=tuple(first.shape), output_dtype=str(first.dtype))


ZIP_MAGIC = b"PK\x03\x04"


def precheck(model: Path, fmt: str) -> Verdict | None:
    """A refusal that needs no child: a TorchScript file is a zip archive, an ONNX file a
    ModelProto (parsed by the onnx package's protobuf reader, which runs no code). Anything that
    passes still goes through the child, which loads it for real."""
    if fmt == "torchscript":
        with model.open("rb") as handle:
            if handle.read(4) != ZIP_MAGIC:
                return Verdict(False, "load", "not a TorchScript archive (torch.jit.save writes a zip file)")
        return None
    if fmt == "onnx":
        import onnx
        from google.protobuf.message import Error as ProtobufError

        try:
            proto = onnx.load_model_from_string(model.read_bytes())
        except (ProtobufError, ValueError, RuntimeError) as exc:
            return Verdict(False, "load", f"not an ONNX model (protobuf ModelProto): {exc}")
        if not proto.graph.node and not proto.graph.output:
            return Verdict(False, "load", "not an ONNX model: the file holds no graph")
    return None
