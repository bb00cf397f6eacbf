"""The agent's side of the backend API, signed in as the provider.

The backend serves a job's private content (inputs, private models) only to the provider of a
job that names it, and accepts a job's outputs only from that provider with a Merkle proof
under the root committed on-chain; both need a session. The agent opens one with Sign-In with
Ethereum (EIP-4361) through the one SIWE client, `client.siwe.SiweSession`: signed with the
provider's own keystore account, renewed before it expires, signed in again once on a 401, so
callers never handle sessions.

Errors are split by what a caller should do: `BackendUnavailable` (the backend is unreachable,
failing, or has not indexed the job yet: try again later) and `BackendRefused` (the backend
will not accept this, whatever the retries: a bug or a misconfiguration to log).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence
from typing import Any

import httpx
from eth_account.signers.local import LocalAccount

from client.backend_answers import RETRYABLE, no_such_route
from client.errors import SignInFailed
from client.keepalive import http_client
from client.siwe import SiweSession
from provider_agent import ProviderAgentError

logger = logging.getLogger(__name__)

class BackendClientError(ProviderAgentError):
    """A backend request failed; `status` is the HTTP status (None: no answer)."""

    def __init__(self, what: str, status: int | None, detail: str) -> None:
        super().__init__(f"{what}: {'HTTP ' + str(status) if status else 'no answer'}: {detail}")
        self.status, self.detail = status, detail


class BackendUnavailable(BackendClientError):
    """Transient: unreachable, overloaded, or behind the chain. Try again later."""


class BackendRefused(BackendClientError):
    """Permanent: the backend refuses the request as such (bad proof, wrong account...)."""


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
        self.auth = SiweSession(account, self.base_url, lifetime_s)
        self.http = http_client(self.base_url, timeout=timeout, auth=self.auth)

    def _request(self, what: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise BackendUnavailable(what, None, str(exc)) from exc
        except SignInFailed as exc:
            raise (BackendUnavailable if exc.transient else BackendRefused)(what, exc.status, str(exc)) from exc
        return _checked(response, what)

    def uploaded_items(self, job_id: int) -> set[int]:
        """Items of a signed or committed job the backend already holds (409 until it has one)."""
        result = self._request(f"job {job_id} result", "GET", f"/jobs/{job_id}/result").json()
        return {item["index"] for item in result["items"] if item["digest"] is not None}

    def deliver_result(self, signed: dict[str, Any], items: Sequence[tuple[int, bytes, Sequence[bytes]]] = ()) -> bool:
        """The provider-signed JobResult (protocol.job_result.SignedJobResult JSON): the renter has
        the result from this moment, before the commit is mined. Idempotent. `items` (index, bytes,
        inclusion proof; within protocol.jobs.MAX_OUTPUTS_BODY_BYTES as for upload_outputs) go in
        the same request; returns whether the backend stored them (an earlier version ignores them)."""
        body = {**signed, "outputs": _output_items(items)} if items else signed
        answer = self._request(f"job {signed['jobId']} signed result", "PUT", f"/jobs/{signed['jobId']}/signed-result",
                               json=body).json()
        return bool(items) and "outputs" in answer

    def upload_output(self, job_id: int, index: int, data: bytes, proof: Sequence[bytes]) -> None:
        """One item's output bytes with its inclusion proof (`X-Merkle-Proof`: comma-separated
        0x-hex siblings, bottom-up), checked by the backend against the signed (or on-chain) root."""
        headers = {"X-Merkle-Proof": ",".join("0x" + bytes(p).hex() for p in proof),
                   "Content-Type": "application/octet-stream"}
        self._request(f"job {job_id} item {index} upload", "PUT", f"/jobs/{job_id}/outputs/{index}",
                      content=data, headers=headers)

    def upload_outputs(self, job_id: int, items: Sequence[tuple[int, bytes, Sequence[bytes]]]) -> None:
        """Several items' outputs (index, bytes, inclusion proof) in one request, stored all or
        nothing; the caller keeps the body within protocol.jobs.MAX_OUTPUTS_BODY_BYTES."""
        body = {"items": _output_items(items)}
        try:
            self._request(f"job {job_id} items {items[0][0]}..{items[-1][0]} upload", "PUT",
                          f"/jobs/{job_id}/outputs", json=body)
        except BackendClientError as exc:
            if exc.status is None or not no_such_route(exc.status, exc.detail):
                raise
            for index, data, proof in items:  # a backend of an earlier version: one request per item
                self.upload_output(job_id, index, data, proof)

    def report_failure(self, job_id: int, kind: str, error: str) -> None:
        self._request(f"job {job_id} failure report", "POST", f"/jobs/{job_id}/failure",
                      json={"jobId": job_id, "kind": kind, "error": error[:4096]})

    def heartbeat(self, provider: str) -> None:
        """Tells the backend the agent is alive; a provider silent for longer than the backend's
        bound is not offered to renters."""
        self._request(f"provider {provider} heartbeat", "POST", f"/providers/{provider}/heartbeat")

    def lease(self, lease_id: int) -> dict[str, Any]:
        """The lease as the backend relays it, with the renter's signed SSH key once bound."""
        return self._request(f"lease {lease_id}", "GET", f"/leases/{lease_id}").json()

    def publish_lease_access(self, lease_id: int, access: dict[str, Any], signature: bytes) -> None:
        self._request(f"lease {lease_id} connection details", "PUT", f"/leases/{lease_id}/access",
                      json={**{k: v for k, v in access.items() if k != "leaseId"}, "signature": "0x" + signature.hex()})

    def report_mining(self, provider: str, report: dict[str, Any]) -> None:
        self._request(f"provider {provider} mining report", "POST", f"/providers/{provider}/mining", json=report)


def _output_items(items: Sequence[tuple[int, bytes, Sequence[bytes]]]) -> list[dict[str, Any]]:
    """Outputs as the backend's several-items bodies carry them: base64 bytes, 0x-hex siblings."""
    return [{"index": index, "data": base64.b64encode(data).decode(), "proof": ["0x" + bytes(p).hex() for p in proof]}
            for index, data, proof in items]
