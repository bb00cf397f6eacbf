"""The RPC client's HTTP session reads the environment (proxies, NO_PROXY) once, when it is built,
and honours it as requests would: an operator behind an HTTP proxy still reaches the node."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from client.errors import NodeUnavailable
from client.tx import connect, rpc_session


class _Proxy(BaseHTTPRequestHandler):
    """An HTTP proxy that answers every JSON-RPC request itself (chain id 31337) and records
    the absolute URL each request was sent to."""

    seen: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append(self.path)
        body = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": "0x7a69"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def proxy() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Proxy)
    _Proxy.seen = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


NODE = "http://node.invalid:8545"  # resolvable by no one: only a proxy can answer for it


def test_a_node_behind_the_proxy_of_the_environment_is_reached_through_it(proxy, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("HTTP_PROXY", proxy)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    web3 = connect(NODE, timeout_s=5)
    assert web3.eth.chain_id == 31337
    assert _Proxy.seen and all(url.startswith(NODE) for url in _Proxy.seen), _Proxy.seen


def test_no_proxy_sends_the_node_direct(proxy, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("HTTP_PROXY", proxy)
    monkeypatch.setenv("NO_PROXY", "node.invalid")
    with pytest.raises(NodeUnavailable):
        connect(NODE, timeout_s=5)
    assert _Proxy.seen == []


def test_the_environment_is_read_when_the_session_is_built_not_at_each_request(proxy, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("HTTP_PROXY", proxy)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    session = rpc_session(NODE)
    monkeypatch.setenv("NO_PROXY", "node.invalid")  # too late for this session
    assert session.post(NODE, json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId"}, timeout=5).json()[
        "result"] == "0x7a69"
    assert session.trust_env is False and session.proxies["http"] == proxy
