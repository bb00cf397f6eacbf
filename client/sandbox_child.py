"""The warm template that runs jobs' untrusted models: `python -m client.sandbox_child JOB_DIR`.

Started by `client.sandbox` (for the provider's jobs, the verifiers' re-executions and the
backend's model checks alike, so all compute with the same code) inside bubblewrap's namespaces,
with an allowlisted environment. It imports the inference libraries once, says `ready` on
stdout, then for every order on stdin (one JSON line with the job's memory and CPU limits) hands
it to a fresh child, forked ahead of the order, that applies the limits, reads `JOB_DIR/request.json` and only the files it names,
writes one encoded output per item (`<index>.out`) or, on a failure it can still report,
`error.json` with the error's kind and stage, and exits. The template itself never runs model
code, so nothing a job does reaches the next one; it answers each order with the child's pid
and exit status.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys
import traceback
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.pop("PWD", None)  # set by bwrap's --chdir; not on the allowlist the models get

_PR_SET_PDEATHSIG = 1


def run_job(job_dir: Path) -> int:
    """In the forked child: the job of `job_dir/request.json`; 0 when every output is written."""
    from protocol.inference import load_model, run_batches
    from protocol.jobs import JobSpecError, decode_output, encode_output

    request = json.loads((job_dir / "request.json").read_text())
    out_dir = Path(request["out_dir"])
    stage = "load"
    try:
        run = load_model(Path(request["model"]).read_bytes(), request["format"], int(request.get("threads", 1)))
        for batch in request["batches"]:
            first, inputs, size = int(batch["start"]), batch["inputs"], int(batch["batch_size"])
            for offset in range(0, len(inputs), size):  # one chunk of items decoded at a time
                items = []
                stage = "input"
                for index, path in enumerate(inputs[offset:offset + size], first + offset):
                    try:
                        items.append(decode_output(Path(path).read_bytes()))
                    except JobSpecError as exc:
                        raise JobSpecError(f"input item {index} is not an encoded array: {exc}") from exc
                stage = "run"
                for i, output in enumerate(run_batches(run, items, size, first_index=first + offset)):
                    (out_dir / f"{first + offset + i}.out").write_bytes(encode_output(output))
    except BaseException as exc:  # every failure of untrusted code is reported, then we exit
        kind = "memory" if isinstance(exc, MemoryError) or "can't allocate memory" in str(exc) \
            or "bad_alloc" in str(exc) else "model"
        (job_dir / "error.json").write_text(json.dumps({
            "kind": kind, "stage": stage, "type": type(exc).__name__, "message": str(exc)[:2000],
            "trace": traceback.format_exc()[-4000:],
        }))
        return 1
    return 0


def _child(job_dir: Path, orders: int, report: int) -> None:
    """A forked job child, started ahead of its job: its own session, death with the template,
    stdio away from the template's protocol pipes; then it waits for its order (the limits),
    applies them, runs the job, reports its exit code on `report` and exits. Never returns."""
    code = 1
    try:
        os.setsid()
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        order = b""
        while chunk := os.read(orders, 4096):
            order += chunk
        if not order:  # the template closed without a job for us
            code = 0
            return
        limits = json.loads(order)
        resource.setrlimit(resource.RLIMIT_AS, (limits["memory"], limits["memory"]))
        resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu"], limits["cpu"] + 5))
        os.dup2(os.open(job_dir / "stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
        sys.stdin = sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the child
        sys.stderr = os.fdopen(2, "w", closefd=False)
        code = run_job(job_dir)
        sys.stderr.flush()
        os.write(report, b"%d" % code)  # every output file is closed: the template may answer now
    finally:
        # Skipping the interpreter's teardown of torch and onnxruntime (about 0.3 s) is part of
        # what makes a job take milliseconds.
        os._exit(code)


def _fork_spare(job_dir: Path) -> tuple[int, int, int]:
    """Forks the next job's child ahead of its order (forking a process that holds torch takes
    tens of milliseconds): (pid, order pipe to write, report pipe to read)."""
    order_r, order_w = os.pipe()
    report_r, report_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(order_w)
        os.close(report_r)
        _child(job_dir, order_r, report_w)
    os.close(order_r)
    os.close(report_w)
    return pid, order_w, report_r


def _warm_up() -> None:
    """Runs two tiny models of our own (a TorchScript and an ONNX identity) through a job's whole
    path once: torch's JIT loader, inference mode, onnxruntime's first session and numpy's array
    format initialise lazily on first use (about 10 ms), and done here they are inherited by every
    forked job child instead of being paid by each job. Only this trusted code runs in the
    template, never a job's model; single-threaded, so no thread pool is started before forking."""
    import io

    import numpy as np
    import torch
    from onnx import TensorProto, helper

    from protocol.inference import load_model
    from protocol.jobs import decode_output, encode_output

    scripted = io.BytesIO()
    torch.jit.save(torch.jit.script(torch.nn.Identity()), scripted)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity", [x], [y])
    identity_onnx = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    identity_onnx.ir_version = 8  # one every supported onnxruntime reads
    batch = decode_output(encode_output(np.zeros((1, 4), np.float32)))
    for data, model_format in ((scripted.getvalue(), "torchscript"), (identity_onnx.SerializeToString(), "onnx")):
        encode_output(load_model(data, model_format)(batch)[0])


def serve(job_dir: Path) -> int:
    """The template: warm up, then one forked child per order until stdin closes."""
    import protocol.inference

    protocol.inference.deterministic()  # the switch once here; each job's own call then costs nothing
    _warm_up()
    orders, replies = sys.stdin.buffer, sys.stdout.buffer
    # Forking is safe only while no thread pool of torch's runs: the count is in the log.
    replies.write(f"ready pid={os.getpid()} threads={len(os.listdir('/proc/self/task'))}\n".encode())
    replies.flush()
    spare = _fork_spare(job_dir)
    for line in orders:
        child, order, report = spare
        os.write(order, line)
        os.close(order)
        reported = os.read(report, 16)
        os.close(report)
        if reported:
            status = int(reported)
        else:  # no report: it crashed or was killed; its exit status says how
            status = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
        try:
            # Anything the job left running in its session, before the answer: once the parent has
            # it, it empties the job directory for the next job, and nothing may write there then.
            os.killpg(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
        replies.write(json.dumps({"pid": child, "status": status}).encode() + b"\n")
        replies.flush()
        # The next child is forked before the last one is reaped (its exit unmaps torch: a few
        # ms), so a job sent right after this one finds it ready sooner.
        spare = _fork_spare(job_dir)
        if reported:
            os.waitpid(child, 0)
    return 0


if __name__ == "__main__":
    code = serve(Path(sys.argv[1]))
    sys.stdout.flush()
    os._exit(code)
