"""One Sign-In with Ethereum client for every party that talks to the backend as itself.

`SiweSession` is an `httpx.Auth`: give it to an `httpx.Client` (or to one request) and every
request carries a bearer token of a session opened by signing the backend's EIP-4361 message
with the party's own key, here in this process (`GET /auth/nonce`, sign, `POST /auth/login`).
The token is reused until shortly before the session ends and renewed then, so a long-running
agent never sends an expired token; a 401 anyway (the backend restarted or forgot the
session) signs in once more and repeats the request once. The sign-in requests go through
the same client as the request they serve (its transport, timeouts, base URL), so the same
code serves a real server and FastAPI's in-process TestClient.

Never signs for another domain than the one it talks to (EIP-4361's relay protection).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Generator
from datetime import UTC, datetime
from typing import Any

import httpx
from eth_account.messages import encode_defunct
from eth_account.signers.local import LocalAccount

from client.errors import SignInFailed
from protocol.siwe import domain_of, login_message

logger = logging.getLogger(__name__)

RENEW_BEFORE_S = 60.0  # sign in again this long before the session ends (or at a fifth of a short one)
# Statuses after which signing in later may work: load, outages, an indexer behind the chain.
_TRANSIENT = frozenset({404, 408, 409, 425, 429, 500, 502, 503, 504})

Flow = Generator[httpx.Request, httpx.Response, str]


class SiweSession(httpx.Auth):
    """A signed-in session of `account` with the backend at `base_url`; thread-safe."""

    def __init__(self, account: LocalAccount, base_url: str, lifetime_s: int = 3600,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.account = account
        self.base_url = str(base_url).rstrip("/")
        self.lifetime_s = lifetime_s
        self.clock = clock  # when the token is renewed; tests move it instead of waiting
        self._token: str | None = None
        self._renew_at = 0.0
        self._lock = threading.Lock()  # the provider's heartbeat thread and its worker share one session

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        token = self._current()
        if token is None:
            token = yield from self._sign_in()
        request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code == 401:  # an expired or forgotten session: once more, freshly signed in
            request.headers["Authorization"] = f"Bearer {(yield from self._sign_in())}"
            yield request

    def token(self, http: httpx.Client) -> str:
        """The current token, signing in through `http` first when there is none or it is due."""
        return self._current() or self.sign_in(http)

    def sign_in(self, http: httpx.Client) -> str:
        """Opens a fresh session through `http` (whose base URL is the backend's); returns its token."""
        flow = self._sign_in()
        request = next(flow)
        while True:
            response = http.send(request)
            try:
                request = flow.send(response)
            except StopIteration as done:
                return str(done.value)

    def _current(self) -> str | None:
        with self._lock:
            return self._token if self._token is not None and self.clock() < self._renew_at else None

    def _sign_in(self) -> Flow:
        # Not under the lock across the requests: two threads may both sign in, and both
        # sessions are valid; the later token is kept.
        issued = _json((yield httpx.Request("GET", f"{self.base_url}/auth/nonce")), "sign-in nonce")
        here = domain_of(self.base_url)
        if issued["domain"] != here:
            raise SignInFailed(f"the server asks to sign in to {issued['domain']!r}, but it is {here!r}", None)
        text = login_message(issued["domain"], self.account.address, issued["uri"], int(issued["chain_id"]),
                             issued["nonce"], self.lifetime_s).text()
        signature = self.account.sign_message(encode_defunct(text=text)).signature.hex()
        started = self.clock()
        session = _json((yield httpx.Request("POST", f"{self.base_url}/auth/login",
                                             json={"message": text, "signature": signature})), "sign-in")
        # The backend may cap the session below our message's lifetime: renew before its end.
        lifetime = min(float(self.lifetime_s), _seconds_until(session.get("expires_at")) or float(self.lifetime_s))
        token = str(session["token"])
        with self._lock:
            self._token = token
            self._renew_at = started + max(0.0, lifetime - min(RENEW_BEFORE_S, lifetime / 5))
        logger.info("%s signed in to %s until %s", self.account.address, self.base_url, session.get("expires_at"))
        return token


def _json(response: httpx.Response, what: str) -> dict[str, Any]:
    # Read here, for the sign-in answers only: `requires_response_body` would also read the body
    # of the request being served, and a streamed download must stay streamed (sync clients).
    response.read()
    if response.status_code >= 400:
        try:
            detail = str(response.json().get("detail", response.text))
        except ValueError:
            detail = response.text
        raise SignInFailed(f"{what}: HTTP {response.status_code}: {detail[:300]}", response.status_code,
                           transient=response.status_code in _TRANSIENT)
    answer: dict[str, Any] = response.json()
    return answer


def _seconds_until(moment: str | None) -> float | None:
    if not moment:
        return None
    try:
        end = datetime.fromisoformat(moment.replace("Z", "+00:00"))
    except ValueError:
        return None
    if end.tzinfo is None:
        end = end.replace(tzinfo=UTC)
    return (end - datetime.now(UTC)).total_seconds()


__all__ = ["RENEW_BEFORE_S", "SiweSession"]
