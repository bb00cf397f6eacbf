"""The agent's metrics and status server with a real client: a scraper that hangs up before its
answer is written costs a line at most at debug level, never a traceback on the provider's terminal."""

from __future__ import annotations

import socket
import struct
import threading

from provider_agent.metrics import MetricsServer
from tests.support.waiting import wait_until


def _handlers_running() -> bool:
    return any("process_request_thread" in thread.name for thread in threading.enumerate())


def test_a_scraper_that_hangs_up_early_leaves_no_traceback(capfd) -> None:  # type: ignore[no-untyped-def]
    gone = threading.Event()

    def status() -> dict[str, int]:
        gone.wait(10)  # answers only once the scraper has left
        return {"jobs": 1}

    server = MetricsServer(0).start(status, list)
    try:
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
            sock.sendall(b"GET /status HTTP/1.1\r\nHost: agent\r\n\r\n")
            wait_until(_handlers_running, 10, "the request is being handled")
        gone.set()
        wait_until(lambda: not _handlers_running(), 10, "the handler ends")
        with socket.create_connection(("127.0.0.1", server.port)) as sock:  # and it still answers
            sock.sendall(b"GET /status HTTP/1.0\r\n\r\n")
            assert sock.makefile("rb").readline().startswith(b"HTTP/1.0 200")
    finally:
        server.stop()
    assert "Traceback" not in capfd.readouterr().err
