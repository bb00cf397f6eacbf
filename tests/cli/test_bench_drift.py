"""The drift bench's figures: its ppm is the protocol's tolerance metric, and its CPU runs
compare what they say they compare."""

import math
import subprocess
import sys

import numpy as np

from devtools.bench_drift import DEFAULT_TOLERANCE_PPM, MODELS, compare, flippable, measure_drift
from protocol.jobs import within_tolerance


def test_max_ppm_is_the_least_tolerance_the_protocol_accepts():
    rng = np.random.default_rng(7)
    want = (rng.standard_normal((64, 10)) * 3).astype(np.float32)
    got = want + rng.standard_normal(want.shape).astype(np.float32) * 1e-4
    figures = compare(want.astype(np.float64), got.astype(np.float64))
    least = math.ceil(figures["max_ppm"])
    assert within_tolerance(got, want, least)
    assert not within_tolerance(got, want, least - 2)
    assert not figures["bit_identical"] and not within_tolerance(got, want, 0)
    beyond = [not within_tolerance(g, w, DEFAULT_TOLERANCE_PPM) for g, w in zip(got.ravel(), want.ravel(), strict=True)]
    assert figures["beyond_default"] == np.mean(beyond) > 0


def test_argmax_flips_count_rows_whose_label_moved():
    want = np.array([[0.0, 1.0, 0.5], [2.0, 0.0, 1.0]])
    got = np.array([[0.0, 1.0, 0.5], [0.9, 0.0, 1.0]])
    assert compare(want, got)["argmax_flips"] == 0.5


def test_flippable_rows_are_those_a_cheat_within_the_tolerance_can_relabel():
    # Margins 0.0015 and 0.01 at |top two| ~ 3: the allowance at 1,000 ppm is 0.006.
    reference = np.array([[0.1, 3.0, 2.9985], [0.1, 3.0, 2.99]])
    assert flippable(reference, 1_000) == 0.5 and flippable(reference, 10_000) == 1.0
    assert flippable(reference, 100) == 0


def test_cpu_drift_covers_every_model_and_a_repeat_is_bit_identical():
    result = measure_drift(["cpu"])
    fp32 = [r for r in result["rows"] if r["dtype"] == "fp32"]
    assert {r["model"] for r in fp32} == {m.name for m in MODELS}
    pairs = {r["other"] for r in fp32}
    assert {"cpu t1 b32 again", "cpu t1 b1", "cpu t2 b32"} <= pairs
    assert all(r["bit_identical"] and r["max_abs"] == 0 for r in fp32 if r["other"] == "cpu t1 b32 again")
    assert all(r["max_ppm"] < 1_000 for r in fp32)  # the same kernels' drift on one CPU is tiny


def test_the_bench_imports_nothing_of_the_project_but_itself():
    # The GPU machine has torch and numpy only: the module must load without the project's deps.
    code = ("import sys, builtins; real = builtins.__import__\n"
            "def guard(name, *a, **k):\n"
            "    assert name.split('.')[0] not in ('protocol', 'client', 'eth_hash', 'web3'), name\n"
            "    return real(name, *a, **k)\n"
            "builtins.__import__ = guard\n"
            "import devtools.bench_drift")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_bench_pins_the_kernels_the_protocol_pins():
    from devtools.bench_drift import PINNED_ENV
    from protocol.execution import PINNED_KERNELS

    assert PINNED_ENV == PINNED_KERNELS


def test_the_bench_measures_against_the_renters_default_tolerance():
    from devtools.bench_drift import DEFAULT_TOLERANCE_PPM as BENCH_DEFAULT
    from protocol.execution import DEFAULT_TOLERANCE_PPM

    assert BENCH_DEFAULT == DEFAULT_TOLERANCE_PPM
