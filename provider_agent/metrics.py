"""/metrics (Prometheus text format 0.0.4) and /status (JSON) of a running agent.

The numbers come from `Agent.status()`, read at scrape time, so the metrics are a custom
prometheus_client collector over one status snapshot (as the verifier and backend use
prometheus_client for theirs) rather than gauges kept up to date by the agent.
"""

from __future__ import annotations

import errno
import json
import logging
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from provider_agent import ProviderAgentError

logger = logging.getLogger(__name__)

PREFIX = "unchained_provider"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class StatusCollector:
    """One status snapshot (and the miner's pause times) as metric families."""

    def __init__(self, status: dict[str, Any], switches: list[float] | None = None) -> None:
        self.status = status
        self.switches = switches or []

    def collect(self) -> Iterator[Metric]:
        status, who = self.status, str(self.status["address"]).lower()

        def gauge(name: str, help_text: str, value: float, **labels: str) -> GaugeMetricFamily:
            family = GaugeMetricFamily(f"{PREFIX}_{name}", help_text, labels=["provider", *labels])
            family.add_metric([who, *labels.values()], value)
            return family

        yield gauge("up", "1 while the agent runs.", 1)
        yield gauge("registered", "1 when registered in the ProviderRegistry.", int(status["registered"]))
        yield gauge("active", "1 when active in the market.", int(status["active"]))
        yield gauge("stake_wei", "Bonded stake in wei.", status["stake_wei"])
        yield gauge("earnings_owed_wei", "Pull balances waiting to be withdrawn, in wei.", status["earnings_owed_wei"])
        jobs = GaugeMetricFamily(f"{PREFIX}_jobs", "Jobs in the local record by status.", labels=["provider", "status"])
        for job_status, count in status["jobs"].items():
            jobs.add_metric([who, job_status], count)
        yield jobs
        yield gauge("hashrate_hps", "Reference or external miner hash rate (hashes per second).", status["hashrate"])
        shares = CounterMetricFamily(f"{PREFIX}_shares_found", "Shares found by the reference miner since start.",
                                     labels=["provider"])
        shares.add_metric([who], status["shares"])
        yield shares
        yield gauge("job_items_per_second", "Job throughput over the model run time.", status["items_per_s"])
        yield gauge("mining_state", "1 for the miner's current state.", 1, state=status["mining_state"])
        if self.switches:
            yield gauge("last_switch_seconds", "Time the last pause of the miner took.", self.switches[-1])


def render(status: dict[str, Any], switches: list[float] | None = None) -> str:
    """The agent's status as Prometheus exposition text."""
    return generate_latest(StatusCollector(status, switches)).decode()  # type: ignore[arg-type]


class MetricsPortInUse(ProviderAgentError):
    """The metrics port is taken (another agent, or another program)."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(f"metrics port {port} on {host} is already in use (another agent?): "
                         "pass --metrics-port with a free port (0 picks one)")
        self.host, self.port = host, port


class MetricsServer:
    """Serves /metrics and /status on 127.0.0.1 (or `host`) in a daemon thread. The port is bound
    when the server is made (`provider run` makes it before opening the key, so a taken port is
    said first); it answers from `start` on."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
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
                    kind = CONTENT_TYPE
                else:
                    body = json.dumps(current).encode()
                    kind = "application/json"
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.status: Callable[[], dict[str, Any]] = dict
        self.switches: Callable[[], list[float]] = list
        try:
            self.server = ThreadingHTTPServer((host, port), Handler)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise MetricsPortInUse(host, port) from None
            raise
        self.thread = threading.Thread(target=self.server.serve_forever, name="metrics", daemon=True)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def start(self, status: Callable[[], dict[str, Any]], switches: Callable[[], list[float]]) -> "MetricsServer":
        """Answers from now on with `status()` (and the miner's pause times, `switches()`)."""
        self.status, self.switches = status, switches
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.thread.is_alive():  # shutdown() waits for a serve loop that never started otherwise
            self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> "MetricsServer":
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()
