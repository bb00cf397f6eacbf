"""/metrics (Prometheus text format 0.0.4) and /status (JSON) of a running agent.

Written by hand (a dozen gauges) rather than through a client library: one dependency fewer in
an environment whose pins are tight. The numbers come from `Agent.status()`, read at scrape time.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

logger = logging.getLogger(__name__)

PREFIX = "unchained_provider"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render(status: dict[str, Any], switches: list[float] | None = None) -> str:
    """The agent's status as Prometheus exposition text."""
    lines: list[str] = []

    def gauge(name: str, help_text: str, samples: list[tuple[dict[str, str], float]], kind: str = "gauge") -> None:
        lines.append(f"# HELP {PREFIX}_{name} {help_text}")
        lines.append(f"# TYPE {PREFIX}_{name} {kind}")
        for labels, value in samples:
            label_text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
            lines.append(f"{PREFIX}_{name}{{{label_text}}} {float(value)!r}" if label_text
                         else f"{PREFIX}_{name} {float(value)!r}")

    who = {"provider": status["address"].lower()}
    gauge("up", "1 while the agent runs.", [(who, 1)])
    gauge("registered", "1 when registered in the ProviderRegistry.", [(who, int(status["registered"]))])
    gauge("active", "1 when active in the market.", [(who, int(status["active"]))])
    gauge("stake_wei", "Bonded stake in wei.", [(who, status["stake_wei"])])
    gauge("earnings_owed_wei", "Pull balances waiting to be withdrawn, in wei.", [(who, status["earnings_owed_wei"])])
    gauge("jobs", "Jobs in the local record by status.",
          [({**who, "status": s}, n) for s, n in status["jobs"].items()])
    gauge("hashrate_hps", "Reference or external miner hash rate (hashes per second).", [(who, status["hashrate"])])
    gauge("shares_found", "Shares found by the reference miner since start.", [(who, status["shares"])], "counter")
    gauge("job_items_per_second", "Job throughput over the model run time.", [(who, status["items_per_s"])])
    gauge("mining_state", "1 for the miner's current state.",
          [({**who, "state": status["mining_state"]}, 1)])
    if switches:
        gauge("last_switch_seconds", "Time the last pause of the miner took.", [(who, switches[-1])])
    return "\n".join(lines) + "\n"


class MetricsServer:
    """Serves /metrics and /status on 127.0.0.1 (or `host`) in a daemon thread."""

    def __init__(self, status: Callable[[], dict[str, Any]], switches: Callable[[], list[float]],
                 port: int, host: str = "127.0.0.1") -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path not in ("/metrics", "/status"):
                    self.send_error(404)
                    return
                try:
                    current = owner.status()
                except Exception as exc:  # a scrape must answer even when the RPC node is down
                    logger.warning("status for %s failed: %s", self.path, exc)
                    self.send_error(503, str(exc)[:200])
                    return
                if self.path == "/metrics":
                    body = render(current, owner.switches()).encode()
                    kind = "text/plain; version=0.0.4; charset=utf-8"
                else:
                    body = json.dumps(current).encode()
                    kind = "application/json"
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.status = status
        self.switches = switches
        self.server = ThreadingHTTPServer((host, port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, name="metrics", daemon=True)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def start(self) -> "MetricsServer":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
