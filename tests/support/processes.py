"""Processes a test started: stopped as an operator would, and the agent's terminal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from unchained_cli.chain import REPO_ROOT as REPO


def stop(proc: subprocess.Popen[bytes], timeout_s: float = 30) -> None:
    """SIGTERM (as a service manager stops it), then SIGKILL if it is still there after `timeout_s`."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def provider_terminal(args: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`unchained provider run ARGS` from this checkout, `env` over ours, its terminal (stdout and
    stderr) written to `log`; stopped with `stop` at the end."""
    with open(log, "wb") as terminal:
        proc = subprocess.Popen([sys.executable, "-m", "unchained_cli.main", "provider", "run", *args], cwd=REPO,
                                env={**os.environ, "PYTHONPATH": str(REPO), **env}, stdout=terminal,
                                stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        stop(proc)


__all__ = ["provider_terminal", "stop"]
