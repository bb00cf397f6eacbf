"""The warm template that runs jobs' untrusted models: `python -m client.sandbox_child JOB_DIR`.

Started by `client.sandbox` (for the provider's jobs, the verifiers' re-executions and the
backend's model checks alike, so all compute with the same code) inside bubblewrap's namespaces,
with an allowlisted environment. It imports the inference libraries once, runs two tiny models of
its own through a job's path (so what initialises on first use is done once, not per job), says
`ready` on stdout, then for every order on stdin (one JSON line with the job's memory and CPU
limits and the request: model, format, inputs) hands it to a fresh child, forked ahead of the
order, that applies the limits, reads only the files the request names, writes one encoded output per item
(`<index>.out`) or, on a failure it can still report, `error.json` with the error's kind and
stage, and waits to be killed. The template itself never runs a job's model, so nothing a job
does reaches the next one; it stops the job's session (the child and whatever it left running),
answers each order with the child's pid and exit status, and kills that session a moment later,
before the next child is forked.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import select
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.pop("PWD", None)  # set by bwrap's --chdir; not on the allowlist the models get

_PR_SET_PDEATHSIG = 1
_MADV_COLLAPSE = 25  # Linux 6.1 and later
_HUGE_PAGE = 2 << 20
COLLAPSE_AFTER_JOBS = 10  # see `_collapse_into_huge_pages`
SPARE_DELAY_S = 0.015  # see `serve`


def run_job(job_dir: Path, request: dict[str, Any]) -> int:
    """In the forked child: the job `request` (from its order); 0 when every output is written."""
    from protocol.inference import load_model, run_batches
    from protocol.jobs import JobSpecError, decode_output, encode_output

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
                        items.append(decode_output(Path(path).read_bytes(), "input"))
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


WarmUp = list[tuple[bytes, str]]  # our own tiny models: (model bytes, format)


def _child(job_dir: Path, orders: int, report: int, warm_up: WarmUp) -> None:
    """A forked job child, started ahead of its job: its own session, death with the template,
    stdio away from the template's protocol pipes; it runs the warm-up models once more while it
    waits (see `_exercise`), then takes its order (limits and request), applies the limits, runs the job,
    reports its exit code on `report` and exits. Never returns."""
    code = 1
    try:
        os.setsid()
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        # A forked child pays a page fault and a page copy for every page of the template's it
        # writes (Python's reference counts, torch's and the allocator's structures); a job's
        # load and run write mostly the pages the warm-up models' do. Faulted in now, before the
        # order, they cost the job nothing (about 3 ms a job, more on a loaded machine); an order
        # that has come meanwhile waits for one warm-up model at most. Our code only: no job's
        # model has been near this process.
        for model in warm_up:
            if select.select([orders], [], [], 0)[0]:
                break
            _exercise([model])
        order = b""
        while chunk := os.read(orders, 4096):
            order += chunk
        if not order:  # the template closed without a job for us
            code = 0
            return
        order_doc = json.loads(order)
        resource.setrlimit(resource.RLIMIT_AS, (order_doc["memory"], order_doc["memory"]))
        resource.setrlimit(resource.RLIMIT_CPU, (order_doc["cpu"], order_doc["cpu"] + 5))
        os.dup2(os.open(job_dir / "stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
        sys.stdin = sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the child
        sys.stderr = os.fdopen(2, "w", closefd=False)
        code = run_job(job_dir, order_doc["request"])
        sys.stderr.flush()
        os.write(report, b"%d" % code)  # every output file is closed: the template may answer now
        while True:  # ended by the template (SIGKILL) once its caller has the answer
            signal.pause()
    finally:
        # Skipping the interpreter's teardown of torch and onnxruntime (about 0.3 s) is part of
        # what makes a job take milliseconds.
        os._exit(code)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _fork_spare(job_dir: Path, warm_up: WarmUp) -> tuple[int, int, int]:
    """Forks the next job's child ahead of its order (forking a process that holds torch takes
    tens of milliseconds): (pid, order pipe to write, report pipe to read)."""
    order_r, order_w = os.pipe()
    report_r, report_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(order_w)
        os.close(report_r)
        _child(job_dir, order_r, report_w, warm_up)
    os.close(order_r)
    os.close(report_w)
    return pid, order_w, report_r


# An ONNX identity model over float [n, 4], as the onnx package writes it (importing that package
# in the template would cost half a second at every start):
#   x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4]); y: the same with "y"
#   model = helper.make_model(helper.make_graph([helper.make_node("Identity", ["x"], ["y"])],
#                                               "identity", [x], [y]), opset_imports=[helper.make_opsetid("", 13)])
#   model.ir_version = 8; model.SerializeToString()
ONNX_IDENTITY = bytes.fromhex(
    "08083a480a100a017812017922084964656e7469747912086964656e746974795a140a0178120f0a0d080112090a0312016e0a"
    "02080462140a0179120f0a0d080112090a0312016e0a02080442040a00100d")


def _warm_up_models() -> WarmUp:
    """A TorchScript and an ONNX identity model of our own, as a job's model arrives: as bytes."""
    import io

    import torch

    scripted = io.BytesIO()
    torch.jit.save(torch.jit.script(torch.nn.Identity()), scripted)
    return [(scripted.getvalue(), "torchscript"), (ONNX_IDENTITY, "onnx")]


