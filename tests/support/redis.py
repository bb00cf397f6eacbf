"""A private redis-server on a free port, without persistence: no other run sees our keys."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import redis

from tests.support.waiting import wait_until
from unchained_cli.chain import die_with_parent, free_port


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


@contextmanager
def private_redis() -> Iterator[int]:
    """Yields the port of a redis-server started here and stopped afterwards. Raises
    FileNotFoundError when redis-server is not installed (callers skip)."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise FileNotFoundError("redis-server is not installed")
    port = free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent)
    client = redis.Redis(port=port)
    try:
        wait_until(lambda: _pings(client), 10, f"redis-server on port {port} answers")
        yield port
    finally:
        client.close()
        proc.terminate()
        proc.wait(timeout=10)
