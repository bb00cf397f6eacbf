"""The agent's backend client signs in only for the server it talks to, with a message the
backend's parser accepts and whose signature recovers to the provider."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from eth_account import Account
from eth_account.messages import encode_defunct

from protocol.siwe import SiweMessage
from client.backend_http import BackendRefused, BackendUnavailable
from provider_agent.backend_client import BackendClient
from tests.support.accounts import PROVIDER_KEY


class Server:
    """A stand-in for the backend's /auth routes that records what the client sent."""

    def __init__(self) -> None:
        self.domain = ""
        self.logins: list[dict] = []
        self.authorizations: list[str | None] = []
        self.puts: list[str] = []
        self.outputs_detail = "Not Found"
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _json(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/auth/nonce":
                    self._json(200, {"nonce": "abcdef0123456789", "domain": outer.domain or self.headers["host"],
                                     "uri": f"http://{self.headers['host']}", "chain_id": 31337,
                                     "expires_at": "2100-01-01T00:00:00Z"})
                    return
                outer.authorizations.append(self.headers.get("authorization"))
                self._json(200, {"items": []})

            def do_PUT(self) -> None:
                self.rfile.read(int(self.headers["content-length"]))
                outer.puts.append(self.path)
                if self.path.endswith("/outputs"):  # as a backend without the route answers (FastAPI)
                    self._json(404, {"detail": outer.outputs_detail})
                    return
                self._json(201, {})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                outer.logins.append(body)
                self._json(200, {"token": f"token-{len(outer.logins)}", "address": "x",
                                 "expires_at": "2100-01-01T00:00:00Z"})

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.http.shutdown()


def test_signs_in_once_with_a_message_the_backend_parser_accepts(server: Server) -> None:
    client = BackendClient(server.url, Account.from_key(PROVIDER_KEY))
    assert client.uploaded_items(1) == set()
    assert client.uploaded_items(2) == set()
    assert len(server.logins) == 1 and server.authorizations == ["Bearer token-1"] * 2
    text, signature = server.logins[0]["message"], server.logins[0]["signature"]
    message = SiweMessage.parse(text)
    assert message.domain == server.url.removeprefix("http://") and message.chain_id == 31337
    assert message.nonce == "abcdef0123456789" and message.expiration_time > message.issued_at
    assert Account.recover_message(encode_defunct(text=text), signature=signature) == Account.from_key(
        PROVIDER_KEY).address


def test_refuses_to_sign_for_another_domain(server: Server) -> None:
    server.domain = "market.example.org"
    client = BackendClient(server.url, Account.from_key(PROVIDER_KEY))
    with pytest.raises(BackendRefused, match="market.example.org"):
        client.uploaded_items(1)
    assert server.logins == []  # nothing was signed or sent


def test_outputs_go_one_by_one_to_a_backend_without_the_route_for_several(server: Server) -> None:
    client = BackendClient(server.url, Account.from_key(PROVIDER_KEY))
    client.upload_outputs(5, [(0, b"a", [bytes(32)]), (1, b"b", [bytes(32)])])
    assert server.puts == ["/jobs/5/outputs", "/jobs/5/outputs/0", "/jobs/5/outputs/1"]
    server.outputs_detail = "job 5 not found"  # the route exists; the job does not (yet): no fallback
    with pytest.raises(BackendUnavailable):
        client.upload_outputs(5, [(0, b"a", [bytes(32)]), (1, b"b", [bytes(32)])])
    assert server.puts[3:] == ["/jobs/5/outputs"]
