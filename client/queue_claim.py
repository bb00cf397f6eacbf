"""One consumer per party queue, across machines: a claim key on the party's own Redis prefix.

Two agents run with one key (a second box, or a second data directory on one box) would take the
same queue's jobs and PoG rounds and race on the account's nonces. The data directory's lock
(client.instance_lock) cannot see another machine, so the running agent also holds
`<prefix>consumer` on the broker, renewed well within its expiry by a thread of its own; an agent
that dies stops renewing, and its claim lapses after `ttl_s`. A restart on the same host and data
directory takes the claim over at once: it holds that directory's lock, so the claim's holder is
gone. The SQLite transport is one machine's file: the directory lock is the whole check there.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from pathlib import Path

import redis

from client.errors import QueueClaimed

logger = logging.getLogger(__name__)


class QueueClaim:
    def __init__(self, broker_url: str, keyprefix: str, queue: str, data_dir: Path, ttl_s: float) -> None:
        self.queue = queue
        self.key = f"{keyprefix}consumer"
        self.ttl_ms = int(ttl_s * 1000)
        self.mine = f"{socket.gethostname()} {data_dir.resolve()} {os.getpid()}"
        self.redis = redis.Redis.from_url(broker_url) if broker_url.startswith(("redis://", "rediss://")) else None
        self._stop = threading.Event()

    def __enter__(self) -> "QueueClaim":
        if self.redis is None:
            return self
        if not self.redis.set(self.key, self.mine, nx=True, px=self.ttl_ms):
            held = self._held()
            if held and held.rsplit(" ", 1)[0] != self.mine.rsplit(" ", 1)[0]:  # another host or data directory
                host, _, rest = held.partition(" ")
                directory, _, pid = rest.rpartition(" ")
                raise QueueClaimed(self.queue, host, directory, pid, self.ttl_ms / 1000)
            # Lapsed meanwhile, or ours before a crash (this process holds that directory's lock).
            self.redis.set(self.key, self.mine, px=self.ttl_ms)
        threading.Thread(target=self._renew, name="queue-claim", daemon=True).start()
        return self

    def _held(self) -> str:
        assert self.redis is not None
        value = self.redis.get(self.key)
        return value.decode() if isinstance(value, bytes) else ""

    def _renew(self) -> None:
        assert self.redis is not None
        while not self._stop.wait(self.ttl_ms / 4000):
            try:
                held = self._held()
                if held in ("", self.mine):
                    self.redis.set(self.key, self.mine, px=self.ttl_ms)
                else:  # ours lapsed (the broker was away) and another agent took the queue
                    logger.warning("%s: now claimed by %s as well; stop one of the two agents", self.queue, held)
            except redis.RedisError:  # the broker is away: the worker says so; renewed when it is back
                pass

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self.redis is None:
            return
        try:
            if self._held() == self.mine:
                self.redis.delete(self.key)
        except redis.RedisError:  # it lapses on its own
            pass
        self.redis.close()


__all__ = ["QueueClaim"]
