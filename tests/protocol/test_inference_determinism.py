"""Jobs run with torch's deterministic algorithms switched on, without paying for the compiler
stack that `torch.use_deterministic_algorithms` imports (about 800 modules, 1.6 s here): the
switch is the same ATen flag, read back through torch's public API."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_deterministic_switch_is_on_and_the_compiler_stack_stays_unloaded() -> None:
    probe = ("import sys, torch; import protocol.inference as inference; inference.deterministic(2);"
             "print(torch.are_deterministic_algorithms_enabled(),"
             " torch.is_deterministic_algorithms_warn_only_enabled(), torch.get_num_threads(),"
             " 'torch._inductor.config' in sys.modules, 'sympy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["True", "True", "2", "False", "False"], out


def test_a_torchscript_model_runs_its_own_graph_on_every_call_never_a_rewritten_one() -> None:
    """TorchScript's optimizing executor profiles a module's first calls, then runs a graph it
    rewrote (inlined, specialized to the shapes it saw): the first batches of a job and later
    ones would go through different graphs. Through load_model, the graph that ran on the fifth
    call is still the module's own (its submodules' forward methods called as written)."""
    import io

    import numpy as np
    import torch

    from protocol.inference import load_model

    torch.manual_seed(0)
    buffer = io.BytesIO()
    torch.jit.save(torch.jit.script(torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.Tanh())), buffer)
    run = load_model(buffer.getvalue(), "torchscript")
    batch = np.ones((3, 8), np.float32)
    outputs = [run(batch) for _ in range(5)]
    executed = str(torch.jit.last_executed_optimized_graph())
    assert 'prim::CallMethod[name="forward"]' in executed and "aten::linear" not in executed, executed
    assert all(np.array_equal(outputs[0], later) for later in outputs[1:])
