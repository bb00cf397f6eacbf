"""What a cheat can change within a tolerance (docs/PROTOCOL.md, "Job re-execution"): each element by
at most t x max(1, |value|), in the model's own dtype and shape; a label only where the top two are
that close; a cheaper precision's outputs fail a tolerance of 100 ppm."""

from __future__ import annotations

import inspect

import numpy as np
import torch

from protocol.execution import DEFAULT_TOLERANCE_PPM
from protocol.jobs import within_tolerance


def _mlp_outputs(dtype: torch.dtype, batch: int = 32) -> np.ndarray:
    torch.manual_seed(33)
    mlp = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 512), torch.nn.GELU(),
                              torch.nn.Linear(512, 10)).eval().to(dtype)
    items = torch.randn((32, 256), generator=torch.Generator().manual_seed(34)).to(dtype)
    with torch.inference_mode():
        return torch.cat([mlp(items[s:s + batch]) for s in range(0, 32, batch)]).numpy()


def test_the_default_tolerance_takes_honest_drift_and_refuses_a_cheaper_precision() -> None:
    """Honest drift: the same items one at a time instead of in a batch of 32 (0.1 ppm here; hosts
    with other torch builds and a GPU moved fp32 outputs by up to 0.7 ppm). Exact comparison
    challenged that; the default accepts it and still refuses the model run in fp16."""
    honest, other_run = _mlp_outputs(torch.float32), _mlp_outputs(torch.float32, batch=1)
    assert not within_tolerance(other_run, honest, 0)
    assert within_tolerance(other_run, honest, DEFAULT_TOLERANCE_PPM)
    assert not within_tolerance(_mlp_outputs(torch.float16).astype(np.float32), honest, DEFAULT_TOLERANCE_PPM)


def test_a_renters_job_gets_the_default_tolerance() -> None:
    from renter.orders import submit_job

    assert inspect.signature(submit_job).parameters["tolerance_ppm"].default == DEFAULT_TOLERANCE_PPM


def test_an_output_in_a_cheaper_dtype_than_the_models_is_rejected() -> None:
    honest, cheap = _mlp_outputs(torch.float32), _mlp_outputs(torch.float16)
    assert cheap.dtype == np.float16 and np.abs(cheap.astype(np.float32) - honest).max() < 1e-3
    assert not within_tolerance(cheap, honest, 10_000)


def test_a_cheaper_precision_passes_only_a_loose_tolerance() -> None:
    honest, cheap = _mlp_outputs(torch.float32), _mlp_outputs(torch.float16).astype(np.float32)
    assert not within_tolerance(cheap, honest, 100)
    assert within_tolerance(cheap, honest, 2_000)


def test_a_label_moves_only_where_the_top_two_are_within_the_allowance() -> None:
    ppm = 1_000
    honest = np.array([[0.1, 3.0, 2.9985], [0.1, 3.0, 2.99]], dtype=np.float32)  # margins 0.0015 and 0.01
    allowance = ppm / 1e6 * np.maximum(1.0, np.abs(honest))
    cheat = honest.copy()
    cheat[:, 1] -= allowance[:, 1] * 0.999  # the leader down, the runner-up up, each just within
    cheat[:, 2] += allowance[:, 2] * 0.999
    assert within_tolerance(cheat, honest, ppm)
    assert list(cheat.argmax(axis=1)) == [2, 1]  # the close row flipped, the other kept its label
