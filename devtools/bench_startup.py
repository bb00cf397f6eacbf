"""How long `unchained` takes to start: wall and CPU time (user + system), best of `runs`, of a few commands that do no
work (help pages, the renter's reads against closed ports) beside a bare `python -c pass`, the
modules each one imports (`python -X importtime`), and the machine's load average (1 minute) when
each row was measured.

    python -m devtools.bench_startup [--runs 5] [--root DIR ...]

Each command runs as `python -m unchained_cli.main ARGS` with DIR (default: this checkout) as
its working directory, so another tree (`git archive main | tar -x -C DIR`) is measured with the
same interpreter and packages; with several, their runs alternate, so each sees the same load.
Best of `runs`: the machine's other load only ever adds time; CPU time, which waiting for a core
does not count, is the figure to compare on a busy machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SOMEONE = "0x" + "11" * 20
COMMANDS = (
    ("--help",),
    ("job", "--help"),
    # The reads fail at once (nothing listens on port 1): their start-up and error path.
    ("job", "status", "1", "--backend", "http://127.0.0.1:1"),
    ("job", "list", "--address", SOMEONE, "--backend", "http://127.0.0.1:1"),
    ("lease", "list", "--address", SOMEONE, "--backend", "http://127.0.0.1:1", "--rpc", "http://127.0.0.1:1"),
    ("lease", "status", "1", "--backend", "http://127.0.0.1:1", "--rpc", "http://127.0.0.1:1"),
    ("model", "list", "--backend", "http://127.0.0.1:1"),
    ("balance", "--address", SOMEONE, "--rpc", "http://127.0.0.1:1"),
    ("provider", "--help"),
)
# Whose import shows what a command loads without using it.
HEAVY = ("web3", "torch", "celery", "sqlalchemy", "fastapi", "prometheus_client", "eth_account", "numpy")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def best_times(argv: list[str], roots: list[Path], runs: int) -> list[tuple[float, float]]:
    """The best (wall, CPU) seconds of `argv` in each root, their runs alternating."""
    best = [(float("inf"), float("inf"))] * len(roots)
    for _ in range(runs):
        for i, root in enumerate(roots):
            cpu, start = _children_cpu(), time.perf_counter()
            subprocess.run(argv, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
            wall, cpu = time.perf_counter() - start, _children_cpu() - cpu
            best[i] = (min(best[i][0], wall), min(best[i][1], cpu))
    return best


def imported(argv: list[str], cwd: Path) -> tuple[int, list[str]]:
    """How many modules the command imports, and which of HEAVY."""
    done = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], cwd=cwd, capture_output=True, text=True,
                          timeout=300)
    names = [line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    return len(names) - 1, [h for h in HEAVY if h in names]  # less the header line


def report(roots: list[Path], runs: int) -> str:
    """The markdown table: `python -c pass`, then each command in each root."""
    os.environ.pop("UNCHAINED_CONFIG", None)
    wall, cpu = best_times([sys.executable, "-c", "pass"], roots[:1], runs)[0]
    lines = [f"`python -c pass`: {wall:.2f} s wall, {cpu:.2f} s CPU (best of {runs}), load {os.getloadavg()[0]:.1f}",
             "", f"| command | tree | wall (s) | CPU (s) | load | modules imported | of {', '.join(HEAVY)} |",
             "|---|---|---:|---:|---:|---:|---|"]
    for command in COMMANDS:
        argv = [sys.executable, "-m", "unchained_cli.main", *command]
        for root, (wall, cpu) in zip(roots, best_times(argv, roots, runs)):
            count, heavy = imported(argv, root)
            lines.append(f"| `unchained {' '.join(command)}` | {root} | {wall:.2f} | {cpu:.2f} | "
                         f"{os.getloadavg()[0]:.1f} | {count} | {', '.join(heavy) or 'none'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--root", type=Path, action="append", help="a tree to measure (repeatable)")
    args = parser.parse_args()
    print(report(args.root or [REPO_ROOT], args.runs))


if __name__ == "__main__":
    main()
