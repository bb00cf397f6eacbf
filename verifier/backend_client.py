"""The verifier's reads from the backend, signed in with its own key (Sign-In with Ethereum,
through the one SIWE client `client.siwe.SiweSession`: renewed before it expires).

The backend serves a job's private inputs, private model and outputs to staked verifiers; the
verifier trusts none of it: specs are checked against the on-chain specHash, content against
its keccak256, outputs against the on-chain output root. The backend is trusted for
availability only, so its failures split into `BackendUnavailable` (down, failing, or behind
the chain: retry later, never a reason to challenge) and `BackendRefused` (it will not serve
this to us: a configuration problem to log).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import httpx
from eth_account.signers.local import LocalAccount

from client.errors import SignInFailed
from client.siwe import SiweSession
from protocol.merkle import keccak256
from verifier import VerifierError

logger = logging.getLogger(__name__)

# 404/409: the backend's indexer has not seen the job or its commit yet; 429/5xx: load, outages.
REPORT_TIMEOUT_S = 5.0  # a report is best effort: it must never hold up a decision's follow-up
Decision = Literal["passed", "challenged", "escalated", "voted_fault", "voted_no_fault",
                   "fraud_proven", "timeout_claimed", "settled"]
_RETRYABLE = frozenset({404, 408, 409, 425, 429, 500, 502, 503, 504})


class BackendUnavailable(VerifierError):
    """Transient: the backend is unreachable, failing or behind the chain."""


class BackendRefused(VerifierError):
    """The backend refuses the request as such (not signed in as a staked verifier...)."""


@dataclass(frozen=True)
class ResultItem:
    index: int
    digest: bytes | None  # None: the provider has not uploaded this item
    proof: tuple[bytes, ...]


@dataclass(frozen=True)
class JobResult:
    output_root: bytes
    item_count: int
    items: dict[int, ResultItem]


def _call(request: Any) -> httpx.Response:
    try:
        return request()
    except httpx.TransportError as exc:
        raise BackendUnavailable(f"backend unreachable: {exc}") from exc
    except SignInFailed as exc:
        raise (BackendUnavailable if exc.transient else BackendRefused)(str(exc)) from exc


def _checked(response: httpx.Response, what: str) -> httpx.Response:
    if response.status_code < 400:
        return response
    detail = response.text[:300]
    if response.status_code in _RETRYABLE:
        raise BackendUnavailable(f"{what}: HTTP {response.status_code}: {detail}")
    raise BackendRefused(f"{what}: HTTP {response.status_code}: {detail}")


class VerifierBackend:
    """Content, results and outputs of jobs, as the verifier's signed-in session reads them."""

    def __init__(self, base_url: str, account: LocalAccount, lifetime_s: int = 3600, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.http = httpx.Client(base_url=self.base_url, timeout=timeout,
                                 auth=SiweSession(account, self.base_url, lifetime_s))

    def content(self, content_hash: bytes) -> bytes:
        """Content by keccak256 (spec, model, input), checked against its hash here."""
        name = "0x" + content_hash.hex()
        data = _checked(_call(lambda: self.http.get(f"/blobs/{name}")), f"content {name}").content
        if keccak256(data) != content_hash:
            raise BackendRefused(f"content {name}: the backend served bytes with another hash")
        return data

    def result(self, job_id: int) -> JobResult:
        body = _checked(_call(lambda: self.http.get(f"/jobs/{job_id}/result")), f"job {job_id} result").json()
        items = {int(i["index"]): ResultItem(int(i["index"]),
                                             bytes.fromhex(i["digest"][2:]) if i.get("digest") else None,
                                             tuple(bytes.fromhex(p[2:]) for p in (i.get("proof") or ())))
                 for i in body["items"]}
        return JobResult(bytes.fromhex(body["output_root"].removeprefix("0x")), int(body["item_count"]), items)

    def output(self, job_id: int, index: int) -> bytes:
        return _checked(_call(lambda: self.http.get(f"/jobs/{job_id}/outputs/{index}")),
                        f"job {job_id} item {index} output").content

    def report(self, kind: Literal["job", "pog"], subject: int, decision: Decision, *,
               challenge_id: int | None = None, indices: Sequence[int] = (),
               expected: Sequence[str | None] = (), received: Sequence[str | None] = (),
               tx_hashes: Sequence[str] = (), detail: str = "") -> bool:
        """Reports one decision with its evidence to the backend's /disputes/reports (hex digests
        and tx hashes). Best effort: a failure is logged with the subject and challenge and
        returns False; the decision itself already stands on-chain."""
        body = {"kind": kind, "subject": subject, "challengeId": challenge_id, "decision": decision,
                "indices": list(indices), "expectedDigests": list(expected), "receivedDigests": list(received),
                "txHashes": [_hex(h) for h in tx_hashes], "detail": detail[:2000]}
        what = f"report {decision} of {kind} {subject} (challenge {challenge_id})"
        try:
            _checked(_call(lambda: self.http.post("/disputes/reports", json=body, timeout=REPORT_TIMEOUT_S)), what)
        except VerifierError as exc:
            logger.warning("%s not recorded by the backend: %s", what, exc)
            return False
        return True

    def close(self) -> None:
        self.http.close()


def _hex(tx_hash: str) -> str:
    """web3's HexBytes.hex() drops the 0x prefix in recent versions; the backend wants it."""
    return tx_hash if tx_hash.startswith("0x") else "0x" + tx_hash


__all__ = ["BackendRefused", "BackendUnavailable", "Decision", "JobResult", "ResultItem", "VerifierBackend"]
