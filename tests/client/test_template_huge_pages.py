"""The sandbox template backs its anonymous memory with huge pages before it forks job children
(client.sandbox_child._collapse_into_huge_pages), so each fork copies far fewer page-table entries."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")

PROGRAM = """
import json
from client.sandbox_child import _collapse_into_huge_pages

def huge_kib():
    with open("/proc/self/smaps_rollup") as rollup:
        return next(int(line.split()[1]) for line in rollup if line.startswith("AnonHugePages:"))

memory = bytearray(64 << 20)  # touched: every page is there
memory[::4096] = b"x" * len(memory[::4096])
before = huge_kib()
collapsed = _collapse_into_huge_pages()
print(json.dumps({"before": before, "after": huge_kib(), "collapsed": collapsed, "intact": memory[8192] == 120}))
"""


def kernel_collapses() -> bool:
    release = tuple(int(part) for part in platform.release().split(".")[:2] if part.isdigit())
    return release >= (6, 1) and THP.is_file() and "[never]" not in THP.read_text()


@pytest.mark.skipif(not kernel_collapses(), reason="needs Linux 6.1+ (MADV_COLLAPSE) and THP not set to never")
def test_the_templates_anonymous_memory_is_collapsed_into_huge_pages() -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["intact"]
    # Most of the 64 MiB buffer (not all: its ends need not fall on 2 MiB boundaries).
    assert seen["after"] - seen["before"] >= 48 << 10
    assert seen["collapsed"] >= 48 << 20
