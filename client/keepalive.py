"""Kept-alive HTTP connections of the standard library, for the parties' calls to the node and the backend.

requests and httpx spend 1-2 ms of CPU on each request in their own layers (request preparation,
cookie jars, httpcore's and h11's pure-Python HTTP), several times what a local node or the
backend takes to answer; every party makes several calls a job. `Connections` keeps idle
`http.client` connections to one origin for the next request of any thread. It is served to web3 as its requests session
(`client.rpc_session`) and to httpx as its transport (`http_client`), so callers keep those
libraries' interfaces, auth flows and errors.

A connection the server closed while idle (uvicorn closes them after 5 s) is seen before it is
used and opened again; one closed at the very moment of a send is sent again only when the
caller says the request may be repeated (JSON-RPC, GET).
"""

from __future__ import annotations

import http.client
import select
import ssl
import threading
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import certifi
import httpx

_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


@dataclass(frozen=True)
class Answer:
    status: int
    reason: str
    headers: list[tuple[str, str]]
    content: bytes


class Connections:
    """Kept-alive connections to the origin of `url` (http or https): a request takes an idle one
    (or opens one) and gives it back after the answer; at most `keep` wait idle."""

    def __init__(self, url: str, verify: bool | str = True, keep: int = 16) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url}")
        self.https = parts.scheme == "https"
        self.host, self.port = parts.hostname, parts.port
        self.tls = _tls_context(verify) if self.https else None
        self.keep = keep
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def request(self, method: str, target: str, body: bytes | None, headers: list[tuple[Any, Any]],
                timeout: float | None, repeatable: bool) -> Answer:
        """Sends one request. Raises OSError (TimeoutError on a timeout) or http.client.HTTPException."""
        try:
            return self._send(method, target, body, headers, timeout)
        except _STALE:
            if not repeatable:
                raise
            return self._send(method, target, body, headers, timeout)

    def _send(self, method: str, target: str, body: bytes | None, headers: list[tuple[Any, Any]],
              timeout: float | None) -> Answer:
        connection = self._take(timeout)
        try:
            connection.putrequest(method, target, skip_host=_has(headers, b"host"),
                                  skip_accept_encoding=_has(headers, b"accept-encoding"))
            for name, value in headers:
                connection.putheader(name, value)
            if body is not None and not _has(headers, b"content-length"):
                connection.putheader("Content-Length", str(len(body)))
            connection.endheaders(body)
            response = connection.getresponse()
            content = response.read()
        except BaseException:
            connection.close()
            raise
        if response.will_close:
            connection.close()
        else:
            self._give_back(connection)
        return Answer(response.status, response.reason, response.getheaders(), content)

    def _take(self, timeout: float | None) -> http.client.HTTPConnection:
        while True:
            with self._lock:
                connection = self._idle.pop() if self._idle else None
            if connection is None:
                return (http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.tls)
                        if self.https else http.client.HTTPConnection(self.host, self.port, timeout=timeout))
            if connection.sock is None or _dropped(connection.sock):
                connection.close()
                continue
            connection.timeout = timeout
            connection.sock.settimeout(timeout)
            return connection

    def _give_back(self, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < self.keep:
                self._idle.append(connection)
                return
        connection.close()

    def close(self) -> None:
        """Closes the idle connections (a request later opens another)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()


def _dropped(sock: Any) -> bool:
    """An idle connection has nothing to read; readable means the server closed it (or broke the
    protocol): either way it cannot carry a request."""
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def _has(headers: list[tuple[Any, Any]], name: bytes) -> bool:
    return any((key.encode() if isinstance(key, str) else key).lower() == name for key, _ in headers)


def _tls_context(verify: bool | str) -> ssl.SSLContext:
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        return context
    # requests' and httpx's default trust store (certifi), or the bundle the caller names
    return ssl.create_default_context(cafile=verify if isinstance(verify, str) else certifi.where())


def direct(url: str) -> bool:
    """Whether `url` is http(s) without credentials and reached without a proxy of the environment."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username:
        return False
    proxies = urllib.request.getproxies()
    return not (proxies.get(parts.scheme) or proxies.get("all")) or bool(urllib.request.proxy_bypass(parts.hostname))


class KeepAliveTransport(httpx.BaseTransport):
    """httpx's transport over `Connections`: one origin, the client's base URL."""

    def __init__(self, url: str) -> None:
        self.connections = Connections(url)
        self.origin = httpx.URL(url).copy_with(path="/", query=None, fragment=None)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if (url.scheme, url.host, url.port) != (self.origin.scheme, self.origin.host, self.origin.port):
            raise httpx.UnsupportedProtocol(f"this transport serves {self.origin}, not {url}")
        timeouts = request.extensions.get("timeout", {})
        timeout = max((t for t in timeouts.values() if t is not None), default=None)
        try:
            answer = self.connections.request(request.method, url.raw_path.decode("ascii"), request.read(),
                                              request.headers.raw, timeout, request.method in ("GET", "HEAD"))
        except TimeoutError as exc:
            raise httpx.ReadTimeout(f"no answer from {self.origin} within {timeout} s", request=request) from exc
        except _STALE as exc:
            raise httpx.RemoteProtocolError(f"{self.origin} closed the connection: {exc}", request=request) from exc
        except (OSError, http.client.HTTPException) as exc:
            raise httpx.ConnectError(f"{self.origin}: {type(exc).__name__}: {exc}", request=request) from exc
        return httpx.Response(answer.status, headers=answer.headers, stream=httpx.ByteStream(answer.content),
                              extensions={"http_version": b"HTTP/1.1", "reason_phrase": answer.reason.encode()})

    def close(self) -> None:
        self.connections.close()


def http_client(base_url: str, **options: Any) -> httpx.Client:
    """An httpx client for one server (the backend): over `KeepAliveTransport` when the server is
    reached directly, else httpx's own transport (proxies, credentials)."""
    if direct(base_url):
        options.setdefault("transport", KeepAliveTransport(base_url))
    return httpx.Client(base_url=base_url, **options)
