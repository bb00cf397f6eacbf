"""The one sandboxed model executor: the provider's jobs and the verifiers' re-executions.

A job's model is untrusted code (the renter's), run by the provider and re-run by verifiers with
this same code, so both get bit-identical outputs. It runs in a child process
(`client.sandbox_child`) with:
- an allowlisted environment built here, never a copy of the parent's: only what the
  interpreter, torch and the thread pools need (PATH, locale, thread counts, the GPU selection,
  a private temporary HOME), so no secret of the agent (a broker URL with credentials, a
  password file's path, API tokens, whatever the operator exported) can reach the model;
- an address-space limit (RLIMIT_AS: an allocation beyond it fails inside the child), a CPU-time
  limit (RLIMIT_CPU, a backstop), its own session, and a parent-death signal (no orphan model
  beside a restarted parent); the parent enforces the wall-clock budget and kills the child's
  whole process group when it overruns.
Files alone cross the boundary: the parent writes a JSON request naming the model and inputs,
the child writes one encoded output per item or `error.json`; outputs are untrusted and checked
by the caller. Every way a model can fail ends as one `SandboxFailed` with a `kind`.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from client.errors import ClientError

logger = logging.getLogger(__name__)

# Copied from the parent when set: none of them carries a secret, each changes how the child runs.
INHERITED = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "TZ",
             "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH")
# Set here, whatever the parent has.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                    "UNCHAINED_JOB_THREADS")
SET_HERE = (*THREAD_VARIABLES, "OMP_WAIT_POLICY", "HOME", "TMPDIR", "PYTHONPATH", "PYTHONNOUSERSITE",
            "PYTHONDONTWRITEBYTECODE")
ALLOWED = frozenset(INHERITED + SET_HERE)
# The directory that holds the `protocol`, `provider_agent` and `verifier` packages: the child
# imports its entry module from there, also when the project is not installed.
PACKAGES_ROOT = Path(__file__).resolve().parent.parent


def child_environment(threads: int, home: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment of a model child: the allowlist, `threads` for every thread pool,
    `home` (a private temporary directory) as HOME and TMPDIR."""
    parent = os.environ if environ is None else environ
    env = {name: parent[name] for name in INHERITED if name in parent}
    env.setdefault("PATH", os.defpath)
    env.setdefault("LANG", "C.UTF-8")
    env.update({name: str(max(1, threads)) for name in THREAD_VARIABLES})
    env.update(OMP_WAIT_POLICY="PASSIVE", HOME=str(home), TMPDIR=str(home), PYTHONPATH=str(PACKAGES_ROOT),
               PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1")
    return env


class SandboxFailed(ClientError):
    """The model could not produce its outputs; `kind` is one of KINDS (for logs, metrics, reports)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


KINDS = ("model-error", "out-of-memory", "timeout", "crashed")


@dataclass(frozen=True)
class Limits:
    memory_bytes: int
    timeout_s: float
    threads: int = 1


@dataclass(frozen=True)
class ItemBatch:
    """Items `start`, `start + 1`, ... (their encoded input files), run in chunks of `batch_size`."""

    start: int
    inputs: tuple[Path, ...]
    batch_size: int


@dataclass(frozen=True)
class ModelRun:
    outputs: dict[int, bytes]  # item index -> encoded output, as the child wrote it (untrusted)
    seconds: float


def private_home() -> Path:
    """A fresh 0700 temporary directory for one child's HOME and TMPDIR (nothing shared between jobs)."""
    return Path(tempfile.mkdtemp(prefix="unchained-sandbox-"))


def remove_home(home: Path) -> None:
    shutil.rmtree(home, ignore_errors=True)


_PR_SET_PDEATHSIG = 1


def limit_child(limits: Limits) -> None:
    """Runs in the child between fork and exec: the limits bind the model's process only, and
    the kernel kills it when the thread that started it ends (Linux PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    cpu = int(limits.timeout_s * max(1, limits.threads)) + 5
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))


# Warm children, one per set of limits: started ahead of the next job, each has already imported
# torch and onnxruntime (about a second) and waits for a request path on stdin. Each child still
# runs exactly one job and exits, so no state leaks from one job to the next.
_spares: dict[Limits, subprocess.Popen] = {}
_spares_lock = threading.Lock()
_homes: dict[int, Path] = {}  # child pid -> its private HOME, removed when the child is done


def _spawn(limits: Limits) -> subprocess.Popen:
    home = private_home()
    child = subprocess.Popen([sys.executable, "-m", "client.sandbox_child"],
                             preexec_fn=lambda: limit_child(limits), start_new_session=True, cwd=home,
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             env=child_environment(limits.threads, home))
    _homes[child.pid] = home
    return child


def _take_child(limits: Limits, warm: bool) -> subprocess.Popen:
    if warm:
        with _spares_lock:
            spare = _spares.pop(limits, None)
        if spare is not None and spare.poll() is None:
            return spare
    return _spawn(limits)


def prewarm(limits: Limits) -> None:
    """Starts a warm child for these limits now (the provider agent calls it on start).

    PR_SET_PDEATHSIG fires when the spawning *thread* ends: a spare started from a passing
    thread could be killed just as it is handed a job, so only the main thread keeps spares."""
    if threading.current_thread() is not threading.main_thread():
        return
    with _spares_lock:
        current = _spares.get(limits)
        if current is None or current.poll() is not None:
            _spares[limits] = _spawn(limits)


def run_model(model: Path, model_format: str, batches: Sequence[ItemBatch], limits: Limits, work_dir: Path, *,
              warm: bool = False, label: str = "model") -> ModelRun:
    """Runs the model over the batches' items in a limited child; returns each item's encoded output.

    `warm`: take a child started ahead for these limits and start the next one afterwards (the
    provider's jobs); otherwise a child is started for this run alone. `label` names the run in
    logs (e.g. "job 7")."""
    work_dir = work_dir.resolve()  # absolute paths: the child runs in its own temporary directory
    work_dir.mkdir(parents=True, exist_ok=True)
    for stale in work_dir.glob("*.out"):
        stale.unlink()  # an interrupted attempt's outputs must not mix with this one's
    (work_dir / "error.json").unlink(missing_ok=True)
    request = work_dir / "request.json"
    request.write_text(json.dumps({
        "model": str(model.resolve()), "format": model_format, "threads": limits.threads, "out_dir": str(work_dir),
        "batches": [{"start": b.start, "inputs": [str(p.resolve()) for p in b.inputs], "batch_size": b.batch_size}
                    for b in batches],
    }))
    child = _take_child(limits, warm)
    started = time.monotonic()
    logger.info("%s: model child pid %s (%s, %d items, AS limit %d MiB, %.0f s)", label, child.pid, model_format,
                sum(len(b.inputs) for b in batches), limits.memory_bytes >> 20, limits.timeout_s)
    try:
        _, stderr = child.communicate(input=f"{request}\n".encode(), timeout=limits.timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        raise SandboxFailed("timeout", f"the model ran past its {limits.timeout_s:.1f} s budget and was killed") \
            from None
    finally:
        remove_home(_homes.pop(child.pid, Path("/nonexistent")))
        if warm:
            prewarm(limits)
    seconds = time.monotonic() - started
    if child.returncode != 0:
        raise _failure(child.returncode, stderr, work_dir / "error.json", limits)
    outputs = {}
    for batch in batches:
        for index in range(batch.start, batch.start + len(batch.inputs)):
            path = work_dir / f"{index}.out"
            if not path.exists():
                raise SandboxFailed("crashed", f"the model process wrote no output for item {index}")
            outputs[index] = path.read_bytes()
    return ModelRun(outputs, seconds)


def _failure(returncode: int, stderr: bytes, error_file: Path, limits: Limits) -> SandboxFailed:
    if error_file.exists():
        try:
            error = json.loads(error_file.read_text())
            message = f"{error['type']}: {error['message']}"
            kind = error["kind"]
        except (ValueError, KeyError, TypeError):  # the child is untrusted: so is its report
            return SandboxFailed("crashed", "the model process wrote an unreadable error report")
        if kind == "memory":
            return SandboxFailed("out-of-memory", f"{message} (limit {limits.memory_bytes >> 20} MiB)")
        return SandboxFailed("model-error", message)
    if returncode == -signal.SIGXCPU:
        return SandboxFailed("timeout", "the model used up its CPU-time limit")
    if returncode == -signal.SIGKILL:
        return SandboxFailed("crashed", "the model process was killed (CPU-time hard limit or the kernel's "
                                        "out-of-memory killer)")
    tail = stderr.decode(errors="replace")[-500:]
    return SandboxFailed("crashed", f"the model process exited with {returncode}: {tail}")


__all__ = ["ALLOWED", "INHERITED", "ItemBatch", "KINDS", "Limits", "ModelRun", "PACKAGES_ROOT", "SET_HERE",
           "SandboxFailed", "child_environment", "limit_child", "prewarm", "private_home", "remove_home", "run_model"]
