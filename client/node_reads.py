"""Reads from a node without web3: JSON-RPC posted through client.rpc_session's session (kept-alive
connections), views encoded and decoded with eth_abi. Importing web3 is most of a short command's
start-up (about half a second of CPU on these machines); a command that only reads a few values
(`unchained balance`, the chain's clock in `lease list`) reads through here. What signs or
follows logs keeps web3 (client.tx, client.log_follower).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eth_abi import decode, encode
from eth_utils import keccak
from eth_utils.abi import collapse_if_tuple

from client.deployment_file import DEPLOYMENTS_DIR, load_deployment
from client.errors import ClientError, NodeUnavailable
from client.rpc_session import rpc_session
from protocol.deployments import Deployment

Request = tuple[str, list[Any]]
BATCH_READS = 50  # requests in one JSON-RPC batch: public nodes refuse larger batches (often 100)
LOG_RANGE = 2000  # blocks per eth_getLogs: what client.log_follower asks at most, which public nodes allow


class NodeReadFailed(ClientError):
    """The node answered a read with an error (a reverted view, an unknown method)."""


class NodeReader:
    """One node's JSON-RPC, requests sent alone or several in one round trip."""

    def __init__(self, rpc_url: str, timeout_s: float = 30.0) -> None:
        self.url = rpc_url
        self.timeout_s = timeout_s
        self._session = rpc_session(rpc_url)

    def batch(self, requests: Sequence[Request]) -> list[Any]:
        """The results of `requests`, in their order, BATCH_READS to an HTTP request."""
        return [r for i in range(0, len(requests), BATCH_READS) for r in self._batch(requests[i:i + BATCH_READS])]

    def _batch(self, requests: Sequence[Request]) -> list[Any]:
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
        [block] = self.batch([LATEST_BLOCK])
        return int(block["timestamp"], 16)

    def logs(self, address: str, topics: Sequence[Sequence[str | None]], start: int) -> list[dict[str, Any]]:
        """The logs of `address` matching any of `topics` (each a topic filter) from block `start`
        to the head, LOG_RANGE blocks to a request, in block order within each filter."""
        [head] = self.batch([("eth_blockNumber", [])])
        spans = [(low, min(int(head, 16), low + LOG_RANGE - 1)) for low in range(start, int(head, 16) + 1, LOG_RANGE)]
        requests = [("eth_getLogs", [{"address": address, "fromBlock": hex(low), "toBlock": hex(high),
                                      "topics": list(t)}]) for t in topics for low, high in spans]
        return [log for found in self.batch(requests) for log in found]


LATEST_BLOCK: Request = ("eth_getBlockByNumber", ["latest", False])


def open_reader(rpc_url: str, deployment_file: Path | None = None, deployments_dir: Path = DEPLOYMENTS_DIR,
                timeout_s: float = 30.0) -> tuple[NodeReader, Deployment]:
    """A reader of the node at `rpc_url` and the deployment to trust on its chain, as
    client.chain.open_chain finds it (NodeUnavailable when nothing answers)."""
    reader = NodeReader(rpc_url, timeout_s)
    [chain_id] = reader.batch([("eth_chainId", [])])
    return reader, load_deployment(int(chain_id, 16), deployment_file, deployments_dir)


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


def event_topic(abi: list[dict[str, Any]], name: str) -> str:
    """topic0 of the ABI's event `name`."""
    [item] = [e for e in abi if e.get("type") == "event" and e.get("name") == name]
    return "0x" + keccak(text=f"{name}({','.join(collapse_if_tuple(p) for p in item['inputs'])})").hex()


__all__ = ["LATEST_BLOCK", "NodeReadFailed", "NodeReader", "View", "event_topic", "open_reader"]
