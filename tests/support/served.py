"""Backends served for tests: the real app in a thread, and a compromised one in front of it."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import uvicorn

from backend.api.app import create_app
from backend.settings import Settings
from client.ports import free_port
from tests.support.waiting import wait_until


@contextmanager
def serving(settings: Settings, port: int) -> Iterator[str]:
    """The backend of `settings` served by uvicorn in a thread on 127.0.0.1:`port`; yields its URL."""
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, 30, f"the backend serves on port {port}")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def lying(server: str, edit: Callable[[str, Any], Any]) -> Iterator[str]:
    """A compromised backend: the real one at `server` answers every GET, and its JSON passes
    through `edit(path, document)` on the way. Yields its URL."""
    class Lying(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = json.dumps(edit(self.path, httpx.get(server + self.path).json())).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    evil = ThreadingHTTPServer(("127.0.0.1", free_port()), Lying)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{evil.server_address[1]}"
    finally:
        evil.shutdown()


__all__ = ["lying", "serving"]
