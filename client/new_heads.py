"""New blocks pushed by the node (eth_subscribe newHeads over a WebSocket): a follower that waits
on them handles events as their blocks arrive instead of at its next poll, and may read a pushed
block's logs by the hash it came with (`take`) instead of asking the node for the head first."""

from __future__ import annotations

import json
import logging
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

from websockets.sync.client import connect

log = logging.getLogger(__name__)

PUSHED_KEPT = 64  # headers kept until taken; older ones are dropped (the taker's regular pass covers them)


@dataclass(frozen=True)
class Head:
    """A block header as the node pushed it (hashes 0x-hex, lower-case)."""

    number: int
    hash: str
    parent_hash: str


def pushed_head(message: str | bytes) -> Head | None:
    """The header of an eth_subscription message; None for anything else (or a malformed one)."""
    try:
        header: Any = json.loads(message)["params"]["result"]
        return Head(int(header["number"], 16), header["hash"].lower(), header["parentHash"].lower())
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def websocket_url(rpc_url: str) -> str:
    """The WebSocket endpoint a node serves beside its HTTP one on the same port (anvil, hardhat,
    geth with --ws on the same port): http -> ws, https -> wss."""
    if rpc_url.startswith("https://"):
        return "wss://" + rpc_url[len("https://"):]
    if rpc_url.startswith("http://"):
        return "ws://" + rpc_url[len("http://"):]
    return rpc_url


class NewHeads:
    """Wakes a follower as soon as the node announces a block (eth_subscribe newHeads over a
    WebSocket), so events are handled when they arrive rather than at the next poll. When the
    node has no WebSocket endpoint `wait` simply times out and the caller polls as before; a
    lost connection is retried every `retry_s`."""

    def __init__(self, ws_url: str, retry_s: float = 5.0) -> None:
        self.ws_url = ws_url
        self.retry_s = retry_s
        self.connected = threading.Event()
        self._arrived = threading.Event()
        self._heads: deque[Head] = deque(maxlen=PUSHED_KEPT)
        self._heads_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, name="new-heads", daemon=True)
        self._thread.start()

    def wait(self, timeout: float) -> bool:
        """Waits until a block arrives (True) or `timeout` passes (False)."""
        arrived = self._arrived.wait(timeout)
        self._arrived.clear()
        return arrived

    def take(self) -> list[Head]:
        """The headers pushed since the last take, oldest first (at most PUSHED_KEPT: a gap
        among them means some were dropped, or missed while the connection was down)."""
        with self._heads_lock:
            heads = list(self._heads)
            self._heads.clear()
        return heads

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _listen(self) -> None:
        said = False
        while not self._stop.is_set():
            try:
                with connect(self.ws_url, open_timeout=5) as ws:
                    ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_subscribe", "params": ["newHeads"]}))
                    if "error" in json.loads(ws.recv(timeout=5)):
                        raise OSError("the node refused eth_subscribe newHeads")
                    self.connected.set()
                    log.info("following new blocks pushed by %s", self.ws_url)
                    while not self._stop.is_set():
                        try:
                            message = ws.recv(timeout=0.5)
                        except TimeoutError:
                            continue
                        head = pushed_head(message)
                        if head is not None:
                            with self._heads_lock:
                                self._heads.append(head)
                        self._arrived.set()
            except Exception as exc:  # no endpoint, refused, dropped: poll until it is back
                self.connected.clear()
                if not said:
                    log.info("no block notifications from %s (%s); polling", self.ws_url, exc)
                    said = True
                self._stop.wait(self.retry_s)


__all__ = ["Head", "NewHeads", "pushed_head", "websocket_url"]
