"""`unchained bench`: runs the project's benchmarks and rewrites docs/BENCHMARKS.md."""

from __future__ import annotations

import datetime as dt
import os
import platform
from collections.abc import Callable
from pathlib import Path

from unchained_cli import bench_gas

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS_MD = REPO_ROOT / "docs" / "BENCHMARKS.md"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def gas_section() -> str:
    lines = [
        "## Gas (anvil, solc 0.8.24 optimizer 200 runs)",
        "",
        "| step | gas | goal | within goal |",
        "| --- | ---: | ---: | --- |",
    ]
    for row in bench_gas.measure():
        goal = f"{row.goal:,}" if row.goal else ""
        ok = "" if row.goal is None else ("yes" if row.gas <= row.goal else "**no**")
        lines.append(f"| {row.step} | {row.gas:,} | {goal} | {ok} |")
    lines += ["", "Method: unchained_cli/bench_gas.py (uniform trees stand in for big commitments; see its docstring)."]
    return "\n".join(lines)


SECTIONS: dict[str, Callable[[], str]] = {"gas": gas_section}


def run(selected: list[str] | None = None, path: Path = BENCHMARKS_MD) -> str:
    names = selected or list(SECTIONS)
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        raise ValueError(f"unknown benchmark(s) {unknown}; known: {sorted(SECTIONS)}")
    header = [
        "# Benchmarks",
        "",
        f"Command: `unchained bench{''.join(' --only ' + n for n in selected or [])}`  ",
        f"Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC  ",
        f"Machine: {machine()}",
        "",
    ]
    text = "\n".join(header) + "\n\n".join(SECTIONS[n]() for n in names) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return text
