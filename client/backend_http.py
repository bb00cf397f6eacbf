"""The one HTTP client of the backend API that every party's client of it is built on: the
renter's (`renter.client`), the provider agent's and the verifier's.

A party signs in with its own key through the one SIWE client (`client.siwe.SiweSession`: renewed
before it expires, signed in again once on a 401); the key never leaves its process. Every failed
request is raised one way, split by what a caller should do:

- `BackendUnavailable`: the backend is unreachable, overloaded, failing, or behind the chain (404
  and 409 while its indexer has not seen a job), or a sign-in failed for now. Try again later.
- `BackendRefused`: the backend refuses the request as such (a bad proof, the wrong account, a
  body over its limit...), whatever the retries: a bug or a misconfiguration to show or log.

Both are `ApiError`s carrying the HTTP status (None: no answer) and the server's message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

from client.backend_answers import RETRYABLE
from client.errors import ClientError, SignInFailed
from client.keepalive import http_client

# eth-account (through client.siwe) loads only for a party that signs in: `unchained job status`
# and the other reads start without it.
if TYPE_CHECKING:
    from eth_account.signers.local import LocalAccount

    from client.siwe import SiweSession

DETAIL_CHARS = 2000  # of the server's message kept in an error: a hostile or broken server may send megabytes


class ApiError(ClientError):
    """A backend request failed: `status` is the HTTP status (None: no answer, or refused here
    before anything was sent), `detail` what the server, the transport or the sign-in said."""

    def __init__(self, what: str, status: int | None, detail: str) -> None:
        super().__init__(f"{what}: HTTP {status}: {detail}" if status else f"{what}: {detail}")
        self.what = what
        self.status = status
        self.detail = detail


class BackendUnavailable(ApiError):
    """Transient: unreachable, overloaded, or behind the chain. Try again later."""


class BackendRefused(ApiError):
    """Permanent: the backend refuses the request as such (bad proof, wrong account...)."""


def detail_of(response: httpx.Response) -> str:
    """The server's message: FastAPI's `detail` when the body has one, else the body's text."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:DETAIL_CHARS]
    detail = body.get("detail", response.text) if isinstance(body, dict) else response.text
    return str(detail)[:DETAIL_CHARS]


def checked(response: httpx.Response, what: str) -> httpx.Response:
    """`response` when it succeeded; else its error. A 401 got through a fresh sign-in already
    (SiweSession), so it is the backend's session store, not our key: worth trying later."""
    if response.status_code < 400:
        return response
    retry = response.status_code in RETRYABLE or response.status_code == 401
    raise (BackendUnavailable if retry else BackendRefused)(what, response.status_code, detail_of(response))


def json_object(response: httpx.Response) -> dict[str, Any]:
    """The answer's JSON object; an answer of another shape is the backend's fault, said in one line."""
    body = response.json()
    if not isinstance(body, dict):
        raise BackendRefused(_what(response), response.status_code, f"expected a JSON object, got {type(body).__name__}")
    return body


def json_list(response: httpx.Response) -> list[dict[str, Any]]:
    """The answer's JSON list (of objects); an answer of another shape is the backend's fault."""
    body = response.json()
    if not isinstance(body, list):
        raise BackendRefused(_what(response), response.status_code, f"expected a JSON list, got {type(body).__name__}")
    return body


def _what(response: httpx.Response) -> str:
    return f"{response.request.method} {response.request.url.path}"


def sign_in_error(what: str, exc: SignInFailed) -> ApiError:
    return (BackendUnavailable if exc.transient else BackendRefused)(what, exc.status, str(exc))


class BackendHttp:
    """One party's connection to the backend: `http` (whose base URL is the backend's) and, with
    an `account`, its signed-in session: used by every request with `sign_all` (a provider or
    verifier: all it asks is its own), else by the requests sent `signed` (a renter)."""

    def __init__(self, http: httpx.Client, account: LocalAccount | None = None, lifetime_s: int = 3600,
                 sign_all: bool = False) -> None:
        self.http = http
        self.base_url = str(http.base_url).rstrip("/")
        self.account = account
        self.session: SiweSession | None = None
        if account is not None:
            from client.siwe import SiweSession
            self.session = SiweSession(account, self.base_url, lifetime_s)
        if sign_all:
            http.auth = self._session("sign-in")

    @staticmethod
    def client(base_url: str, timeout: float) -> httpx.Client:
        """The kept-alive HTTP client of the backend at `base_url` (client.keepalive)."""
        return http_client(base_url.rstrip("/"), timeout=timeout)

    def send(self, method: str, path: str, *, what: str | None = None, signed: bool = False,
             **kwargs: Any) -> httpx.Response:
        """One request, in the signed-in session when `signed` (else as `http` sends them); its
        answer whatever the status. No answer, or no session to be had, raises as `request` does."""
        what = what or f"{method} {path}"
        if signed:
            kwargs["auth"] = self._session(what)
        try:
            return self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise BackendUnavailable(what, None, str(exc)) from exc
        except SignInFailed as exc:
            raise sign_in_error(what, exc) from exc

    def request(self, method: str, path: str, *, what: str | None = None, signed: bool = False,
                **kwargs: Any) -> httpx.Response:
        """One request (see `send`), its failure raised as BackendUnavailable or BackendRefused;
        `what` names it in the error (default: the method and path)."""
        return checked(self.send(method, path, what=what, signed=signed, **kwargs), what or f"{method} {path}")

    def sign_in(self) -> str:
        """Sign-In with Ethereum (fetch a nonce, sign the EIP-4361 message locally, log in): a
        fresh session; returns its token."""
        try:
            return self._session("sign-in").sign_in(self.http)
        except SignInFailed as exc:
            raise sign_in_error("sign-in", exc) from exc

    @property
    def token(self) -> str:
        """The current session's token (signing in first when there is none or it is due)."""
        try:
            return self._session("sign-in").token(self.http)
        except SignInFailed as exc:
            raise sign_in_error("sign-in", exc) from exc

    def close(self) -> None:
        self.http.close()

    def _session(self, what: str) -> SiweSession:
        if self.session is None:
            raise BackendRefused(what, None, "no key to sign in with: pass --keystore")
        return self.session


__all__ = ["ApiError", "BackendHttp", "BackendRefused", "BackendUnavailable", "checked", "detail_of", "json_list",
           "json_object"]
