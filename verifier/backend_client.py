"""The verifier's reads from the backend, signed in with its own key (Sign-In with Ethereum,
through the one SIWE client `client.siwe.SiweSession`: renewed before it expires).

The backend serves a job's private inputs, private model and outputs to staked verifiers; the
verifier trusts none of it: specs are checked against the on-chain specHash, content against
its keccak256, outputs against the on-chain output root. The backend is trusted for
availability only, so its failures split into `BackendUnavailable` (down, failing, or behind
the chain: retry later, never a reason to challenge) and `BackendRefused` (it will not serve
this to us: a configuration problem to log), as the one backend HTTP base raises them
(`client.backend_http`).
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

from client.backend_answers import no_such_route
from client.backend_http import ApiError, BackendHttp, BackendRefused, BackendUnavailable, checked, json_list, json_object
from protocol.jobs import MAX_ITEMS_PER_READ
from protocol.merkle import keccak256
from verifier.pog_checker import GpuVerdict

logger = logging.getLogger(__name__)

REPORT_TIMEOUT_S = 5.0  # a report is best effort: it must never hold up a decision's follow-up
Decision = Literal["passed", "challenged", "escalated", "voted_fault", "voted_no_fault",
                   "fraud_proven", "timeout_claimed", "settled"]


@dataclass(frozen=True)
class ResultItem:
    index: int
    digest: bytes | None  # None: the provider has not uploaded this item
    proof: tuple[bytes, ...]


@dataclass(frozen=True)
class ServedResult:
    """A job's result as the backend serves it (GET /jobs/{id}/result): trusted for nothing until
    the caller checks it against the chain's root."""

    output_root: bytes
    item_count: int
    items: dict[int, ResultItem]


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


class VerifierBackend(BackendHttp):
    """Content, results and outputs of jobs, as the verifier's signed-in session reads them."""

    def __init__(self, base_url: str, account: LocalAccount, lifetime_s: int = 3600, timeout: float = 30.0) -> None:
        super().__init__(self.client(base_url, timeout), account, lifetime_s, sign_all=True)

    def _get(self, what: str, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", path, what=what, **kwargs)

    def content(self, content_hash: bytes) -> bytes:
        """Content by keccak256 (spec, model, input), checked against its hash here."""
        name = "0x" + content_hash.hex()
        data = self._get(f"content {name}", f"/blobs/{name}").content
        if keccak256(data) != content_hash:
            raise BackendRefused(f"content {name}", None, "the backend served bytes with another hash")
        return data

    def result(self, job_id: int) -> ServedResult:
        body = self._get(f"job {job_id} result", f"/jobs/{job_id}/result").json()
        items = {int(i["index"]): ResultItem(int(i["index"]),
                                             bytes.fromhex(i["digest"][2:]) if i.get("digest") else None,
                                             tuple(bytes.fromhex(p[2:]) for p in (i.get("proof") or ())))
                 for i in body["items"]}
        return ServedResult(bytes.fromhex(body["output_root"].removeprefix("0x")), int(body["item_count"]), items)

    def jobs(self, limit: int, offset: int = 0) -> list[dict[str, Any]]:
        """One page of the backend's jobs (GET /jobs), newest first: an index, trusted for nothing."""
        return json_list(self._get("jobs", "/jobs", params={"limit": limit, "offset": offset}))

    def signed_result(self, job_id: int) -> dict[str, Any] | None:
        """The provider's signed result of the job as delivered (SignedJobResult JSON; None:
        none), checked by the caller against the chain."""
        signed = json_object(self._get(f"job {job_id} result", f"/jobs/{job_id}/result")).get("signed")
        if signed is not None and not isinstance(signed, dict):
            raise BackendRefused(f"job {job_id} result", None, f"signed: expected a JSON object, got {signed!r:.80}")
        return signed

    def output(self, job_id: int, index: int) -> bytes:
        return self._get(f"job {job_id} item {index} output", f"/jobs/{job_id}/outputs/{index}").content

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
                raise BackendRefused(f"job {job_id} input {index}", None, "the backend served bytes with another hash")
        missing = set(names) - set(found)
        if missing:
            raise BackendUnavailable(f"job {job_id}", None, f"the backend holds no input for items {sorted(missing)}")
        return found

    def _items(self, path: str, what: str, indices: Sequence[int], one: Callable[[int], bytes]) -> dict[int, bytes]:
        found: dict[int, bytes] = {}
        wanted = list(indices)
        while wanted:
            asked, wanted = wanted[:MAX_ITEMS_PER_READ], wanted[MAX_ITEMS_PER_READ:]
            response = self.send("GET", path, what=what, params={"index": asked})
            if _route_missing(response):
                rest = asked + wanted
                return found | dict(zip(rest, fetch_all(one, rest)))
            page = checked(response, what).json()
            if not page["items"] and page["left"]:  # every answer holds an item: this one is broken
                raise BackendUnavailable(what, None, f"an answer with no item and {len(page['left'])} left")
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
            self.request("POST", "/disputes/reports", what=what, json=body, timeout=REPORT_TIMEOUT_S)
        except ApiError as exc:
            logger.warning("%s not recorded by the backend: %s", what, exc)
            return False
        return True


    def record_devices(self, round_id: int, gpus: Sequence[GpuVerdict]) -> bool:
        """Records a judged PoG round's devices in the backend's PoG history (PUT
        /pog/rounds/{id}/devices): NVML's identity as the prover reported it and the attestation
        outcome. Best effort, like `report`: a failure is logged and returns False."""
        devices = []
        for g in gpus:
            ident = g.identity
            devices.append({"gpu_index": g.gpu_index, "attestation": g.attestation} | ({} if ident is None else {
                "name": ident.name, "uuid": ident.uuid, "memory_bytes": ident.memory_bytes, "serial": ident.serial,
                "driver_version": ident.driver_version, "cc_mode": ident.cc_mode}))
        what = f"devices of PoG round {round_id}"
        try:
            self.request("PUT", f"/pog/rounds/{round_id}/devices", what=what, json={"devices": devices},
                         timeout=REPORT_TIMEOUT_S)
        except ApiError as exc:
            logger.warning("%s not recorded by the backend: %s", what, exc)
            return False
        return True


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


__all__ = ["Decision", "ResultItem", "ServedResult", "VerifierBackend"]
