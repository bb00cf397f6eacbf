"""An HTTP client of the backend API for parties that sign with their own key (renter CLI,
tests). The key never leaves this process: only signed messages and public data are sent."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from eth_account.messages import encode_defunct
from eth_account.signers.local import LocalAccount

from backend.errors import BackendError, NotFound, Unauthenticated
from protocol.merkle import keccak256, leaf_hash, verify_inclusion
from protocol.siwe import SiweMessage


class ApiError(BackendError):
    """The backend answered with an error; carries the status and the server's message."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status, self.detail = status, detail


class BackendClient:
    def __init__(self, http: httpx.Client, account: LocalAccount | None = None) -> None:
        self.http = http
        self.account = account
        self.token: str | None = None

    @classmethod
    def connect(cls, base_url: str, account: LocalAccount | None = None, timeout: float = 60.0) -> BackendClient:
        return cls(httpx.Client(base_url=base_url, timeout=timeout), account)

    def close(self) -> None:
        self.http.close()

    def _check(self, response: httpx.Response) -> httpx.Response:
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail", response.text)
            except ValueError:
                detail = response.text
            raise ApiError(response.status_code, str(detail))
        return response

    def _auth(self) -> dict[str, str]:
        if self.token is None:
            self.sign_in()
        return {"Authorization": f"Bearer {self.token}"}

    def sign_in(self, lifetime_s: int = 600) -> str:
        """Sign-In with Ethereum: fetch a nonce, sign the EIP-4361 message locally, log in."""
        if self.account is None:
            raise Unauthenticated("no key to sign in with: pass --keystore")
        issued = self._check(self.http.get("/auth/nonce")).json()
        # EIP-4361: never sign a message for a domain other than the one we are talking to, or a
        # hostile server could relay our signature to log in elsewhere.
        url = self.http.base_url
        here = url.host if url.port is None else f"{url.host}:{url.port}"
        if issued["domain"] != here:
            raise Unauthenticated(f"the server asks to sign in to {issued['domain']!r}, but it is {here!r}")
        now = datetime.now(UTC).replace(microsecond=0)
        message = SiweMessage(
            domain=issued["domain"], address=self.account.address, uri=issued["uri"],
            chain_id=issued["chain_id"], nonce=issued["nonce"], issued_at=now,
            expiration_time=now + timedelta(seconds=lifetime_s),
            statement="Sign in to the Unchained marketplace.",
        ).text()
        signature = self.account.sign_message(encode_defunct(text=message)).signature.hex()
        body = self._check(self.http.post("/auth/login", json={"message": message, "signature": signature})).json()
        self.token = body["token"]
        return self.token

    def get(self, path: str, **params: Any) -> Any:
        headers = self._auth() if self.token or self.account else {}
        return self._check(self.http.get(path, params=params or None, headers=headers)).json()

    def quotes(self, **request: Any) -> list[dict[str, Any]]:
        """Ranked providers for a job (POST /quotes), best first."""
        return self._check(self.http.post("/quotes", json=request)).json()

    def explain_quotes(self, **request: Any) -> dict[str, Any]:
        """Why no provider fits the request (POST /quotes/explain)."""
        return self._check(self.http.post("/quotes/explain", json=request)).json()

    def push_model(self, data: bytes, name: str, fmt: str, private: bool) -> dict[str, Any]:
        return self._check(self.http.post("/models", content=data, headers=self._auth(), params={
            "name": name, "format": fmt, "private": str(private).lower()})).json()

    def model(self, content_hash: str) -> dict[str, Any]:
        """The hub's entry of a model (yours, or a public one); ApiError 404 when there is none."""
        return self._check(self.http.get(f"/models/{content_hash}", headers=self._auth())).json()

    def check_model(self, content_hash: str, inputs: list[str]) -> dict[str, Any]:
        """Dry run (POST /models/{hash}/check): the inputs, as one batch, through the model."""
        return self._check(self.http.post(f"/models/{content_hash}/check", json={"inputs": inputs},
                                          headers=self._auth())).json()

    def upload_input(self, data: bytes) -> str:
        return self._check(self.http.post("/inputs", content=data, headers=self._auth())).json()["content_hash"]

    def store_spec(self, canonical: bytes) -> dict[str, Any]:
        return self._check(self.http.post("/jobs/specs", content=canonical,
                                          headers={"Content-Type": "application/json"})).json()

    def upload_output(self, job_id: int, index: int, data: bytes, proof: list[bytes]) -> dict[str, Any]:
        headers = {**self._auth(), "X-Merkle-Proof": ",".join("0x" + p.hex() for p in proof)}
        return self._check(self.http.put(f"/jobs/{job_id}/outputs/{index}", content=data, headers=headers)).json()

    def download_verified(self, job_id: int, on_item: Callable[[int], object] | None = None) -> list[bytes]:
        """Every item's output, each checked against the output root (raises InvalidProof)."""
        result = self._check(self.http.get(f"/jobs/{job_id}/result")).json()
        root = bytes.fromhex(result["output_root"][2:])
        outputs = []
        for item in result["items"]:
            if item["digest"] is None:
                raise NotFound(f"job {job_id} output of item", item["index"])
            data = self._check(self.http.get(f"/jobs/{job_id}/outputs/{item['index']}", headers=self._auth())).content
            siblings = [bytes.fromhex(s[2:]) for s in item["proof"]]
            verify_inclusion(leaf_hash(keccak256(data)), item["index"], result["item_count"], siblings, root)
            outputs.append(data)
            if on_item is not None:
                on_item(len(data))
        return outputs
