"""A job's thread count is part of the execution mode every party computes in (one thread), not
a provider's setting: past 2^22 elements ATen splits one item's reduction across its threads, so
a provider running a global average pool on two threads and a verifier re-executing it on one
(verifier.reexec's default) got different bits: a renter asking for the same bits (tolerance 0)
had its verifier challenge an honest provider."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pydantic
import pytest
import torch

from client.sandbox import ItemBatch, Limits, run_model
from protocol.jobs import encode_output
from provider_agent.settings import Settings


class GlobalPool(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean((1, 2, 3)).unsqueeze(1)


def test_a_long_reduction_on_two_threads_is_not_the_one_on_one_thread(tmp_path: Path) -> None:
    model = tmp_path / "pool.pt"
    torch.jit.save(torch.jit.script(GlobalPool()), str(model))
    inputs = []
    for seed in range(3):
        inputs.append(tmp_path / f"{seed}.in")
        inputs[-1].write_bytes(encode_output(np.random.default_rng(seed).standard_normal((64, 256, 256), np.float32)))
    batches = [ItemBatch(0, tuple(inputs), 1)]
    one, two = (run_model(model, "torchscript", batches, Limits(2 << 30, 60.0, threads)).outputs for threads in (1, 2))
    assert [i for i in range(3) if one[i] != two[i]] != []


def test_a_provider_cannot_set_its_jobs_thread_count() -> None:
    with pytest.raises(pydantic.ValidationError, match="job_threads"):
        Settings(job_threads=2)  # type: ignore[call-arg]
