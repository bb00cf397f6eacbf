"""Re-executes sampled job items in a limited child process: `python -m verifier.reexec REQUEST`.

A job's model is the renter's code, untrusted by the verifier as much as by the provider: it
runs in a child with an allowlisted environment (client.sandbox: none of the verifier's
variables, so no secret), a private temporary HOME, an address-space limit (RLIMIT_AS), a
CPU-time limit, its own session and a parent-death signal, and the parent kills the child's process group when it overruns its wall
clock. The child computes with `protocol.inference`, the code the provider runs, over the whole
batches that hold the sampled items (same neighbours, same batch size).

Files only cross the boundary: the parent writes the model, the inputs and a JSON request, the
child writes one encoded output per item (or `error.json`); the parent decodes them as untrusted.
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
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from client import sandbox
from protocol.jobs import JobSpecError, decode_output
from verifier import VerifierError

logger = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


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


def _limit_child(limits: ReexecLimits) -> None:
    """Between fork and exec, in the child: the limits bind the model's process only, and the
    kernel kills it if the verifier dies (no orphan model beside a restarted verifier)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    cpu = int(limits.timeout_s * max(1, limits.threads)) + 5
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))


def reexecute(job_id: int, model: bytes, model_format: str, batches: list[Batch], limits: ReexecLimits,
              work_dir: Path) -> dict[int, np.ndarray]:
    """Runs each batch through the model in a limited child; returns item index -> output."""
    work_dir = work_dir.resolve()  # the child runs in its own temporary directory
    work_dir.mkdir(parents=True, exist_ok=True)
    for stale in work_dir.glob("*"):
        if stale.is_file():
            stale.unlink()
    (work_dir / "model.bin").write_bytes(model)
    request = {"model": str(work_dir / "model.bin"), "format": model_format, "threads": limits.threads,
               "out_dir": str(work_dir), "batches": []}
    for batch in batches:
        paths = []
        for offset, data in enumerate(batch.inputs):
            path = work_dir / f"{batch.start + offset}.in"
            path.write_bytes(data)
            paths.append(str(path))
        request["batches"].append({"start": batch.start, "inputs": paths})
    request_path = work_dir / "request.json"
    request_path.write_text(json.dumps(request))
    started = time.monotonic()
    home = sandbox.private_home()  # never a copy of os.environ: the model is untrusted
    child = subprocess.Popen([sys.executable, "-m", "verifier.reexec", str(request_path)],
                             preexec_fn=lambda: _limit_child(limits), start_new_session=True, cwd=home,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             env=sandbox.child_environment(limits.threads, home))
    try:
        _, stderr = child.communicate(timeout=limits.timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        raise ReexecTimedOut(job_id, f"ran past {limits.timeout_s:.1f} s and was killed") from None
    finally:
        sandbox.remove_home(home)
    if child.returncode != 0:
        error_file = work_dir / "error.json"
        if error_file.exists():
            error = json.loads(error_file.read_text())
            raise ReexecFailed(job_id, f"{error['type']}: {error['message']}")
        raise ReexecFailed(job_id, f"the child exited with {child.returncode}: "
                                   f"{stderr.decode(errors='replace')[-500:]}")
    outputs: dict[int, np.ndarray] = {}
    for batch in batches:
        for index in range(batch.start, batch.start + len(batch.inputs)):
            path = work_dir / f"{index}.out"
            try:
                outputs[index] = decode_output(path.read_bytes())
            except (OSError, JobSpecError) as exc:
                raise ReexecFailed(job_id, f"item {index}: {exc}") from exc
    logger.info("job %s: re-executed %d items in %.2f s", job_id, len(outputs), time.monotonic() - started)
    return outputs


__all__ = ["Batch", "ReexecFailed", "ReexecLimits", "ReexecTimedOut", "reexecute"]


def _child(request_path: str) -> int:
    from protocol.inference import load_model, run_batches
    from protocol.jobs import encode_output

    request = json.loads(Path(request_path).read_text())
    out_dir = Path(request["out_dir"])
    try:
        run = load_model(Path(request["model"]).read_bytes(), request["format"], int(request["threads"]))
        for batch in request["batches"]:
            items = [decode_output(Path(p).read_bytes()) for p in batch["inputs"]]
            start = int(batch["start"])
            for offset, output in enumerate(run_batches(run, items, len(items), first_index=start)):
                (out_dir / f"{start + offset}.out").write_bytes(encode_output(output))
    except BaseException as exc:  # whatever the model does is reported, then the child exits
        (out_dir / "error.json").write_text(json.dumps({
            "type": type(exc).__name__, "message": str(exc)[:2000], "trace": traceback.format_exc()[-4000:]}))
        return 1
    return 0


if __name__ == "__main__":
    code = _child(sys.argv[1])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip torch's slow interpreter teardown; every output file is closed
