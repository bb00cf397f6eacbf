"""A free TCP port for a service this process is about to start (anvil, the backend, a lease's sshd).

bind(0) would hand out a port from the kernel's ephemeral range, the same range every outgoing
connection draws its local port from: between choosing it and the service binding it, any client
on the machine may take it (CI saw the backend fail with "address already in use"). A port below
that range is taken only by a listener, and one that is listening already fails the probe."""

from __future__ import annotations

import random
import socket
from pathlib import Path

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 10_000  # above the well-known and commonly configured service ports
TRIES = 200


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (32768 unless configured; also off Linux)."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def free_port(host: str = "127.0.0.1") -> int:
    high = ephemeral_low()
    if high <= LOWEST + TRIES:  # an ephemeral range configured to start low: only the kernel can choose
        return _kernel_port(host)
    for port in random.sample(range(LOWEST, high), TRIES):
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    return _kernel_port(host)


def _kernel_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on `port` now: bound as servers bind (anvil, uvicorn,
    redis-server), so connections a stopped one left in TIME_WAIT do not count."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True
