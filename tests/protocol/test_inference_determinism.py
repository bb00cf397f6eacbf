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
