"""CPU time spent by groups of processes over a run, read from the kernel (psutil).

A group is a list of process roots; each root counts either alone (its own user + system time)
or with every descendant (`Tree`). A descendant that exits and is reaped inside the tree leaves
its time in its parent's children times, so a tree's total is the sum over its living members
of user + system + children's user + system: what a job child or a replaced sandbox template
burned still counts after it is gone. Only processes reparented outside the tree (to init) are
lost; the market's children die with their parents (PDEATHSIG), so none should be.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class Root:
    """A process, alone (`tree=False`: its own time, e.g. the bench process, whose children are
    the market's services) or with its descendants (`tree=True`)."""

    pid: int
    tree: bool = True
    without_root: bool = False  # only the descendants (and what they reaped): e.g. a provider's sandbox


def _own(times: psutil._common.pcputimes) -> float:  # type: ignore[name-defined]
    return times.user + times.system


def _with_reaped(times: psutil._common.pcputimes) -> float:  # type: ignore[name-defined]
    return times.user + times.system + times.children_user + times.children_system


def cpu_seconds(root: Root) -> float:
    """CPU seconds the root has used so far (0 when it is gone: its time is lost with it)."""
    try:
        process = psutil.Process(root.pid)
        times = process.cpu_times()
        if not root.tree:
            return _own(times)
        total = _with_reaped(times) - (_own(times) if root.without_root else 0.0)
        for child in process.children(recursive=True):
            try:
                total += _with_reaped(child.cpu_times())
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                pass  # exited between the listing and the read; counted once its parent reaps it
        return total
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return 0.0


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent on anything but idling since boot."""
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


@dataclass(frozen=True)
class CpuUsage:
    """CPU seconds per group over `wall_s`, the cores of the machine, and how busy the machine
    was meanwhile (other work on it included)."""

    seconds: dict[str, float]
    wall_s: float
    cores: int
    machine_busy_s: float = 0.0

    @property
    def machine_busy(self) -> float:
        return self.machine_busy_s / (self.wall_s * self.cores) if self.wall_s > 0 else 0.0

    @property
    def total(self) -> float:
        return sum(self.seconds.values())

    @property
    def utilisation(self) -> float:
        """The share of the machine the groups used (1.0: every core busy the whole time)."""
        return self.total / (self.wall_s * self.cores) if self.wall_s > 0 else 0.0


class CpuMeter:
    """Samples every group at `start()` and at `stop()`; the difference is what the run cost."""

    def __init__(self, groups: Mapping[str, list[Root]]) -> None:
        self.groups = dict(groups)
        self._start: dict[str, float] = {}
        self._machine = 0.0
        self._began = 0.0

    def _sample(self) -> dict[str, float]:
        return {name: sum(cpu_seconds(r) for r in roots) for name, roots in self.groups.items()}

    def start(self) -> CpuMeter:
        self._start = self._sample()
        self._machine = machine_busy_seconds()
        self._began = time.monotonic()
        return self

    def stop(self) -> CpuUsage:
        wall = time.monotonic() - self._began
        end = self._sample()
        return CpuUsage({name: max(0.0, end[name] - self._start[name]) for name in self.groups}, wall,
                        psutil.cpu_count() or 1, machine_busy_seconds() - self._machine)


__all__ = ["CpuMeter", "CpuUsage", "Root", "cpu_seconds", "machine_busy_seconds"]
