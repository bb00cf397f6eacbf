"""Checks made before the agent stakes or registers: the broker it will consume from answers
(connect + PING) and the backend it reports to answers GET /health. A provider that cannot reach
either would stake, register, and then fail to take any job while listed as active; so each
failure is one line saying what to fix, before any transaction."""

from __future__ import annotations

import httpx

from provider_agent import ProviderAgentError


class PreflightFailed(ProviderAgentError):
    """A service the agent needs does not answer; the text says which and why."""


def check_broker(url: str, timeout_s: float = 5.0) -> None:
    """The broker URL parses and its server answers: PING for Redis, a connection for the
    SQLite transport (its file is created on first use)."""
    from urllib.parse import urlsplit

    from protocol.tasks import BadBrokerUrl, result_backend_url

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  a malformed port or host raises here
        result_backend_url(url)  # the schemes this project configures Celery for
    except (ValueError, BadBrokerUrl) as exc:
        raise PreflightFailed(f"--broker {url!r} is not a usable broker URL: {exc}") from exc
    if parts.scheme.startswith("redis"):
        import redis

        try:
            client = redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
            client.ping()
            client.close()
        except (redis.RedisError, ValueError, OSError) as exc:
            raise PreflightFailed(f"--broker: the broker at {url} does not answer PING: {exc}") from exc


def check_backend(url: str, timeout_s: float = 10.0) -> None:
    """GET {url}/health answers 200 with a JSON status."""
    try:
        response = httpx.get(url.rstrip("/") + "/health", timeout=timeout_s)
    except (httpx.HTTPError, ValueError) as exc:
        raise PreflightFailed(f"--backend: the backend at {url} does not answer GET /health: {exc}") from exc
    if response.status_code != 200:
        raise PreflightFailed(f"--backend: the backend at {url} answers GET /health with HTTP {response.status_code}")
    try:
        response.json()["status"]
    except (ValueError, KeyError, TypeError) as exc:
        raise PreflightFailed(f"{url} answers GET /health, but not as an Unchained backend") from exc


def check_services(broker_url: str, backend_url: str | None) -> None:
    """Every service the agent needs, checked before it stakes (raises PreflightFailed)."""
    check_broker(broker_url)
    if backend_url:
        check_backend(backend_url)
