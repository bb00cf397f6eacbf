"""Wakes requests that wait for a job to change (GET /jobs/{id}/result?wait=S) without a thread
per waiter: each waiter is an asyncio.Event on the server's loop, set from wherever the change
is committed (the signed-result PUT on the loop, the indexer's thread after its commit).

Only changes committed by this process are signalled: a waiter also looks at the database again
every RECHECK_S, so a result stored by another replica (or an index written by the leader
replica) is seen within that time."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable

RECHECK_S = 0.25


class JobSignals:
    def __init__(self) -> None:
        self._lock = threading.Lock()  # notify() runs on the indexer's thread too
        self._waiters: dict[int, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}

    def watch(self, job_id: int) -> tuple[asyncio.AbstractEventLoop, asyncio.Event]:
        """Registers a waiter on the running loop; register before reading the job, so that a
        change committed between the read and the wait is not missed."""
        waiter = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            self._waiters.setdefault(job_id, set()).add(waiter)
        return waiter

    def unwatch(self, job_id: int, waiter: tuple[asyncio.AbstractEventLoop, asyncio.Event]) -> None:
        with self._lock:
            waiters = self._waiters.get(job_id)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._waiters[job_id]

    def notify(self, job_ids: Iterable[int]) -> None:
        """Wakes every waiter of these jobs (from any thread), after their change is committed."""
        with self._lock:
            woken = [w for job_id in set(job_ids) for w in self._waiters.get(job_id, ())]
        for loop, event in woken:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # the loop closed (server shutting down): nobody left to wake
                pass

    def waiting(self) -> int:
        with self._lock:
            return sum(len(w) for w in self._waiters.values())


__all__ = ["RECHECK_S", "JobSignals"]
