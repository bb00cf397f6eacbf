"""A JSON-RPC proxy in front of anvil that counts every request by method and, like many public
nodes, refuses eth_getLogs over more than `max_log_range` blocks; like some, it may refuse batches
(`refuse_batches`) or not know some methods (`unknown_methods`). It speaks HTTP/1.1 and keeps
connections open (`connections` counts those accepted) unless `close_each`: then it closes every
connection after its answer without saying so, as a node dropping idle connections does."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# What Alchemy-style nodes answer for a range that is too wide.
REFUSAL = {"code": -32600, "message": "eth_getLogs block range too large, range should not exceed {limit} blocks"}


class RpcProxy:
    def __init__(self, upstream: str, max_log_range: int | None = None, refuse_batches: bool = False,
                 unknown_methods: frozenset[str] = frozenset(), close_each: bool = False) -> None:
        self.upstream = upstream
        self.max_log_range = max_log_range
        self.refuse_batches = refuse_batches
        self.unknown_methods = unknown_methods
        self.calls: Counter[str] = Counter()
        self.posts = 0  # HTTP requests: a batch is one
        self.log_ranges: list[int] = []  # blocks asked by each eth_getLogs the node answered
        self.refused = 0
        self.connections = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with proxy._lock:
                    proxy.connections += 1

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                answer = proxy._answer(json.loads(body), body)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
                self.close_connection = close_each

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> RpcProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self.log_ranges.clear()

    def total(self) -> int:
        with self._lock:
            return sum(self.calls.values())

    def _answer(self, request: dict[str, Any] | list[dict[str, Any]], body: bytes) -> bytes:
        with self._lock:
            self.posts += 1
        if not isinstance(request, list):
            return self._answer_one(request, body)
        if self.refuse_batches:
            error = {"code": -32600, "message": "batch requests are not supported"}
            return json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
        return b"[" + b",".join(self._answer_one(r, json.dumps(r).encode()) for r in request) + b"]"

    def _answer_one(self, request: dict[str, Any], body: bytes) -> bytes:
        method = request["method"]
        if method in self.unknown_methods:
            error = {"code": -32601, "message": f"the method {method} does not exist/is not available"}
            return json.dumps({"jsonrpc": "2.0", "id": request["id"], "error": error}).encode()
        width = None
        if method == "eth_getLogs":
            params = request["params"][0]
            width = self._number(params.get("toBlock", "latest")) - self._number(params.get("fromBlock", "latest")) + 1
        with self._lock:
            self.calls[method] += 1
            if width is not None and self.max_log_range is not None and width > self.max_log_range:
                self.refused += 1
                error = {**REFUSAL, "message": REFUSAL["message"].format(limit=self.max_log_range)}
                return json.dumps({"jsonrpc": "2.0", "id": request["id"], "error": error}).encode()
            if width is not None:
                self.log_ranges.append(width)
        return self._forward(body)

    def _forward(self, body: bytes) -> bytes:
        forwarded = urllib.request.Request(self.upstream, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(forwarded, timeout=30) as reply:
            return reply.read()

    def _number(self, block: str) -> int:
        """A block parameter as a number; a tag ("latest") is the head, asked upstream uncounted."""
        if block.startswith("0x"):
            return int(block, 16)
        head = self._forward(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "eth_blockNumber"}).encode())
        return int(json.loads(head)["result"], 16)
