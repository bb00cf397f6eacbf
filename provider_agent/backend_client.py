"""The agent's side of the backend API, signed in as the provider.

The backend serves a job's private content (inputs, private models) only to the provider of a
job that names it, and accepts a job's outputs only from that provider with a Merkle proof
under the root committed on-chain; both need a session. The agent opens one with Sign-In with
Ethereum (EIP-4361): it fetches a nonce, signs the message with the provider's own keystore
account, here in this process, and exchanges the signature for a bearer token. The token is
reused until shortly before it expires, and a 401 (the backend restarted, or forgot the
session) signs in once more and repeats the request, so callers never handle sessions.

Errors are split by what a caller should do: `BackendUnavailable` (the backend is unreachable,
failing, or has not indexed the job yet: try again later) and `BackendRefused` (the backend
will not accept this, whatever the retries: a bug or a misconfiguration to log).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Generator, Sequence
from datetime import UTC, datetime
from typing import Any

import httpx
from eth_account.messages import encode_defunct
from eth_account.signers.local import LocalAccount

from protocol.siwe import domain_of, login_message
from provider_agent import ProviderAgentError

logger = logging.getLogger(__name__)

# Statuses worth retrying: 404 and 409 mean the backend's indexer has not seen the job or its
# commit yet (it follows the chain a few blocks behind), 429 and 5xx are load or outages.
RETRYABLE = frozenset({404, 408, 409, 425, 429, 500, 502, 503, 504})


class BackendClientError(ProviderAgentError):
    """A backend request failed; `status` is the HTTP status (None: no answer)."""

    def __init__(self, what: str, status: int | None, detail: str) -> None:
        super().__init__(f"{what}: {'HTTP ' + str(status) if status else 'no answer'}: {detail}")
        self.status, self.detail = status, detail


class BackendUnavailable(BackendClientError):
    """Transient: unreachable, overloaded, or behind the chain. Try again later."""


class BackendRefused(BackendClientError):
    """Permanent: the backend refuses the request as such (bad proof, wrong account...)."""


class SiweAuth(httpx.Auth):
    """httpx authentication by a Sign-In with Ethereum session of `account`."""

    RENEW_BEFORE_S = 60.0  # sign in again this long before the session ends

    def __init__(self, base_url: str, account: LocalAccount, lifetime_s: int, timeout: float) -> None:
        self.base_url = base_url.rstrip("/")
        self.account = account
        self.lifetime_s = lifetime_s
        self.timeout = timeout
        self._token: str | None = None
        self._renew_at = 0.0
        self._lock = threading.Lock()  # the heartbeat thread and the worker share one session

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token()}"
        response = yield request
        if response.status_code == 401:  # an expired or forgotten session: once more, freshly signed in
            request.headers["Authorization"] = f"Bearer {self.token(renew=True)}"
            yield request

    def token(self, renew: bool = False) -> str:
        with self._lock:
            if renew or self._token is None or time.monotonic() >= self._renew_at:
                self._token = self._sign_in()
            return self._token

    def _sign_in(self) -> str:
        with httpx.Client(base_url=self.base_url, timeout=self.timeout) as http:
            issued = _checked(http.get("/auth/nonce"), "sign-in nonce").json()
            here = domain_of(self.base_url)
            if issued["domain"] != here:  # never sign for another domain (EIP-4361 relay protection)
                raise BackendRefused("sign-in", None, f"the server asks to sign in to {issued['domain']!r}, "
                                                      f"but it is {here!r}")
            text = login_message(issued["domain"], self.account.address, issued["uri"], int(issued["chain_id"]),
                                 issued["nonce"], self.lifetime_s).text()
            signature = self.account.sign_message(encode_defunct(text=text)).signature.hex()
            started = time.monotonic()
            session = _checked(http.post("/auth/login", json={"message": text, "signature": signature}),
                               "sign-in").json()
        # The backend may cap the session below our message's lifetime; renew before its end.
        lifetime = min(self.lifetime_s, _seconds_until(session.get("expires_at")) or self.lifetime_s)
        self._renew_at = started + max(0.0, lifetime - self.RENEW_BEFORE_S)
        logger.info("signed in to %s as %s until %s", self.base_url, self.account.address, session.get("expires_at"))
        return str(session["token"])


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


def _checked(response: httpx.Response, what: str) -> httpx.Response:
    if response.status_code < 400:
        return response
    try:
        detail = str(response.json().get("detail", response.text))
    except ValueError:
        detail = response.text
    kind = BackendUnavailable if response.status_code in RETRYABLE or response.status_code == 401 else BackendRefused
    raise kind(what, response.status_code, detail[:500])


class BackendClient:
    """The provider's calls to the backend, all in one signed-in session."""

    def __init__(self, base_url: str, account: LocalAccount, lifetime_s: int = 3600, timeout: float = 60.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.auth = SiweAuth(self.base_url, account, lifetime_s, timeout)
        self.http = httpx.Client(base_url=self.base_url, timeout=timeout, auth=self.auth)

    def _request(self, what: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise BackendUnavailable(what, None, str(exc)) from exc
        return _checked(response, what)

    def uploaded_items(self, job_id: int) -> set[int]:
        """Items of a committed job the backend already holds (409 until it has indexed the commit)."""
        result = self._request(f"job {job_id} result", "GET", f"/jobs/{job_id}/result").json()
        return {item["index"] for item in result["items"] if item["digest"] is not None}

    def upload_output(self, job_id: int, index: int, data: bytes, proof: Sequence[bytes]) -> None:
        """One item's output bytes with its inclusion proof (`X-Merkle-Proof`: comma-separated
        0x-hex siblings, bottom-up), checked by the backend against the on-chain root."""
        headers = {"X-Merkle-Proof": ",".join("0x" + bytes(p).hex() for p in proof),
                   "Content-Type": "application/octet-stream"}
        self._request(f"job {job_id} item {index} upload", "PUT", f"/jobs/{job_id}/outputs/{index}",
                      content=data, headers=headers)

    def report_failure(self, job_id: int, kind: str, error: str) -> None:
        self._request(f"job {job_id} failure report", "POST", f"/jobs/{job_id}/failure",
                      json={"jobId": job_id, "kind": kind, "error": error[:4096]})

    def heartbeat(self, provider: str) -> None:
        """Tells the backend the agent is alive; a provider silent for longer than the backend's
        bound is not offered to renters."""
        self._request(f"provider {provider} heartbeat", "POST", f"/providers/{provider}/heartbeat")

    def report_mining(self, provider: str, report: dict[str, Any]) -> None:
        self._request(f"provider {provider} mining report", "POST", f"/providers/{provider}/mining", json=report)
