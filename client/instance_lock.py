"""One running instance per data directory: an exclusive `flock` on `<dir>/<role>.lock`.

Two agents on one directory would share its SQLite records, content cache and task nonces and
race on them (and, with one key, on the same queue and nonces on-chain). The kernel frees a flock
when its process ends, however it ends, so a crashed instance never blocks the next start, and a
lock file left behind means nothing by itself. The holder writes its pid into the file, only so
the refusal can say which process holds it.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from client.errors import InstanceRunning


class InstanceLock:
    """Held from `acquire` (or entering `with`) until `release` (leaving it) or the process ends."""

    def __init__(self, directory: Path, role: str, option: str = "--data-dir") -> None:
        """`option`: the command's flag that names another directory, for the refusal."""
        self.directory = directory
        self.role = role
        self.option = option
        self.path = directory / f"{role.replace(' ', '-')}.lock"
        self._descriptor: int | None = None

    def acquire(self) -> "InstanceLock":
        """Takes the lock or raises InstanceRunning at once (never waits)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        # Not inherited by the programs this one starts (PEP 446): a job sandbox or lease
        # environment outliving a crash does not keep the directory locked.
        descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(descriptor, 32).decode(errors="replace").strip()
            os.close(descriptor)
            raise InstanceRunning(self.directory, self.role, holder, self.option) from None
        os.ftruncate(descriptor, 0)
        os.write(descriptor, f"{os.getpid()}\n".encode())
        self._descriptor = descriptor
        return self

    def __enter__(self) -> "InstanceLock":
        return self.acquire()

    def __exit__(self, *_: object) -> None:
        self.release()

    def release(self) -> None:
        if self._descriptor is not None:
            os.close(self._descriptor)  # closing the descriptor frees the flock
            self._descriptor = None


__all__ = ["InstanceLock"]
