"""A job's outputs reach the backend in as few requests as fit: the first request's worth with the
signed result (PUT /jobs/{id}/signed-result), then several items per request (PUT /jobs/{id}/outputs),
an item too large for one goes alone (PUT /jobs/{id}/outputs/{index})."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import pytest

import provider_agent.jobs
from protocol.merkle import MerkleTree, keccak256
from client.backend_http import BackendUnavailable
from provider_agent.jobs import JobService, OutputStore, UploadFailed
from provider_agent.runner import Limits
from provider_agent.state import JobStore


class RecordingBackend:
    """The calls JobService makes to the backend, answered as a backend that takes everything."""

    def __init__(self, takes_outputs_with_result: bool = True) -> None:
        self.requests: list[list[int]] = []  # item indices, one list per request
        self.results: list[list[int]] = []  # items sent with each signed-result delivery
        self.takes_outputs_with_result = takes_outputs_with_result

    def deliver_result(self, signed: dict, items: Sequence[tuple[int, bytes, Sequence[bytes]]] = ()) -> bool:  # type: ignore[type-arg]
        self.results.append([index for index, _, _ in items])
        return bool(items) and self.takes_outputs_with_result

    def uploaded_items(self, job_id: int) -> set[int]:
        return set()

    def upload_output(self, job_id: int, index: int, data: bytes, proof: Sequence[bytes]) -> None:
        self.requests.append([index])

    def upload_outputs(self, job_id: int, items: Sequence[tuple[int, bytes, Sequence[bytes]]]) -> None:
        self.requests.append([index for index, _, _ in items])


class Signed:
    def to_json(self) -> dict:  # type: ignore[type-arg]
        return {"jobId": 7}


def _service(tmp_path: Path, outputs: list[bytes], backend: RecordingBackend | None = None,
             signed: bool = False) -> tuple[JobService, RecordingBackend]:
    backend = backend or RecordingBackend()
    service = JobService(None, None, JobStore(tmp_path / "jobs.db"), OutputStore(tmp_path / "outputs"),  # type: ignore[arg-type]
                         Limits(1 << 30, 60.0), backend=backend)  # type: ignore[arg-type]
    service.outputs.save(7, outputs, [keccak256(data) for data in outputs])
    if signed:
        service.signed_result = lambda job_id: Signed()  # type: ignore[method-assign, assignment, return-value]
    return service, backend


def test_a_signed_result_carries_the_first_requests_worth_of_outputs(tmp_path: Path) -> None:
    service, backend = _service(tmp_path, [b"item-%d" % i for i in range(5)], signed=True)
    assert service.upload_outputs(7, fresh=True) == 5
    assert backend.results == [[0, 1, 2, 3, 4]] and backend.requests == []  # one request in all


def test_a_backend_that_ignores_outputs_with_the_result_gets_them_on_their_own(tmp_path: Path) -> None:
    service, backend = _service(tmp_path, [b"item-%d" % i for i in range(5)],
                                RecordingBackend(takes_outputs_with_result=False), signed=True)
    assert service.upload_outputs(7, fresh=True) == 5
    assert backend.results == [[0, 1, 2, 3, 4]] and backend.requests == [[0, 1, 2, 3, 4]]


def test_an_item_too_large_to_share_a_body_does_not_ride_with_the_result(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provider_agent.jobs, "MAX_OUTPUTS_BODY_BYTES", 2000)
    service, backend = _service(tmp_path, [bytes(3000), bytes(300), bytes(300)], signed=True)
    assert service.upload_outputs(7, fresh=True) == 3
    assert backend.results == [[]] and backend.requests == [[0], [1, 2]]


def test_a_recheck_delivers_the_result_then_asks_what_the_backend_holds(tmp_path: Path) -> None:
    service, backend = _service(tmp_path, [b"item-%d" % i for i in range(3)], signed=True)
    assert service.upload_outputs(7) == 3
    assert backend.results == [[]] and backend.requests == [[0, 1, 2]]


def test_small_outputs_go_in_one_request(tmp_path: Path) -> None:
    service, backend = _service(tmp_path, [b"item-%d" % i for i in range(5)])
    assert service.upload_outputs(7, fresh=True) == 5
    assert backend.requests == [[0, 1, 2, 3, 4]]
    assert service.outputs.uploaded(7)


def test_requests_stay_within_the_body_limit_and_a_large_item_goes_alone(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provider_agent.jobs, "MAX_OUTPUTS_BODY_BYTES", 2000)
    outputs = [bytes(300), bytes(300), bytes(300), bytes(3000), bytes(300), bytes(300)]
    service, backend = _service(tmp_path, outputs)
    assert service.upload_outputs(7, fresh=True) == 6
    assert sorted(i for request in backend.requests for i in request) == list(range(6))  # each once
    assert [3] in backend.requests  # too large to share a request
    depth = len(MerkleTree.from_leaves([keccak256(d) for d in outputs]).proof(0))
    for request in backend.requests:
        if len(request) > 1:  # base64 and hex siblings of each item within the limit
            assert sum(len(outputs[i]) * 4 // 3 + 80 * (depth + 1) for i in request) <= 2000
    assert len(backend.requests) < len(outputs)


class UnreachableOnce(RecordingBackend):
    """A backend that cannot take the first request (down, or behind the chain), then takes everything."""

    def __init__(self) -> None:
        super().__init__()
        self.refusals = 0

    def upload_outputs(self, job_id: int, items: Sequence[tuple[int, bytes, Sequence[bytes]]]) -> None:
        if self.refusals == 0:
            self.refusals += 1
            raise BackendUnavailable("upload outputs", 503, "behind the chain")
        super().upload_outputs(job_id, items)


def test_an_unreachable_backend_fails_the_try_at_once_and_leaves_the_upload_pending(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No sleep inside the job's task: the worker's upload task tries again with Celery's countdown."""
    def no_sleep(seconds: float) -> None:
        raise AssertionError(f"slept {seconds} s inside an upload")

    monkeypatch.setattr(time, "sleep", no_sleep)
    service, backend = _service(tmp_path, [b"item-%d" % i for i in range(5)], UnreachableOnce())
    with pytest.raises(UploadFailed, match="behind the chain"):
        service.upload_outputs(7, fresh=True)
    assert backend.refusals == 1 and backend.requests == [] and not service.outputs.uploaded(7)
    assert service.upload_outputs(7) == 5 and backend.requests == [[0, 1, 2, 3, 4]]
    assert service.outputs.uploaded(7)