def _exercise(warm_up: WarmUp) -> None:
    """Runs the warm-up models through a job's path: load, decode an item, batch, run, encode.
    In the template this initialises what torch's JIT loader, inference mode, onnxruntime's
    first session and numpy's array format set up lazily on first use (about 10 ms), so every
    forked child inherits it instead of paying it; single-threaded, so no thread pool is started
    before forking. (Not through `run_batches`, which stands for the model's own code in tests.)"""
    import numpy as np

    from protocol.inference import load_model
    from protocol.jobs import decode_output, encode_output

    batch = np.stack([decode_output(encode_output(np.zeros(4, np.float32)))])
    for data, model_format in warm_up:
        encode_output(np.ascontiguousarray(load_model(data, model_format)(batch)[0]))


def _collapse_into_huge_pages() -> int:
    """Asks the kernel to back the template's anonymous memory (about 150 MiB once torch and the
    warm-up have run) with 2 MiB pages; returns how many bytes it collapsed. Every fork copies the
    parent's page tables: one entry per 2 MiB instead of 512 took a fork and exit from about 17 to
    7 ms of CPU here, paid once by the provider's job and once by each verifier's re-execution.
    The collapse itself costs about 0.25 s of CPU, paid back after some 50 jobs: `serve` asks once
    a template has run COLLAPSE_AFTER_JOBS (one that runs a few jobs and is closed never pays it).
    Only pages already there are collapsed (the mappings keep their THP mode, so a job's new memory
    is allocated as before); a write in a child still copies 4 KiB. Best effort: a kernel older
    than 6.1, or THP set to `never`, refuses and nothing changes."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    collapsed = 0
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            anonymous = fields[4] == "0" and (len(fields) == 5 or fields[5] == "[heap]")
            if fields[1] != "rw-p" or not anonymous:
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            start = -(-start // _HUGE_PAGE) * _HUGE_PAGE
            end = end // _HUGE_PAGE * _HUGE_PAGE
            if end > start and libc.madvise(start, end - start, _MADV_COLLAPSE) == 0:
                collapsed += end - start
    return collapsed


def serve(job_dir: Path) -> int:
    """The template: warm up, then one forked child per order until stdin closes."""
    import protocol.inference

    protocol.inference.deterministic()  # the switch once here; each job's own call then costs nothing
    warm_up = _warm_up_models()
    _exercise(warm_up)
    orders, replies = sys.stdin.buffer, sys.stdout.buffer
    # Forking is safe only while no thread pool of torch's runs: the count is in the log.
    replies.write(f"ready pid={os.getpid()} threads={len(os.listdir('/proc/self/task'))}\n".encode())
    replies.flush()
    spare = _fork_spare(job_dir, warm_up)
    finished = None  # the last job's child: killed, and reaped while the next job runs
    for jobs_run, line in enumerate(orders, 1):
        child, order, report = spare
        _write_all(order, line)  # a request of many inputs is larger than the pipe holds
        os.close(order)
        if finished is not None:  # its exit (unmapping torch) took a few ms; none of them the job's
            os.waitpid(finished, 0)
            finished = None
        reported = os.read(report, 16)
        os.close(report)
        if reported:
            status, finished = int(reported), child
        else:  # no report: it crashed or was killed; its exit status says how
            status = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
        try:
            # Anything the job left running in its session is stopped before the answer: once the
            # parent has it, it empties the job directory for the next job, and nothing may write
            # there then. Killed (below) before the next child is forked, so no process of this
            # job's meets it; not at once, since the exit of a process that mapped torch takes
            # milliseconds of a core that the caller needs now.
            os.killpg(child, signal.SIGSTOP)
        except ProcessLookupError:
            pass
        replies.write(json.dumps({"pid": child, "status": status}).encode() + b"\n")
        replies.flush()
        # The next spare is forked a moment later, unless the next order comes first: forking
        # this process and warming the child up take a core for about 10 ms, which the caller
        # needs now to deliver the job it just got back (2 ms of each no-op job on 2 cores).
        # Only the OS buffer can hold the next order: the caller sends it after this reply.
        select.select([orders], [], [], SPARE_DELAY_S)
        try:
            os.killpg(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if jobs_run == COLLAPSE_AFTER_JOBS:  # with no child alive that still shares the pages
            if finished is not None:
                os.waitpid(finished, 0)
                finished = None
            print(f"collapsed {_collapse_into_huge_pages() >> 20} MiB into huge pages", file=sys.stderr, flush=True)
        spare = _fork_spare(job_dir, warm_up)
    return 0


if __name__ == "__main__":
    code = serve(Path(sys.argv[1]))
    sys.stdout.flush()
    os._exit(code)
