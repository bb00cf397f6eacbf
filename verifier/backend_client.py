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

import base64
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import httpx
from eth_account.signers.local import LocalAccount

from client.backend_answers import RETRYABLE, no_such_route
from client.errors import SignInFailed
from client.keepalive import http_client
from client.siwe import SiweSession
from protocol.jobs import MAX_ITEMS_PER_READ
from protocol.merkle import keccak256
from verifier import VerifierError

logger = logging.getLogger(__name__)

REPORT_TIMEOUT_S = 5.0  # a report is best effort: it must never hold up a decision's follow-up
Decision = Literal["passed", "challenged", "escalated", "voted_fault", "voted_no_fault",
                   "fraud_proven", "timeout_claimed", "settled"]


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
    if response.status_code in RETRYABLE:
        raise BackendUnavailable(f"{what}: HTTP {response.status_code}: {detail}")
    raise BackendRefused(f"{what}: HTTP {response.status_code}: {detail}")


FETCH_WORKERS = 8  # an audit's downloads in flight at once: each waits on the backend, not on this CPU
T = TypeVar("T")


def fetch_all(fetch: Callable[[T], bytes], keys: Sequence[T]) -> list[bytes]:
    """fetch(key) for every key, up to FETCH_WORKERS at once, in the keys' order; the first
    failure is raised, as a loop would raise it. One at a time, an audit's dozen round trips to a
    busy backend took seconds and the verifier fell behind the committed jobs."""
    if len(keys) < 2:
        return [fetch(k) for k in keys]
    with ThreadPoolExecutor(max_workers=min(FETCH_WORKERS, len(keys)), thread_name_prefix="audit-fetch") as pool:
        return list(pool.map(fetch, keys))


class VerifierBackend:
    """Content, results and outputs of jobs, as the verifier's signed-in session reads them."""

    def __init__(self, base_url: str, account: LocalAccount, lifetime_s: int = 3600, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.http = http_client(self.base_url, timeout=timeout, auth=SiweSession(account, self.base_url, lifetime_s))

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

    def jobs(self, limit: int, offset: int = 0) -> list[dict[str, Any]]:
        """One page of the backend's jobs (GET /jobs), newest first: an index, trusted for nothing."""
        return _checked(_call(lambda: self.http.get("/jobs", params={"limit": limit, "offset": offset})),
                        "jobs").json()

    def signed_result(self, job_id: int) -> dict[str, Any] | None:
        """The provider's signed result of the job as delivered (SignedJobResult JSON; None:
        none), checked by the caller against the chain."""
        body = _checked(_call(lambda: self.http.get(f"/jobs/{job_id}/result")), f"job {job_id} result").json()
        return body.get("signed")

    def output(self, job_id: int, index: int) -> bytes:
        return _checked(_call(lambda: self.http.get(f"/jobs/{job_id}/outputs/{index}")),
                        f"job {job_id} item {index} output").content

    def outputs(self, job_id: int, indices: Sequence[int]) -> dict[int, bytes]:
        """The uploaded outputs of `indices` (absent: not uploaded yet), several per request
        (GET /jobs/{id}/outputs); checked by the caller against the root. One request per item
        from a backend without that route."""
        return self._items(f"/jobs/{job_id}/outputs", f"job {job_id} outputs", indices,
                           lambda i: self.output(job_id, i))

    def inputs(self, job_id: int, names: dict[int, bytes]) -> dict[int, bytes]:
        """The inputs of the items in `names` (index -> keccak256, as the job's spec names them),
        several per request (GET /jobs/{id}/inputs), each checked against its name here. One
        request per item (GET /blobs/{hash}) from a backend without that route."""
        found = self._items(f"/jobs/{job_id}/inputs", f"job {job_id} inputs", sorted(names),
                            lambda i: self.content(names[i]))
        for index, data in found.items():
            if keccak256(data) != names[index]:
                raise BackendRefused(f"job {job_id} input {index}: the backend served bytes with another hash")
        missing = set(names) - set(found)
        if missing:
            raise BackendUnavailable(f"job {job_id}: the backend holds no input for items {sorted(missing)}")
        return found

    def _items(self, path: str, what: str, indices: Sequence[int], one: Callable[[int], bytes]) -> dict[int, bytes]:
        found: dict[int, bytes] = {}
        wanted = list(indices)
        while wanted:
            asked, wanted = wanted[:MAX_ITEMS_PER_READ], wanted[MAX_ITEMS_PER_READ:]
            response = _call(lambda: self.http.get(path, params={"index": asked}))  # noqa: B023  called within this iteration
            if _route_missing(response):
                rest = asked + wanted
                return found | dict(zip(rest, fetch_all(one, rest)))
            page = _checked(response, what).json()
            if not page["items"] and page["left"]:  # every answer holds an item: this one is broken
                raise BackendUnavailable(f"{what}: an answer with no item and {len(page['left'])} left")
            found.update((int(item["index"]), base64.b64decode(item["data"])) for item in page["items"])
            wanted = [int(i) for i in page["left"]] + wanted
        return found

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


def _route_missing(response: httpx.Response) -> bool:
    """A backend of an earlier version, without the route."""
    if response.status_code not in (404, 405):
        return False
    try:
        return no_such_route(response.status_code, response.json().get("detail"))
    except (ValueError, AttributeError):  # not JSON, or JSON but not an object
        return False


def _hex(tx_hash: str) -> str:
    """web3's HexBytes.hex() drops the 0x prefix in recent versions; the backend wants it."""
    return tx_hash if tx_hash.startswith("0x") else "0x" + tx_hash


__all__ = ["BackendRefused", "BackendUnavailable", "Decision", "JobResult", "ResultItem", "VerifierBackend"]
