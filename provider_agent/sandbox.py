"""The child process that runs one job's model: `python -m provider_agent.sandbox`.

It imports the inference libraries first, then reads the path of its request (JSON) from stdin:
so the agent can start it ahead of a job and hand it the job when one comes.

It is started by `provider_agent.runner` with an address-space limit (RLIMIT_AS), a CPU-time
limit and in its own session, and killed when it overruns its wall-clock budget; so whatever
the model does (raise, loop, allocate without end, crash the interpreter) happens here and not
in the agent. It reads only files the agent put in place (hash-checked), writes one encoded
output file per item and, on a failure it can still report, `error.json` with the error's kind.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def main(request_path: str) -> int:
    from protocol.inference import load_model, run_batches
    from protocol.jobs import decode_output, encode_output

    request = json.loads(Path(request_path).read_text())
    out_dir = Path(request["out_dir"])
    try:
        run = load_model(Path(request["model"]).read_bytes(), request["format"], int(request.get("threads", 1)))
        inputs = request["inputs"]
        batch_size = int(request["batch_size"])
        for start in range(0, len(inputs), batch_size):
            items = [decode_output(Path(p).read_bytes()) for p in inputs[start:start + batch_size]]
            for offset, output in enumerate(run_batches(run, items, batch_size, first_index=start)):
                (out_dir / f"{start + offset}.out").write_bytes(encode_output(output))
    except BaseException as exc:  # every failure of untrusted code is reported, then we exit
        kind = "memory" if isinstance(exc, MemoryError) or "can't allocate memory" in str(exc) \
            or "bad_alloc" in str(exc) else "model"
        (out_dir / "error.json").write_text(json.dumps({
            "kind": kind, "type": type(exc).__name__, "message": str(exc)[:2000],
            "trace": traceback.format_exc()[-4000:],
        }))
        return 1
    return 0


def _warm_then_wait() -> int:
    import numpy  # noqa: F401
    import onnxruntime  # noqa: F401
    import torch  # noqa: F401

    import protocol.inference
    import protocol.jobs  # noqa: F401

    # The first switch to deterministic algorithms costs about a second inside torch: pay it
    # while waiting for a job, not during one (the job's own call then costs nothing).
    protocol.inference.deterministic()
    line = sys.stdin.readline().strip()
    return main(line) if line else 0  # EOF: the agent went away before giving us a job


if __name__ == "__main__":
    code = _warm_then_wait()
    sys.stdout.flush()
    sys.stderr.flush()
    # Every output file is closed by now; skipping the interpreter's teardown of torch and
    # onnxruntime (about 0.3 s) is what makes a warm child's job take milliseconds.
    os._exit(code)
