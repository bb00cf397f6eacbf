"""Prometheus metrics, one registry per backend instance (tests run several in one process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("unchained_http_requests", "HTTP requests by route and status",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("unchained_http_request_seconds", "HTTP request latency", ["route"],
                                 registry=self.registry)
        self.events_indexed = Counter("unchained_indexer_events", "Contract events indexed",
                                      registry=self.registry)
        self.indexed_block = Gauge("unchained_indexer_block", "Last block applied by the indexer",
                                   registry=self.registry)
        self.upload_bytes = Counter("unchained_upload_bytes", "Bytes accepted by uploads", ["kind"],
                                    registry=self.registry)

    def render(self) -> bytes:
        return generate_latest(self.registry)
