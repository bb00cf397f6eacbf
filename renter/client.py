"""An HTTP client of the backend API for parties that sign with their own key (renter CLI,
tests). The key never leaves this process: only signed messages and public data are sent. Its
requests go through the one backend HTTP base (`client.backend_http.BackendHttp`): the session
is the one SIWE client's (renewed before expiry, signed in again once on a 401) and a failure is
an `ApiError` with the status and the server's message."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import httpx

from renter.errors import NotFound, RenterError
from client.backend_answers import no_such_route
from client.backend_http import ApiError, BackendHttp, checked, json_list, json_object
from protocol.merkle import keccak256, leaf_hash, verify_inclusion

# eth-account (signing, the signed result's checks) loads where it is used: reads start without it.
if TYPE_CHECKING:
    from eth_account.signers.local import LocalAccount

    from protocol.escrow_job import EscrowJob
    from protocol.job_result import EscrowDomain, SignedJobResult

SESSION_LIFETIME_S = 600  # a CLI command is short; a stolen token is worth little for long
RESULT_WAIT_S = 30.0  # the server's bound on one long poll (MAX_RESULT_WAIT_S in backend/api/routes/jobs.py)
OLD_BACKEND_POLL_S = 0.25  # a backend without long polls answers at once: asked again no sooner than this


def _stored_as(data: bytes, answered: str, what: str) -> str:
    """The content hash the backend answered for `data`, checked here: the renter's spec names
    what it hashed itself. A backend answering another hash would have the job (paid for) run
    another model or other inputs, its outputs verified against a commit of the wrong work."""
    digest = "0x" + keccak256(data).hex()
    if answered.lower() != digest:
        raise RenterError(f"the backend stored the {what} ({len(data)} bytes) as {answered}, but its bytes hash to "
                          f"{digest}")
    return digest


class BackendClient(BackendHttp):
    def __init__(self, http: httpx.Client, account: LocalAccount | None = None) -> None:
        super().__init__(http, account, SESSION_LIFETIME_S)

    @classmethod
    def connect(cls, base_url: str, account: LocalAccount | None = None, timeout: float = 60.0) -> BackendClient:
        return cls(cls.client(base_url, timeout), account)

    def _call(self, method: str, path: str, signed: bool = False, **kwargs: Any) -> httpx.Response:
        """One request, in the signed-in session when `signed` (a 401 signs in once more)."""
        return self.request(method, path, signed=signed, **kwargs)

    def _auth(self) -> dict[str, str]:
        """The session's bearer header, for a request sent by other means (tests, fuzzers)."""
        return {"Authorization": f"Bearer {self.token}"}

    def get(self, path: str, **params: Any) -> Any:
        return self._call("GET", path, signed=self.account is not None, params=params or None).json()

    def put(self, path: str, body: dict[str, Any]) -> None:
        """A signed message (its signature is the authority, no session needed)."""
        self.request("PUT", path, json=body)

    def quotes(self, **request: Any) -> list[dict[str, Any]]:
        """Ranked providers for a job (POST /quotes), best first."""
        return json_list(self._call("POST", "/quotes", json=request))

    def explain_quotes(self, **request: Any) -> dict[str, Any]:
        """Why no provider fits the request (POST /quotes/explain)."""
        return json_object(self._call("POST", "/quotes/explain", json=request))

    def push_model(self, data: bytes, name: str, fmt: str, private: bool) -> dict[str, Any]:
        row = json_object(self._call("POST", "/models", signed=True, content=data, params={
            "name": name, "format": fmt, "private": str(private).lower()}))
        _stored_as(data, row["content_hash"], "model")
        return row

    def model(self, content_hash: str) -> dict[str, Any]:
        """The hub's entry of a model (yours, or a public one); ApiError 404 when there is none."""
        return json_object(self._call("GET", f"/models/{content_hash}", signed=True))

    def check_model(self, content_hash: str, inputs: list[str]) -> dict[str, Any]:
        """Dry run (POST /models/{hash}/check): the inputs, as one batch, through the model."""
        return json_object(self._call("POST", f"/models/{content_hash}/check", signed=True, json={"inputs": inputs}))

    def upload_lease_image(self, data: bytes) -> str:
        """POST /lease-images: a root file system tarball; returns its content hash."""
        return str(json_object(self._call("POST", "/lease-images", signed=True, content=data))["content_hash"])

    def upload_input(self, data: bytes) -> str:
        return _stored_as(data, self._call("POST", "/inputs", signed=True, content=data).json()["content_hash"], "input")

    def upload_inputs(self, items: Sequence[bytes], on_uploaded: Callable[[int], object] = lambda _: None) -> list[str]:
        """Each item's id, in order: as many items per request (POST /inputs/batch) as fit its
        body as base64 JSON, an item too large for that alone through POST /inputs; one request
        per item to a backend without the batch route (an earlier version). `on_uploaded` gets
        each item's size once the backend holds it (a progress bar)."""
        # protocol.jobs loads numpy: imported here, the reads (`job status`, `job list`) start without it.
        from protocol.jobs import MAX_INPUTS_BODY_BYTES, base64_size, request_groups

        ids: list[str] = []
        # base64 and its quotes and comma each, within the body less its `{"items": []}`
        for group in request_groups(items, lambda data: base64_size(len(data)) + 4, MAX_INPUTS_BODY_BYTES - 16):
            if len(group) > 1:
                body = {"items": [base64.b64encode(data).decode() for data in group]}
                try:
                    answer = self._call("POST", "/inputs/batch", signed=True, json=body).json()
                except ApiError as exc:
                    if not no_such_route(exc.status, exc.detail):
                        raise
                else:
                    if len(answer) != len(group):
                        raise RenterError(f"the backend stored {len(answer)} of {len(group)} input items")
                    ids += [_stored_as(data, row["content_hash"], "input")
                            for data, row in zip(group, answer, strict=True)]
                    for data in group:
                        on_uploaded(len(data))
                    continue
            for data in group:
                ids.append(self.upload_input(data))
                on_uploaded(len(data))
        return ids

    def store_spec(self, canonical: bytes) -> dict[str, Any]:
        return json_object(self._call("POST", "/jobs/specs", content=canonical,
                                  headers={"Content-Type": "application/json"}))

    def upload_output(self, job_id: int, index: int, data: bytes, proof: list[bytes]) -> dict[str, Any]:
        headers = {"X-Merkle-Proof": ",".join("0x" + p.hex() for p in proof)}
        return json_object(self._call("PUT", f"/jobs/{job_id}/outputs/{index}", signed=True, content=data,
                                  headers=headers))

    def wait_result(self, job_id: int, timeout_s: float) -> dict[str, Any] | None:
        """GET /jobs/{id}/result as soon as the job has one (the provider's signed result, or the
        commit): long polls of at most RESULT_WAIT_S each, answered by the backend when the result
        is stored, until `timeout_s` has passed; None when there is none by then (or the job is not
        indexed by then)."""
        deadline = time.monotonic() + timeout_s
        what = f"GET /jobs/{job_id}/result"
        while True:
            wait = max(0.0, min(deadline - time.monotonic(), RESULT_WAIT_S))
            asked = time.monotonic()
            response = self.send("GET", f"/jobs/{job_id}/result", what=what, params={"wait": round(wait, 3)},
                                 timeout=wait + 30)
            if response.status_code not in (404, 409):  # 404: not indexed yet; 409: no result yet
                return json_object(checked(response, what))
            if time.monotonic() >= deadline:
                return None
            time.sleep(max(0.0, min(OLD_BACKEND_POLL_S - (time.monotonic() - asked), deadline - time.monotonic())))

    def verified_signed_result(self, job: EscrowJob, domain: EscrowDomain,
                               result: dict[str, Any]) -> SignedJobResult | None:
        """The provider's signed result that comes with `result` (GET /jobs/{id}/result), checked
        against what the renter read from the chain itself, never the backend's word: it recovers,
        under the renter's own deployment's JobEscrow domain, to the job's provider on-chain.
        Raises JobResultError otherwise; None when none was delivered."""
        from protocol.job_result import JobResultError, SignedJobResult

        if result.get("signed") is None:
            return None
        signed = SignedJobResult.from_json(result["signed"])
        if signed.result.job_id != job.id or signed.signer(domain).lower() != job.provider.lower():
            raise JobResultError(f"job {job.id}: the signed result is not signed by its provider {job.provider}")
        return signed

    def download_verified(self, job_id: int, root: bytes, item_count: int,
                          on_item: Callable[[int], object] | None = None) -> list[bytes]:
        """Every item's output, each checked against `root` over `item_count` items: the root the
        caller trusts (the chain's, or the one the provider signed), not the one served beside the
        items. Raises JobResultError when the backend serves another root, InvalidProof for an item
        outside it."""
        from protocol.job_result import JobResultError

        result = self._call("GET", f"/jobs/{job_id}/result").json()
        served = bytes.fromhex(result["output_root"][2:])
        if served != root or result["item_count"] != item_count:
            raise JobResultError(f"job {job_id}: the backend serves root 0x{served.hex()} over {result['item_count']} "
                                 f"items, not the trusted 0x{root.hex()} over {item_count}")
        outputs = []
        for item in result["items"]:
            if item["digest"] is None:
                raise NotFound(f"job {job_id} output of item", item["index"])
            data = self._call("GET", f"/jobs/{job_id}/outputs/{item['index']}", signed=True).content
            siblings = [bytes.fromhex(s[2:]) for s in item["proof"]]
            verify_inclusion(leaf_hash(keccak256(data)), item["index"], item_count, siblings, root)
            outputs.append(data)
            if on_item is not None:
                on_item(len(data))
        return outputs

