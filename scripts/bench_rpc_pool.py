"""Per-call cost of JSON-RPC over each kept-alive HTTP pool a party could use, against a local anvil:
the standard-library pool the parties use (client.rpc_session.KeepAliveSession), urllib3's
HTTPConnectionPool, requests and httpx. N eth_blockNumber calls each, interleaved rounds; prints the
median wall and CPU milliseconds a call of each. Run from the repository root:
  python scripts/bench_rpc_pool.py [calls per round] [rounds]
(docs/BENCHMARKS.md, "HTTP pool for JSON-RPC")."""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable

import httpx
import requests
import urllib3

from client.ports import free_port
from client.rpc_session import KeepAliveSession
from unchained_cli.chain import LocalChain

BODY = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []}).encode()
HEADERS = {"Content-Type": "application/json"}


def callers(url: str) -> dict[str, Callable[[], bytes]]:
    stdlib = KeepAliveSession(url)
    pool = urllib3.HTTPConnectionPool("127.0.0.1", int(url.rsplit(":", 1)[1]), maxsize=16)
    session = requests.Session()
    client = httpx.Client()
    return {
        "stdlib (KeepAliveSession)": lambda: stdlib.post(url, data=BODY, headers=HEADERS, timeout=10).content,
        "urllib3 HTTPConnectionPool": lambda: pool.request("POST", "/", body=BODY, headers=HEADERS,
                                                           timeout=10.0, retries=False).data,
        "requests.Session": lambda: session.post(url, data=BODY, headers=HEADERS, timeout=10).content,
        "httpx.Client": lambda: client.post(url, content=BODY, headers=HEADERS, timeout=10).content,
    }


def measure(call: Callable[[], bytes], n: int) -> tuple[float, float]:
    """Wall and CPU milliseconds a call, over n calls."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        assert b'"result"' in call()
    return (time.perf_counter() - wall) / n * 1e3, (time.process_time() - cpu) / n * 1e3


def main(n: int = 1000, rounds: int = 5) -> None:
    with LocalChain(port=free_port()) as chain:
        each = callers(chain.rpc_url)
        for call in each.values():  # connections opened, code paths warm
            measure(call, 50)
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in each}
        for _ in range(rounds):
            for name, call in each.items():
                results[name].append(measure(call, n))
    print(f"| pool | wall ms a call | CPU ms a call |  ({rounds} rounds of {n} eth_blockNumber, medians)")
    for name, runs in results.items():
        print(f"| {name} | {statistics.median(w for w, _ in runs):.3f} | {statistics.median(c for _, c in runs):.3f} |")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
