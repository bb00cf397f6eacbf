"""The HTTP session under every party's web3: what web3's HTTPProvider posts its JSON-RPC through.

requests spends about 1 ms of CPU on each call before a byte leaves (preparing the request, its
cookie jar, its adapters), five times what the node takes to answer a local read, and every
party makes several calls a job. A node reached directly (no proxy, no credentials: a local or
LAN node, an RPC provider over HTTPS) is served by `KeepAliveSession` instead: kept-alive
`http.client` connections (`client.keepalive`), about 0.2 ms a call. A node behind a proxy of the
environment, or needing ~/.netrc or URL credentials, keeps a requests session
that has read the environment once (`requests_session`).

Failures are raised as requests' exceptions, as web3's HTTPProvider raises them: its retries and
every caller (`except OSError`, the provider worker's transient errors) already know them.
"""

from __future__ import annotations

import http.client
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import requests

from client.keepalive import Connections, direct


def rpc_session(rpc_url: str) -> KeepAliveSession | requests.Session:
    """The session for the node at `rpc_url`: kept-alive connections of the standard library
    for a direct http(s) URL, requests where a proxy or credentials apply."""
    session = requests_session(rpc_url)
    plain = direct(rpc_url) and session.auth is None and session.cert is None  # no ~/.netrc entry, no client cert
    return KeepAliveSession(rpc_url, True if session.verify is None else session.verify) if plain else session


def requests_session(rpc_url: str) -> requests.Session:
    """A requests session for one node that honours the environment as requests does (HTTP(S)_PROXY
    and NO_PROXY, REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE, ~/.netrc) but reads it once, here: by
    default requests reads it again at every request, twice walking the whole environment for
    proxy variables. A running party's environment does not change. One session serves every
    thread: its connection pool is thread-safe, and JSON-RPC keeps no cookies."""
    session = requests.Session()
    settings = session.merge_environment_settings(rpc_url, {}, None, None, None)
    session.proxies.update(settings["proxies"])
    session.verify = settings["verify"]
    session.cert = settings["cert"]
    session.auth = requests.utils.get_netrc_auth(rpc_url)
    session.trust_env = False
    return session


class KeepAliveSession:
    """What web3's HTTPProvider asks of a session (`post`, for one node's URL), over kept-alive
    `client.keepalive.Connections`. A call is sent again when its connection broke at the send:
    JSON-RPC over HTTP answers a repeated call as the first (a repeated raw transaction is
    "already known", which the sender handles)."""

    def __init__(self, rpc_url: str, verify: bool | str = True) -> None:
        parts = urlsplit(rpc_url)
        self.url = rpc_url
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.connections = Connections(rpc_url, verify)

    def post(self, url: str, data: bytes | None = None, headers: dict[str, str] | None = None,
             timeout: float | None = None, **_: Any) -> RpcAnswer:
        if url != self.url:
            raise ValueError(f"this session serves {self.url}, not {url}")
        try:
            answer = self.connections.request("POST", self._target, data, list((headers or {}).items()), timeout,
                                              repeatable=True)
        except TimeoutError as exc:
            raise requests.Timeout(f"{self.url}: no answer within {timeout} s") from exc
        except (OSError, http.client.HTTPException) as exc:
            raise requests.ConnectionError(f"{self.url}: {type(exc).__name__}: {exc}") from exc
        return RpcAnswer(self.url, answer.status, answer.reason, answer.content)

    def close(self) -> None:
        self.connections.close()


class RpcAnswer:
    """The part of a requests.Response that web3 reads."""

    def __init__(self, url: str, status: int, reason: str, content: bytes) -> None:
        self.url, self.status_code, self.reason, self.content = url, status, reason, content

    def __enter__(self) -> RpcAnswer:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        return None

    def raise_for_status(self) -> None:
        if self.status_code >= 400:
            raise requests.HTTPError(f"{self.status_code} {self.reason} from {self.url}: {self.content[:200]!r}")
