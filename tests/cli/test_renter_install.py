"""A renter's install holds no torch, no compiled keccak and no server packages (pyproject.toml's
`renter` extra): the command tree and the renter's commands must run without them. Checked in a
fresh interpreter where importing any of them fails, as it does in such an install."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# What only the provider, verifier and backend extras install.
NOT_A_RENTERS = ("torch", "unchained_keccak", "onnxruntime", "onnx", "fastapi", "uvicorn", "sqlalchemy",
                 "alembic", "psycopg", "minio")

_WITHOUT = f"""
import sys
for name in {NOT_A_RENTERS!r}:
    sys.modules[name] = None  # import -> ImportError, as in a renter's install
from unchained_cli.main import main
sys.argv = ["unchained", *sys.argv[1:]]
main()
"""


def _unchained(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _WITHOUT, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


def test_the_renters_commands_run_without_the_other_roles_packages() -> None:
    for command in (["job", "submit", "--help"], ["lease", "start", "--help"], ["--help"]):
        result = _unchained(*command)
        assert result.returncode == 0, (command, result.stdout + result.stderr)
        assert "Usage: unchained" in result.stdout

