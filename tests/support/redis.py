"""A private redis-server on a free port, without persistence: no other run sees our keys."""

from __future__ import annotations

import gc
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import redis

from tests.support.waiting import wait_until
from client.ports import free_port
from unchained_cli.chain import die_with_parent


@dataclass(frozen=True)
class RedisTls:
    """The server's certificate, its key and the CA that signed it: the server then speaks TLS only."""

    ca: Path
    cert: Path
    key: Path


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


@contextmanager
def private_redis(tls: RedisTls | None = None) -> Iterator[int]:
    """Yields the port of a redis-server started here and stopped afterwards. Raises
    FileNotFoundError when redis-server is not installed (callers skip)."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise FileNotFoundError("redis-server is not installed")
    port = free_port()
    if tls is None:
        listen = ["--port", str(port)]
        client = redis.Redis(host="127.0.0.1", port=port)
    else:
        listen = ["--port", "0", "--tls-port", str(port), "--tls-cert-file", str(tls.cert),
                  "--tls-key-file", str(tls.key), "--tls-ca-cert-file", str(tls.ca), "--tls-auth-clients", "no"]
        client = redis.Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=str(tls.ca))
    proc = subprocess.Popen([binary, *listen, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent)
    try:
        wait_until(lambda: _pings(client), 10, f"redis-server on port {port} answers")
        yield port
    finally:
        client.close()
        # A Celery result unsubscribes from its reply when collected; one collected after the
        # server is gone logs a reconnect failure from whatever test the collector runs in.
        gc.collect()
        proc.terminate()
        proc.wait(timeout=10)
