"""Reads from a node without web3: JSON-RPC posted through client.rpc_session's session (kept-alive
connections), views encoded and decoded with eth_abi. Importing web3 is most of a short command's
start-up (about half a second of CPU on these machines); a command that only reads a few values
(`unchained balance`, the chain's clock in `lease list`) reads through here. What signs or
follows logs keeps web3 (client.tx, client.log_follower).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from eth_abi import decode, encode
from eth_utils import keccak
from eth_utils.abi import collapse_if_tuple

from client.errors import ClientError, NodeUnavailable
from client.rpc_session import rpc_session

Request = tuple[str, list[Any]]


class NodeReadFailed(ClientError):
    """The node answered a read with an error (a reverted view, an unknown method)."""


class NodeReader:
    """One node's JSON-RPC, requests sent alone or several in one round trip."""

    def __init__(self, rpc_url: str, timeout_s: float = 30.0) -> None:
        self.url = rpc_url
        self.timeout_s = timeout_s
        self._session = rpc_session(rpc_url)

    def batch(self, requests: Sequence[Request]) -> list[Any]:
        """The results of `requests`, in their order, from one HTTP request."""
        body = json.dumps([{"jsonrpc": "2.0", "id": i, "method": m, "params": p} for i, (m, p) in enumerate(requests)])
        try:
            answer = self._session.post(self.url, data=body.encode(), headers={"Content-Type": "application/json"},
                                        timeout=self.timeout_s)
            answer.raise_for_status()
            doc = json.loads(answer.content)
        except (OSError, ValueError) as exc:  # requests' errors are OSErrors; a page that is not JSON
            raise NodeUnavailable(f"no JSON-RPC node answers at {self.url} ({type(exc).__name__}): "
                                  "start one (`unchained up`) or pass --rpc URL") from exc
        if not isinstance(doc, list):  # the node refused the batch as a whole
            raise NodeReadFailed(f"the node at {self.url} refused {len(requests)} reads: {doc.get('error')}")
        by_id = {r.get("id"): r for r in doc}
        results = []
        for i, (method, _) in enumerate(requests):
            response = by_id.get(i, {"error": "no answer"})
            if response.get("error") is not None:
                raise NodeReadFailed(f"{method} at {self.url}: {response['error']}")
            results.append(response["result"])
        return results

    def timestamp(self) -> int:
        """The latest block's timestamp: the contracts' clock."""
        [block] = self.batch([("eth_getBlockByNumber", ["latest", False])])
        return int(block["timestamp"], 16)


class View:
    """One view function of a contract's ABI, as a JSON-RPC request and the decoding of its answer
    (a single output as its value, several as a dict by name; addresses as the node writes them)."""

    def __init__(self, address: str, abi: list[dict[str, Any]], name: str) -> None:
        [item] = [e for e in abi if e.get("type") == "function" and e.get("name") == name]
        self.address = address
        self._inputs = [collapse_if_tuple(p) for p in item["inputs"]]
        self._selector = keccak(text=f"{name}({','.join(self._inputs)})")[:4]
        self._names = [p["name"] for p in item["outputs"]]
        self._outputs = [collapse_if_tuple(p) for p in item["outputs"]]

    def request(self, *args: Any) -> Request:
        data = "0x" + (self._selector + encode(self._inputs, list(args))).hex()
        return "eth_call", [{"to": self.address, "data": data}, "latest"]

    def decode(self, result: str) -> Any:
        values = decode(self._outputs, bytes.fromhex(result.removeprefix("0x")))
        return values[0] if len(values) == 1 else dict(zip(self._names, values, strict=True))


__all__ = ["NodeReadFailed", "NodeReader", "View"]
