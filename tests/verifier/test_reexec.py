"""The verifier's sandboxed re-execution: same results as the shared inference code run in
process (the provider's code path), whole batches, and every way an untrusted model can fail
ends as ReexecFailed within the limits."""

from __future__ import annotations

import io
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch

from protocol.inference import InferenceError, batches_holding, load_model, run_batches
from protocol.jobs import JobSpec, encode_output
from protocol.merkle import keccak256
from tests.tiny_models import Hangs, Hogs, Raises, Tiny
from verifier import job_audit
from verifier.reexec import Batch, ReexecFailed, ReexecLimits, ReexecTimedOut, reexecute

ITEMS = [np.random.default_rng(i).standard_normal(8).astype(np.float32) for i in range(7)]


def torchscript(module: torch.nn.Module) -> bytes:
    buffer = io.BytesIO()
    torch.jit.save(torch.jit.script(module), buffer)
    return buffer.getvalue()


def onnx(module: torch.nn.Module, tmp_path: Path) -> bytes:
    path = tmp_path / "model.onnx"
    torch.onnx.export(module, (torch.zeros(2, 8),), str(path), dynamo=False, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    return path.read_bytes()


def whole_batches(indices: list[int], batch_size: int) -> list[Batch]:
    return [Batch(r.start, tuple(encode_output(ITEMS[i]) for i in r))
            for r in batches_holding(indices, batch_size, len(ITEMS))]


def test_batches_holding_are_the_providers_batches_of_the_sampled_items() -> None:
    assert batches_holding([6, 1, 2], 3, 7) == [range(0, 3), range(6, 7)]
    assert batches_holding([0, 3], 4, 7) == [range(0, 4)]
    assert batches_holding([9], 4, 7) == []  # outside the job: nothing to run
    with pytest.raises(InferenceError):
        batches_holding([0], 0, 7)


@pytest.mark.parametrize("fmt", ["torchscript", "onnx"])
def test_reexecution_in_the_child_equals_the_shared_inference_run_in_process(fmt: str, tmp_path: Path) -> None:
    model = torchscript(Tiny()) if fmt == "torchscript" else onnx(Tiny(), tmp_path)
    reference = run_batches(load_model(model, fmt), ITEMS, 3)  # what the provider computes
    outputs = reexecute(1, model, fmt, whole_batches([1, 6], 3), ReexecLimits(2 << 30, 60.0), tmp_path / "w")
    assert sorted(outputs) == [0, 1, 2, 6]  # whole batches [0, 3) and [6, 7)
    for index, output in outputs.items():
        assert output.dtype == np.float32 and np.array_equal(output, reference[index]), index


def test_a_model_that_raises_fails_the_reexecution_with_its_message(tmp_path: Path) -> None:
    with pytest.raises(ReexecFailed, match="division by zero in layer 3"):
        reexecute(2, torchscript(Raises()), "torchscript", whole_batches([0], 2), ReexecLimits(2 << 30, 60.0), tmp_path)


def test_a_model_that_never_ends_is_killed_at_its_wall_clock_limit(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(ReexecTimedOut):
        reexecute(3, torchscript(Hangs()), "torchscript", whole_batches([0], 2), ReexecLimits(2 << 30, 4.0), tmp_path)
    assert time.monotonic() - started < 10


def test_a_model_that_allocates_past_the_memory_limit_fails_in_its_child(tmp_path: Path) -> None:
    with pytest.raises(ReexecFailed, match="(?i)memory|alloc"):
        reexecute(4, torchscript(Hogs()), "torchscript", whole_batches([0], 2), ReexecLimits(2 << 30, 60.0), tmp_path)


def test_a_malformed_model_is_refused_in_the_child(tmp_path: Path) -> None:
    with pytest.raises(ReexecFailed):
        reexecute(5, b"not a model", "torchscript", whole_batches([0], 2), ReexecLimits(2 << 30, 60.0), tmp_path)


class ContentStore:
    """The backend's routes as the re-executor uses them: content by hash, a job's inputs; reads counted."""

    def __init__(self) -> None:
        self.blobs: dict[bytes, bytes] = {}
        self.reads = 0

    def put(self, data: bytes) -> str:
        self.blobs[keccak256(data)] = data
        return "0x" + keccak256(data).hex()

    def content(self, content_hash: bytes) -> bytes:
        self.reads += 1
        return self.blobs[content_hash]

    def inputs(self, job_id: int, names: dict[int, bytes]) -> dict[int, bytes]:
        """A job's inputs in one read (GET /jobs/{id}/inputs)."""
        self.reads += 1
        return {index: self.blobs[name] for index, name in names.items()}


def test_reexecuted_items_are_kept_so_a_later_judgement_runs_only_new_ones(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    store = ContentStore()
    spec = JobSpec(model=store.put(torchscript(Tiny())), model_format="torchscript",
                   inputs=tuple(store.put(encode_output(x)) for x in ITEMS), batch_size=3, tolerance_ppm=0,
                   deadline=2**40, price_wei=1, provider="0x" + "11" * 20)
    runs: list[list[int]] = []

    def counted(job_id, model, fmt, batches, limits, work_dir):  # type: ignore[no-untyped-def]
        runs.append([i for b in batches for i in range(b.start, b.start + len(b.inputs))])
        return reexecute(job_id, model, fmt, batches, limits, work_dir)

    monkeypatch.setattr(job_audit, "reexecute", counted)
    reexec = job_audit.JobReexecutor(store, ReexecLimits(2 << 30, 60.0), tmp_path, cache_items=4)  # type: ignore[arg-type]
    first = reexec.run(1, spec, [1, 6])
    assert runs == [[0, 1, 2, 6]]
    again = reexec.run(1, spec, [6, 1])  # the audit's items, asked again when judging an answer
    assert runs == [[0, 1, 2, 6]] and all(np.array_equal(first[i], again[i]) for i in (1, 6))
    reexec.run(1, spec, [4])  # a new batch runs; the oldest kept items are dropped past cache_items
    assert runs[-1] == [3, 4, 5] and len(reexec._outputs) == 4
    reference = run_batches(load_model(store.blobs[bytes.fromhex(spec.model[2:])], "torchscript"), ITEMS, 3)
    assert np.array_equal(reexec.run(1, spec, [4])[4], reference[4])


def test_a_model_is_fetched_once_for_many_audits_within_the_cache_bytes(tmp_path: Path) -> None:
    store = ContentStore()
    small, other, big = store.put(b"m" * 10), store.put(b"n" * 10), store.put(b"b" * 50)
    reexec = job_audit.JobReexecutor(store, ReexecLimits(2 << 30, 60.0), tmp_path,  # type: ignore[arg-type]
                                     model_cache_bytes=25)
    for _ in range(3):
        assert reexec.model(bytes.fromhex(small[2:])) == b"m" * 10
    assert store.reads == 1
    reexec.model(bytes.fromhex(other[2:]))
    reexec.model(bytes.fromhex(big[2:]))  # larger than the cache: served, not kept
    reexec.model(bytes.fromhex(big[2:]))
    assert store.reads == 4 and list(reexec._models) == [bytes.fromhex(small[2:]), bytes.fromhex(other[2:])]
    reexec.model(bytes.fromhex(store.put(b"o" * 10)[2:]))  # a third small one: the least recent leaves
    assert bytes.fromhex(small[2:]) not in reexec._models


def test_audits_in_parallel_share_the_caches_and_run_one_model_at_a_time(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    store = ContentStore()
    model = store.put(torchscript(Tiny()))
    specs = [JobSpec(model=model, model_format="torchscript", inputs=(store.put(encode_output(x)),), batch_size=1,
                     tolerance_ppm=0, deadline=2**40, price_wei=1, provider="0x" + "11" * 20) for x in ITEMS]
    running, overlapped = [0], []
    lock = threading.Lock()

    def counted(job_id, model, fmt, batches, limits, work_dir):  # type: ignore[no-untyped-def]
        with lock:
            running[0] += 1
            overlapped.append(running[0] > 1)
        try:
            return reexecute(job_id, model, fmt, batches, limits, work_dir)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(job_audit, "reexecute", counted)
    reexec = job_audit.JobReexecutor(store, ReexecLimits(2 << 30, 60.0), tmp_path)  # type: ignore[arg-type]
    with ThreadPoolExecutor(max_workers=4) as pool:
        outputs = list(pool.map(lambda job: reexec.run(job[0], job[1], [0]), enumerate(specs)))
    reference = run_batches(load_model(store.blobs[bytes.fromhex(model[2:])], "torchscript"), ITEMS, 1)
    assert all(np.array_equal(out[0], reference[i]) for i, out in enumerate(outputs))
    assert len(overlapped) == len(specs) and not any(overlapped)
    assert len(reexec._outputs) == len(specs)
