"""The agent's side of the backend API, signed in as the provider.

The backend serves a job's private content (inputs, private models) only to the provider of a
job that names it, and accepts a job's outputs only from that provider with a Merkle proof
under the root committed on-chain; both need a session. The agent opens one with Sign-In with
Ethereum (EIP-4361) through the one SIWE client, `client.siwe.SiweSession`: signed with the
provider's own keystore account, renewed before it expires, signed in again once on a 401, so
callers never handle sessions.

Its requests go through the one backend HTTP base, `client.backend_http.BackendHttp`, which
raises every failure as `BackendUnavailable` (try again later) or `BackendRefused` (a bug or a
misconfiguration to log), both `ApiError`s.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence
from typing import Any

import httpx
from eth_account.signers.local import LocalAccount

from client.backend_answers import no_such_route
from client.backend_http import ApiError, BackendHttp

logger = logging.getLogger(__name__)


class BackendClient(BackendHttp):
    """The provider's calls to the backend, all in one signed-in session."""

    def __init__(self, base_url: str, account: LocalAccount, lifetime_s: int = 3600, timeout: float = 60.0) -> None:
        super().__init__(self.client(base_url, timeout), account, lifetime_s, sign_all=True)

    def _request(self, what: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return self.request(method, path, what=what, **kwargs)

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
        except ApiError as exc:
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
