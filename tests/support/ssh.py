"""OpenSSH from tests: a key pair, and a command run on a lease's sshd."""

from __future__ import annotations

import subprocess
from pathlib import Path


def keypair(path: Path) -> Path:
    """A new ed25519 key pair without a passphrase, `path` and `path`.pub; returns `path`."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


def ssh(key: Path, port: int, user: str, command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`command` run as `user` on 127.0.0.1:`port` with `key` alone, in batch mode, the host key
    unchecked (each lease has a new one)."""
    return subprocess.run(["ssh", "-i", str(key), "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                           "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                           "-o", "LogLevel=ERROR", "-p", str(port), f"{user}@127.0.0.1", command],
                          capture_output=True, text=True, timeout=timeout)


__all__ = ["keypair", "ssh"]
