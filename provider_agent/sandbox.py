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


def _load(model_path: str, model_format: str):  # returns a callable numpy batch -> numpy batch
    if model_format == "torchscript":
        import torch

        module = torch.jit.load(model_path, map_location="cpu")
        module.eval()

        def run(batch):
            with torch.inference_mode():
                out = module(torch.from_numpy(batch))
            if not isinstance(out, torch.Tensor):
                raise TypeError(f"the model returned {type(out).__name__}; a job model returns one tensor")
            return out.numpy()

        return run
    if model_format == "onnx":
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = int(os.environ.get("UNCHAINED_JOB_THREADS", "1"))
        session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
        if len(session.get_inputs()) != 1:
            raise TypeError(f"the ONNX model takes {len(session.get_inputs())} inputs; a job model takes one")
        name = session.get_inputs()[0].name
        return lambda batch: session.run(None, {name: batch})[0]
    raise ValueError(f"unknown model format {model_format!r}")


def main(request_path: str) -> int:
    import numpy as np

    from protocol.jobs import decode_output, encode_output

    request = json.loads(Path(request_path).read_text())
    out_dir = Path(request["out_dir"])
    try:
        if request["format"] == "torchscript":
            import torch

            torch.set_num_threads(int(request.get("threads", 1)))
        run = _load(request["model"], request["format"])
        inputs = request["inputs"]
        batch_size = int(request["batch_size"])
        for start in range(0, len(inputs), batch_size):
            items = [decode_output(Path(p).read_bytes()) for p in inputs[start:start + batch_size]]
            shapes = {item.shape for item in items}
            if len(shapes) != 1:
                raise ValueError(f"items {start}..{start + len(items) - 1} have different shapes {sorted(shapes)}")
            outputs = np.asarray(run(np.stack(items)))
            if outputs.ndim == 0 or outputs.shape[0] != len(items):
                raise ValueError(f"the model returned shape {outputs.shape} for a batch of {len(items)}")
            for offset, output in enumerate(outputs):
                (out_dir / f"{start + offset}.out").write_bytes(encode_output(np.ascontiguousarray(output)))
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

    import protocol.jobs  # noqa: F401

    line = sys.stdin.readline().strip()
    return main(line) if line else 0  # EOF: the agent went away before giving us a job


if __name__ == "__main__":
    code = _warm_then_wait()
    sys.stdout.flush()
    sys.stderr.flush()
    # Every output file is closed by now; skipping the interpreter's teardown of torch and
    # onnxruntime (about 0.3 s) is what makes a warm child's job take milliseconds.
    os._exit(code)
