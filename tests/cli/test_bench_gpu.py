"""The prepared GPU check (devtools/bench_gpu.py) must still run when a session is lent a GPU,
which is rare: its CPU dry run plays every section here at small sizes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

from devtools import bench_gpu

REPO = Path(__file__).resolve().parents[2]


def test_every_section_runs_on_the_cpu_dry_run(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "devtools.bench_gpu", "--device", "cpu", "--out", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    results: dict[str, dict] = {}
    for line in (tmp_path / "gpu.jsonl").read_text().splitlines():
        results.update(json.loads(line))
    assert sorted(results) == sorted(bench_gpu.SECTIONS)
    failed = {name: r["error"] for name, r in results.items() if "error" in r}
    assert not failed, failed
    pog = results["pog"]["rows"]
    assert [r["class"] for r in pog] == ["CPU", "CPU"] and all(r["failure"] is None for r in pog)
    assert results["matmul"]["rows"] and all(r["tflops"] >= 0 for r in results["matmul"]["rows"])
    assert "| int8 | 256 |" in (tmp_path / "gpu.md").read_text()


def test_without_cuda_it_says_so_in_one_line_and_exits_0() -> None:
    if torch.cuda.is_available():
        return
    done = subprocess.run([sys.executable, "-m", "devtools.bench_gpu"], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0
    assert done.stdout.strip() == bench_gpu.NO_CUDA
    assert bench_gpu.gpu_section() == bench_gpu.NO_CUDA
