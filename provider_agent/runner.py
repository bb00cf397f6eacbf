"""Runs a job's model in an isolated child process with memory and time limits.

The child (`provider_agent.sandbox`) gets an allowlisted environment (client.sandbox: no
variable of the agent's, so no secret, reaches the model), a private temporary HOME, an
address-space limit (RLIMIT_AS: an allocation beyond it fails inside the child), a CPU-time limit (RLIMIT_CPU, a backstop) and its own
session; the parent enforces the wall-clock budget and kills the child's whole process group
when it overruns. Every way a model can fail ends as one `JobFailed` subclass with a clear
message; the agent process itself is never at risk.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from client import sandbox
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


@dataclass(frozen=True)
class Limits:
    memory_bytes: int
    timeout_s: float
    threads: int = 1


@dataclass(frozen=True)
class InferenceRun:
    outputs: list[bytes]  # encoded per item, in item order
    seconds: float


_PR_SET_PDEATHSIG = 1


def _limit_child(limits: Limits) -> None:
    """Runs in the child between fork and exec: limits apply to the model's process only.

    The child also asks the kernel to kill it when its parent dies (Linux PR_SET_PDEATHSIG): a
    worker killed mid-job must not leave an orphan model running beside its successor.
    """
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    cpu = int(limits.timeout_s * max(1, limits.threads)) + 5
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))


# One warm child per set of limits: started ahead of the next job, it has already imported torch
# and onnxruntime (about a second) and waits for a request path on stdin. Each child still runs
# exactly one job and exits, so no state leaks from one job to the next.
_spares: dict[Limits, subprocess.Popen] = {}
_spares_lock = threading.Lock()
_homes: dict[int, Path] = {}  # child pid -> its private HOME, removed when the child is done


def _spawn(limits: Limits) -> subprocess.Popen:
    # Never a copy of os.environ: the model is untrusted and the agent's variables may hold secrets.
    home = sandbox.private_home()
    child = subprocess.Popen([sys.executable, "-m", "provider_agent.sandbox"],
                             preexec_fn=lambda: _limit_child(limits), start_new_session=True, cwd=home,
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             env=sandbox.child_environment(limits.threads, home))
    _homes[child.pid] = home
    return child


def _take_child(limits: Limits) -> subprocess.Popen:
    with _spares_lock:
        spare = _spares.pop(limits, None)
    if spare is not None and spare.poll() is None:
        return spare
    return _spawn(limits)


def prewarm(limits: Limits) -> None:
    """Starts a warm child for these limits now (the agent calls it on start)."""
    _spawn_spare(limits)


def _spawn_spare(limits: Limits) -> None:
    # PR_SET_PDEATHSIG fires when the spawning *thread* ends: a spare started from a passing
    # thread could be killed just as it is handed a job, so only the main thread keeps spares.
    if threading.current_thread() is not threading.main_thread():
        return
    with _spares_lock:
        current = _spares.get(limits)
        if current is None or current.poll() is not None:
            _spares[limits] = _spawn(limits)


def run_inference(job_id: int, model_path: Path, model_format: str, input_paths: list[Path],
                  batch_size: int, limits: Limits, work_dir: Path) -> InferenceRun:
    """Runs the model over the items in a limited child; returns the encoded outputs."""
    # Absolute paths: the child runs in its own temporary directory.
    work_dir, model_path, input_paths = work_dir.resolve(), model_path.resolve(), [p.resolve() for p in input_paths]
    work_dir.mkdir(parents=True, exist_ok=True)
    for stale in work_dir.glob("*"):
        stale.unlink()  # a previous, interrupted attempt's files must not mix with this one's
    request = work_dir / "request.json"
    request.write_text(json.dumps({
        "model": str(model_path), "format": model_format, "inputs": [str(p) for p in input_paths],
        "batch_size": batch_size, "out_dir": str(work_dir), "threads": limits.threads,
    }))
    child = _take_child(limits)
    started = time.monotonic()
    logger.info("job %s: model child pid %s (%s, %d items, AS limit %d MiB, %.0f s)",
                job_id, child.pid, model_format, len(input_paths), limits.memory_bytes >> 20, limits.timeout_s)
    try:
        _, stderr = child.communicate(input=f"{request}\n".encode(), timeout=limits.timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        raise ModelTimedOut(job_id, f"the model ran past its {limits.timeout_s:.1f} s budget and was killed") \
            from None
    finally:
        sandbox.remove_home(_homes.pop(child.pid, Path("/nonexistent")))
        _spawn_spare(limits)
    seconds = time.monotonic() - started
    error_file = work_dir / "error.json"
    if child.returncode != 0:
        if error_file.exists():
            error = json.loads(error_file.read_text())
            message = f"{error['type']}: {error['message']}"
            if error["kind"] == "memory":
                raise ModelOutOfMemory(job_id, f"{message} (limit {limits.memory_bytes >> 20} MiB)")
            raise ModelRaised(job_id, message)
        if child.returncode == -signal.SIGXCPU:
            raise ModelTimedOut(job_id, "the model used up its CPU-time limit")
        if child.returncode == -signal.SIGKILL:
            raise ModelCrashed(job_id, "the model process was killed (CPU-time hard limit or the kernel's "
                                       "out-of-memory killer)")
        tail = stderr.decode(errors="replace")[-500:]
        raise ModelCrashed(job_id, f"the model process exited with {child.returncode}: {tail}")
    outputs = []
    for index in range(len(input_paths)):
        path = work_dir / f"{index}.out"
        if not path.exists():
            raise ModelCrashed(job_id, f"the model process wrote no output for item {index}")
        data = path.read_bytes()
        try:
            decode_output(data)  # the child is untrusted too: only well-formed outputs are committed
        except JobSpecError as exc:
            raise ModelRaised(job_id, f"item {index}: {exc}") from exc
        outputs.append(data)
    logger.info("job %s: %d items in %.2f s", job_id, len(outputs), seconds)
    return InferenceRun(outputs=outputs, seconds=seconds)
