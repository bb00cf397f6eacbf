"""A job's outputs reach the backend in as few requests as fit: several items per request
(PUT /jobs/{id}/outputs), an item too large for one goes alone (PUT /jobs/{id}/outputs/{index})."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

import provider_agent.jobs
from protocol.merkle import MerkleTree, keccak256
from provider_agent.jobs import JobService, OutputStore
from provider_agent.runner import Limits
from provider_agent.state import JobStore


class RecordingBackend:
    """The calls JobService makes to the backend, answered as a backend that takes everything."""

    def __init__(self) -> None:
        self.requests: list[list[int]] = []  # item indices, one list per request

    def uploaded_items(self, job_id: int) -> set[int]:
        return set()

    def upload_output(self, job_id: int, index: int, data: bytes, proof: Sequence[bytes]) -> None:
        self.requests.append([index])

    def upload_outputs(self, job_id: int, items: Sequence[tuple[int, bytes, Sequence[bytes]]]) -> None:
        self.requests.append([index for index, _, _ in items])


def _service(tmp_path: Path, outputs: list[bytes]) -> tuple[JobService, RecordingBackend]:
    backend = RecordingBackend()
    service = JobService(None, None, JobStore(tmp_path / "jobs.db"), OutputStore(tmp_path / "outputs"),  # type: ignore[arg-type]
                         Limits(1 << 30, 60.0), backend=backend)  # type: ignore[arg-type]
    service.outputs.save(7, outputs, [keccak256(data) for data in outputs])
    return service, backend


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
