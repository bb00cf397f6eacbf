"""Residency fill timings on one torch device, for `unchained bench --only gpu`.

`residency_probe_bench("cuda:0", 8 << 30)` builds one fill of about that size the way the
prover does (provider_agent/pog_residency.py), commits it and answers one probe, and returns
the times and the keccak rate they imply: what calibrates the fill's iterations W and the
probe deadline (protocol/pog/residency.py, docs/PROTOCOL.md "PoG residency").
"""

from __future__ import annotations

import time
from typing import Any

import torch

from protocol.merkle import keccak256
from protocol.pog.residency import (
    FILL_LANES,
    PERMUTATIONS_COMMIT,
    PROBES,
    FillParams,
    check_probes,
    probe_indices,
)
from provider_agent import keccak_torch
from provider_agent.gpus import Device
from provider_agent.pog_residency import build_fill, device_hasher

_CPU_LANES = 1 << 10


def residency_probe_bench(device: str, fill_bytes: int, iterations: int = 1) -> dict[str, Any]:
    """Build, commit and probe one fill of about `fill_bytes` on `device` ("cuda:0", "cpu").

    The keccak kernel is compiled and checked before the clock starts (as the prover does).
    Returns seconds for the build, the commit (root) and one probe answer (32 probes with their
    parents and proofs), the verifier's check of it, and the permutation rates."""
    lanes = _CPU_LANES if device == "cpu" else FILL_LANES
    params = FillParams(lanes, max(2, fill_bytes // (32 * lanes)), iterations)
    on_device = device != "cpu" and keccak_torch.device_ready(device)
    hasher = device_hasher(device)
    seed = keccak256(b"residency bench " + device.encode())
    fill = build_fill(Device(device, device, "bench", 0), 0, seed, params, hasher)
    indices = probe_indices(keccak256(b"probe"), fill.root, params, PROBES)
    start = time.perf_counter()
    answers = fill.answer(indices)
    probe_s = time.perf_counter() - start
    start = time.perf_counter()
    check_probes(seed, params, fill.root, indices, answers)
    verify_s = time.perf_counter() - start
    result = {
        "device": device,
        "keccak": "torch (compiled, on the device)" if on_device else "native (host)",
        "fill_bytes": params.bytes,
        "lanes": params.lanes,
        "steps": params.steps,
        "iterations": params.iterations,
        "build_s": fill.build_s,
        "commit_s": fill.commit_s,
        "probe_s": probe_s,
        "verify_s": verify_s,
        "build_permutations_per_s": params.blocks * params.permutations_per_block / fill.build_s,
        "commit_permutations_per_s": params.blocks * PERMUTATIONS_COMMIT / fill.commit_s,
        "root": "0x" + fill.root.hex(),
    }
    del fill, answers
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return result
