"""Proof of GPU: workload, commitment, challenge derivation, chunk checking and GPU classes.

Each name loads its module on first use (PEP 562): most of them need numpy, which a command that
only names a constant (`unchained provider --help` reads MIN_K) should not pay for.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_MODULE_OF = {
    **dict.fromkeys(("challenge_indices", "pog_round_seed", "pog_secret_hash"), "challenge"),
    **dict.fromkeys(("check_chunk", "check_chunks", "expected_chunk", "expected_chunks"), "check"),
    **dict.fromkeys((
        "CHUNK_BYTES", "CHUNK_ELEMENTS", "chunk_hashes", "chunk_position", "commit", "decode_chunk",
        "encode", "leaf_count"), "commitment"),
    **dict.fromkeys((
        "ChunkAnswer", "FillRoot", "GpuAnswers", "GpuCommitment", "GpuProbes", "MalformedMessage",
        "MessageTooLarge", "RoundAnswers", "RoundCommitment", "RoundFills", "RoundProbes", "decode_answers",
        "decode_commitment", "decode_fills", "decode_probes", "encode_answers", "encode_commitment",
        "encode_fills", "encode_probes", "max_answers_bytes", "max_probes_bytes"), "messages"),
    **dict.fromkeys((
        "CPU_CEILING_TOPS", "CPU_EXACT_CEILING", "HONEST_FLOOR", "PROFILES", "GpuProfile", "Identification",
        "identifiable_floor", "identify", "lookup", "n_for", "proven_devices"), "profiles"),
    **dict.fromkeys((
        "MatrixKeys", "Seed", "WorkloadKeys", "check_n", "element", "gpu_seed", "reference_product", "rows",
        "select_rows", "word", "words"), "workload"),
}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'protocol.pog' has no attribute {name!r}")
    value = getattr(import_module(f"protocol.pog.{module}"), name)
    globals()[name] = value
    return value

