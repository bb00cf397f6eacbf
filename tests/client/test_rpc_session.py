"""The RPC client's HTTP session: a node reached directly is served over kept-alive connections
of the standard library (one per thread, opened again once when the node dropped it, failures
raised as requests' errors); otherwise the session reads the environment (proxies, NO_PROXY) once,
when it is built, and honours it as requests would: an operator behind an HTTP proxy still
reaches the node."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import requests

from client import keepalive
from client.errors import NodeUnavailable
from client.ports import free_port
from client.rpc_session import KeepAliveSession, rpc_session
from client.tx import connect, http_web3
from rpc_proxy import RpcProxy
from unchained_cli.chain import LocalChain


class _Proxy(BaseHTTPRequestHandler):
    """An HTTP proxy that answers every JSON-RPC request itself (chain id 31337) and records
    the absolute URL each request was sent to."""

    seen: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append(self.path)
        _answer(self, 200, json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": "0x7a69"}).encode())

    def log_message(self, *_: object) -> None:
        pass


def _answer(handler: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


@contextmanager
def _serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def proxy() -> Iterator[str]:
    _Proxy.seen = []
    with _serving(_Proxy) as url:
        yield url


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


@pytest.fixture(scope="module")
def node() -> Iterator[str]:
    with LocalChain(port=free_port()) as local:
        yield local.rpc_url


def test_a_direct_node_is_served_over_one_kept_alive_connection(node, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    with RpcProxy(node) as proxy:
        assert isinstance(rpc_session(proxy.url), KeepAliveSession)
        web3 = connect(proxy.url, timeout_s=5)
        heads = [web3.eth.block_number for _ in range(10)]
        batch = web3.provider.make_batch_request([("eth_chainId", []), ("eth_blockNumber", [])])
        assert [int(answer["result"], 16) for answer in batch] == [31337, heads[-1]]
        assert web3.eth.chain_id == 31337 and proxy.posts >= 11
        assert proxy.connections == 1


@pytest.mark.parametrize("seen", [True, False], ids=["seen-before-use", "found-at-the-send"])
def test_a_connection_the_node_dropped_is_opened_again_and_the_call_sent_once(node, seen, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A connection the node closed while idle is seen before use; one that closes as the call
    is sent (as if the check had passed a moment before) is opened again and the call repeated."""
    if not seen:
        monkeypatch.setattr(keepalive, "_dropped", lambda sock: False)
    with RpcProxy(node, close_each=True) as proxy:
        session = KeepAliveSession(proxy.url)
        for number in range(5):  # each call after the first finds its connection closed by the node
            body = json.dumps({"jsonrpc": "2.0", "id": number, "method": "eth_chainId", "params": []}).encode()
            answer = session.post(proxy.url, data=body, headers={"Content-Type": "application/json"}, timeout=5)
            assert json.loads(answer.content) == {"jsonrpc": "2.0", "id": number, "result": "0x7a69"}
        assert proxy.calls["eth_chainId"] == 5 and proxy.connections == 5


def test_threads_share_the_kept_alive_connections(node) -> None:  # type: ignore[no-untyped-def]
    with RpcProxy(node) as proxy:
        web3 = http_web3(proxy.url, timeout_s=5)
        web3.eth.chain_id  # noqa: B018  the first call opens the kept-alive connection
        answers: list[int] = []

        def calls() -> None:
            answers.extend(web3.eth.get_transaction_count(ZERO) for _ in range(10))

        for _ in range(3):  # threads come and go (an audit's fetch pool): their connections stay for the next
            threads = [threading.Thread(target=calls) for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
        assert answers == [0] * 120
        assert 1 <= proxy.connections <= 4  # at most one per call in flight at once, never one per thread


ZERO = "0x" + "00" * 20


class _Stub(BaseHTTPRequestHandler):
    """A server that answers every request with `status`, after `delay_s`."""

    status, delay_s = 500, 0.0

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(self.delay_s)
        _answer(self, self.status, b"upstream failed")

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def stub() -> Iterator[str]:
    with _serving(_Stub) as url:
        yield url


def test_failures_are_raised_as_requests_errors(stub, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    session = KeepAliveSession(stub)
    with pytest.raises(requests.HTTPError, match="500"):
        session.post(stub, data=b"{}", timeout=5).raise_for_status()
    monkeypatch.setattr(_Stub, "delay_s", 2.0)
    with pytest.raises(requests.Timeout):
        session.post(stub, data=b"{}", timeout=0.2)
    with pytest.raises(ValueError, match="serves"):
        session.post("http://elsewhere.invalid", data=b"{}")
    nobody = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(requests.ConnectionError) as refused:
        KeepAliveSession(nobody).post(nobody, data=b"{}", timeout=5)
    assert isinstance(refused.value, OSError)  # what callers catch for "the node is down"
    with pytest.raises(NodeUnavailable):
        connect(nobody, timeout_s=5)
