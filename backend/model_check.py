"""Does a model load, and do a job's inputs run through it? Asked of untrusted files, so the
answer comes from a child process: `python -m backend.model_check REQUEST.json`.

The child gets an address-space limit (RLIMIT_AS), a CPU-time limit, its own session and a
parent-death signal; the parent kills its whole process group when it overruns the wall-clock
budget. It loads the model exactly as providers and verifiers do (`protocol.inference`, which
reads TorchScript with `torch.jit.load`, never Python's pickle, and ONNX with onnxruntime) and,
for a dry run, runs one batch of the job's own items. Whatever the file does (raise, loop,
allocate without end, crash the interpreter) happens in the child; the backend gets a verdict.

Checks are bounded: at most `max_concurrent` children at once (others wait up to their own
budget, then get `CheckBusy`), and a verdict is cached per (model, format, input signature).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from backend.errors import BackendError
from client.sandbox import Limits, child_environment, limit_child

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
        with tempfile.TemporaryDirectory(prefix="model-check-") as work:
            request = Path(work) / "request.json"
            result = Path(work) / "result.json"
            request.write_text(json.dumps({"model": str(model), "format": fmt, "items": [str(p) for p in items],
                                           "result": str(result), "threads": threads}))
            # The provider's and verifier's model sandbox: an allowlisted environment (nothing of
            # the backend's, such as its database URL, reaches the model), limits, death with us.
            limits = Limits(self.limits.memory_bytes, self.limits.timeout_s, threads)
            env = child_environment(threads, Path(work))
            child = subprocess.Popen([sys.executable, "-m", "backend.model_check", str(request)], cwd=work,
                                     preexec_fn=lambda: limit_child(limits), start_new_session=True,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     env=env)
            try:
                _, stderr = child.communicate(timeout=self.limits.timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
                return Verdict(False, "limits", f"the check ran past its {self.limits.timeout_s:.0f} s budget")
            if result.exists():
                doc = json.loads(result.read_text())
                shape = doc.get("output_shape")
                return Verdict(bool(doc["ok"]), str(doc["stage"]), str(doc.get("error", ""))[:2000],
                               tuple(shape) if shape is not None else None, doc.get("output_dtype"))
            if child.returncode in (-signal.SIGKILL, -signal.SIGXCPU):
                return Verdict(False, "limits", "the check was killed at its CPU or memory limit "
                                                f"({self.limits.memory_bytes >> 20} MiB)")
            tail = stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
            return Verdict(False, "load", f"the model crashed the loader (exit {child.returncode}): {tail[0][:500]}")


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


def _child(request_path: str) -> int:
    """The child: load, optionally dry-run, write the verdict. Never trusts what it reads."""
    request = json.loads(Path(request_path).read_text())
    out = Path(request["result"])

    def verdict(ok: bool, stage: str, error: str = "", **extra: object) -> int:
        out.write_text(json.dumps({"ok": ok, "stage": stage, "error": error[:2000], **extra}))
        return 0

    import numpy as np

    from protocol.inference import load_model, run_batches
    from protocol.jobs import JobSpecError, decode_output

    try:
        run = load_model(Path(request["model"]).read_bytes(), request["format"], int(request.get("threads", 1)))
    except BaseException as exc:  # noqa: BLE001 - untrusted file: every failure is the verdict
        return verdict(False, "load", f"{type(exc).__name__}: {exc}")
    items = request.get("items") or []
    if not items:
        return verdict(True, "ok")
    decoded = []
    for index, path in enumerate(items):
        try:
            decoded.append(decode_output(Path(path).read_bytes()))
        except JobSpecError as exc:
            return verdict(False, "input", f"input item {index} is not an encoded array: {exc}")
    try:
        outputs = run_batches(run, decoded, len(decoded))
    except BaseException as exc:  # noqa: BLE001
        return verdict(False, "run", f"{type(exc).__name__}: {exc}")
    first = np.asarray(outputs[0])
    return verdict(True, "ok", output_shape=list(first.shape), output_dtype=str(first.dtype))


if __name__ == "__main__":
    code = _child(sys.argv[1])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip torch's teardown: the verdict is written
