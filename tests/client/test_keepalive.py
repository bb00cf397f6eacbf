"""The parties' httpx clients to the backend run over kept-alive standard-library connections
(client.keepalive): the same requests and answers as httpx's own transport, its errors, idle
connections the server dropped opened again, and a request that changes state never sent twice."""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from client import keepalive
from client.keepalive import KeepAliveTransport, http_client
from client.ports import free_port


class _Server(BaseHTTPRequestHandler):
    """Echoes each request as JSON; /gzip answers compressed, /slow late, /close then closes."""

    protocol_version = "HTTP/1.1"
    received: list[str] = []
    connections = 0

    def setup(self) -> None:
        super().setup()
        type(self).connections += 1

    def _answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).received.append(f"{self.command} {self.path}")
        if self.path.startswith("/slow"):
            time.sleep(1.0)
        doc = {"method": self.command, "path": self.path, "body": body.decode(),
               "auth": self.headers.get("Authorization")}
        data = json.dumps(doc).encode()
        status = 404 if self.path.startswith("/missing") else 200
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if self.path.startswith("/gzip"):
            data = gzip.compress(data)
            self.send_header("Content-Encoding", "gzip")
        self.send_header("X-Echo", "yes")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = self.path.startswith("/close")

    do_GET = do_POST = do_PUT = _answer  # noqa: N815 - http.server's names

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Server.received, _Server.connections = [], 0
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_requests_and_answers_are_httpx_own_over_one_connection(server) -> None:  # type: ignore[no-untyped-def]
    client = http_client(server, timeout=5, headers={"Authorization": "Bearer t"})
    assert isinstance(client._transport, KeepAliveTransport)
    got = client.get("/items", params={"index": [1, 2]})
    assert got.status_code == 200 and got.headers["x-echo"] == "yes" and got.reason_phrase == "OK"
    assert got.json() == {"method": "GET", "path": "/items?index=1&index=2", "body": "", "auth": "Bearer t"}
    assert json.loads(client.post("/reports", json={"a": [1, "é"]}).json()["body"]) == {"a": [1, "é"]}
    assert client.put("/jobs/1/signed-result", content=b"x" * 100_000).json()["body"] == "x" * 100_000
    assert client.get("/gzip").json()["path"] == "/gzip"  # decoded as httpx decodes it
    assert client.get("/missing").status_code == 404
    assert _Server.connections == 1
    with pytest.raises(httpx.UnsupportedProtocol):
        client.get("http://elsewhere.invalid/x")


def test_transport_errors_are_httpx_errors(server) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(httpx.ReadTimeout):
        http_client(server, timeout=0.2).get("/slow")
    nobody = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(httpx.ConnectError):
        http_client(nobody, timeout=5).get("/x")


@pytest.mark.parametrize("seen", [True, False], ids=["seen-before-use", "found-at-the-send"])
def test_a_dropped_connection_repeats_a_read_but_never_a_post(server, seen, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    if not seen:
        monkeypatch.setattr(keepalive, "_dropped", lambda sock: False)
    client = http_client(server, timeout=5)
    assert client.get("/close-1").status_code == 200  # the server closes the connection after it
    assert client.get("/after").status_code == 200
    client.get("/close-2")
    if seen:
        assert client.post("/reports", json={}).status_code == 200
        assert _Server.received.count("POST /reports") == 1
    else:  # the POST may have reached the server: it is not sent again, the caller decides
        with pytest.raises(httpx.RemoteProtocolError):
            client.post("/reports", json={})
        assert _Server.received.count("POST /reports") == 0
    assert _Server.received.count("GET /after") == 1


def test_a_proxy_of_the_environment_keeps_httpx_own_transport(server, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert not isinstance(http_client("http://backend.example:8000")._transport, KeepAliveTransport)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert isinstance(http_client(server)._transport, KeepAliveTransport)
