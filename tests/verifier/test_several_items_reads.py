"""The verifier's several-items reads: pages asked for until nothing is left, each input checked
against the hash its spec names, and one request per item from a backend of an earlier version
(which has no such route), but not from one that says the job is unknown."""

from __future__ import annotations

import base64

import httpx
import pytest

from client.backend_http import BackendRefused, BackendUnavailable
from protocol.merkle import keccak256
from tests.support.accounts import dev_account
from verifier.backend_client import VerifierBackend

INPUTS = {i: b"input-%d" % i for i in range(5)}
NAMES = {i: keccak256(data) for i, data in INPUTS.items()}


class Backend:
    """Answers as the backend's routes do, from INPUTS; `per_answer` items at most per page."""

    def __init__(self, per_answer: int = 2, has_route: bool = True, served: dict[int, bytes] | None = None) -> None:
        self.per_answer, self.has_route = per_answer, has_route
        self.served = dict(INPUTS) if served is None else served
        self.paths: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path + (f"?{request.url.query.decode()}" if request.url.query else ""))
        if request.url.path == "/jobs/7/inputs":
            if not self.has_route:
                return httpx.Response(404, json={"detail": "Not Found"})
            asked = [int(i) for i in request.url.params.get_list("index")]
            held = [i for i in asked if i in self.served]
            page, left = held[:self.per_answer], held[self.per_answer:]
            return httpx.Response(200, json={
                "items": [{"index": i, "content_hash": "0x" + NAMES[i].hex(),
                           "data": base64.b64encode(self.served[i]).decode()} for i in page],
                "missing": [i for i in asked if i not in self.served], "left": left})
        if request.url.path.startswith("/blobs/0x"):
            name = bytes.fromhex(request.url.path.removeprefix("/blobs/0x"))
            [index] = [i for i, n in NAMES.items() if n == name]
            return httpx.Response(200, content=self.served[index])
        if request.url.path == "/jobs/8/inputs":
            return httpx.Response(404, json={"detail": "job 8 not found"})
        return httpx.Response(500, json={"detail": f"unexpected {request.url}"})


def client(backend: Backend) -> VerifierBackend:
    verifier = VerifierBackend("http://backend.test", dev_account(5))
    verifier.http = httpx.Client(base_url="http://backend.test", transport=httpx.MockTransport(backend))
    return verifier


def test_inputs_come_in_pages_until_none_is_left() -> None:
    backend = Backend(per_answer=2)
    assert client(backend).inputs(7, NAMES) == INPUTS
    assert backend.paths == ["/jobs/7/inputs?index=0&index=1&index=2&index=3&index=4",
                             "/jobs/7/inputs?index=2&index=3&index=4", "/jobs/7/inputs?index=4"]


def test_inputs_come_one_by_one_from_a_backend_without_the_route() -> None:
    backend = Backend(has_route=False)
    assert client(backend).inputs(7, {1: NAMES[1], 3: NAMES[3]}) == {1: INPUTS[1], 3: INPUTS[3]}
    assert backend.paths[0] == "/jobs/7/inputs?index=1&index=3"
    assert sorted(backend.paths[1:]) == sorted(f"/blobs/0x{NAMES[i].hex()}" for i in (1, 3))


def test_an_unknown_job_is_not_taken_for_an_old_backend() -> None:
    backend = Backend()
    with pytest.raises(BackendUnavailable, match="job 8 not found"):
        client(backend).inputs(8, NAMES)
    assert backend.paths == ["/jobs/8/inputs?index=0&index=1&index=2&index=3&index=4"]


def test_inputs_with_another_hash_or_none_are_refused() -> None:
    with pytest.raises(BackendRefused, match="input 2: the backend served bytes with another hash"):
        client(Backend(served={**INPUTS, 2: b"forged"})).inputs(7, NAMES)
    with pytest.raises(BackendUnavailable, match=r"no input for items \[3\]"):
        client(Backend(served={i: d for i, d in INPUTS.items() if i != 3})).inputs(7, NAMES)
