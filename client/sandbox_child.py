"""The child process that runs a job's untrusted model: `python -m client.sandbox_child`.

Started by `client.sandbox.run_model` (for the provider's jobs and the verifiers'
re-executions alike, so both compute with the same code and get bit-identical outputs) with an
allowlisted environment, rlimits and its own session. It imports the inference libraries first,
then reads the path of its request (JSON) from stdin, so it can be started ahead of a job. It
reads only the files named in the request, writes one encoded output per item (`<index>.out`)
and, on a failure it can still report, `error.json` with the error's kind.
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
        for batch in request["batches"]:
            first, inputs, size = int(batch["start"]), batch["inputs"], int(batch["batch_size"])
            for offset in range(0, len(inputs), size):  # one chunk of items decoded at a time
                items = [decode_output(Path(p).read_bytes()) for p in inputs[offset:offset + size]]
                for i, output in enumerate(run_batches(run, items, size, first_index=first + offset)):
                    (out_dir / f"{first + offset + i}.out").write_bytes(encode_output(output))
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
    return main(line) if line else 0  # EOF: the parent went away before giving us a job


if __name__ == "__main__":
    code = _warm_then_wait()
    sys.stdout.flush()
    sys.stderr.flush()
    # Every output file is closed by now; skipping the interpreter's teardown of torch and
    # onnxruntime (about 0.3 s) is what makes a warm child's job take milliseconds.
    os._exit(code)
