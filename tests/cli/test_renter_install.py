"""A renter's install holds no torch, no compiled keccak, no server packages and neither the
broker's nor the metrics' (pyproject.toml's `renter` extra): the command tree and the renter's
commands must run without them, and start without loading web3 where they do not use it.
Checked in a fresh interpreter where importing any of them fails, as it does in such an install."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# What only the provider, verifier and backend extras install (the `service` extra: celery, redis,
# prometheus-client).
NOT_A_RENTERS = ("torch", "unchained_keccak", "onnxruntime", "onnx", "fastapi", "uvicorn", "sqlalchemy",
                 "alembic", "psycopg", "minio", "celery", "kombu", "redis", "prometheus_client")

_WITHOUT = f"""
import sys
for name in {NOT_A_RENTERS!r}:
    sys.modules[name] = None  # import -> ImportError, as in a renter's install
from unchained_cli.main import main
sys.argv = ["unchained", *sys.argv[1:]]
try:
    main()
finally:
    print("loaded:", " ".join(sorted(name for name in ("web3", "eth_account") if name in sys.modules)),
          file=sys.stderr)
"""


def _unchained(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _WITHOUT, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**__import__("os").environ, "UNCHAINED_CONFIG": ""})


def test_the_renters_commands_run_without_the_other_roles_packages() -> None:
    for command in (["job", "submit", "--help"], ["lease", "start", "--help"], ["model", "push", "--help"],
                    ["withdraw", "--help"], ["account", "list", "--help"], ["--help"]):
        result = _unchained(*command)
        assert result.returncode == 0, (command, result.stdout + result.stderr)
        assert "Usage: unchained" in result.stdout


def test_help_and_reads_start_without_the_chain_client() -> None:
    """`unchained --help` and a group's help load neither web3 nor eth-account: they are most of a
    command's start-up (docs/BENCHMARKS.md); nor does `job status` before the backend answered."""
    for command in (["--help"], ["job", "--help"], ["lease", "--help"]):
        result = _unchained(*command)
        assert result.returncode == 0, (command, result.stdout + result.stderr)
        assert "loaded: \n" in result.stderr, (command, result.stderr)
    status = _unchained("job", "status", "1", "--backend", "http://127.0.0.1:1")
    assert status.returncode == 1, status.stdout + status.stderr
    assert "127.0.0.1:1" in status.stderr and "loaded: \n" in status.stderr, status.stderr


def test_a_services_command_says_which_extra_it_needs() -> None:
    result = _unchained("broker", "revoke", "--provider", "0x" + "11" * 20)
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.match(r"error: this command needs the Python package (redis|celery|kombu), which this install lacks",
                    result.stderr), result.stderr
    assert "unchained[provider]" in result.stderr and "Traceback" not in result.stderr
