"""Reading a running process's environment from outside it (Linux /proc): how the tests prove
what an untrusted model child could see, since TorchScript or ONNX code cannot report it."""

from __future__ import annotations

import threading
import time
from pathlib import Path


def children(parent: int, marker: str) -> list[int]:
    """Pids whose parent is `parent` and whose command line contains `marker` (after exec, so
    /proc/<pid>/environ is the child's own environment, not the parent's copy from fork)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            if ppid == parent and marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                found.append(int(entry.name))
        except (OSError, ValueError):  # gone meanwhile
            continue
    return found


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


class ChildWatcher:
    """Polls for children of `parent` running `marker` that start while it watches (children
    already running, e.g. a warm spare of another test, are left out) and records each one's
    environment."""

    def __init__(self, parent: int, marker: str) -> None:
        self.parent, self.marker = parent, marker
        self.seen: dict[int, dict[str, str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "ChildWatcher":
        self._before = set(children(self.parent, self.marker))
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid in children(self.parent, self.marker):
                if pid not in self.seen and pid not in self._before:
                    try:
                        self.seen[pid] = environ_of(pid)
                    except OSError:
                        continue
            time.sleep(0.005)
