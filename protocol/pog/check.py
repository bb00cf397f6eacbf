"""Judging one revealed chunk: inclusion in the committed tree, then every element recomputed.

Recomputing a chunk needs one row of A and the 64 rows of Bt for its columns (PROTOCOL.md),
so a verifier spends O(64 n) work per challenge instead of the prover's O(n^3).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from protocol.errors import WrongElement
from protocol.merkle import leaf_hash, verify_inclusion
from protocol.pog.commitment import CHUNK_ELEMENTS, chunk_position, decode_chunk, leaf_count
from protocol.pog.workload import WorkloadKeys, rows, select_rows


def expected_chunk(keys: WorkloadKeys, n: int, index: int) -> np.ndarray:
    """The exact 64 values of chunk `index` (int64)."""
    row, col = chunk_position(n, index)
    a = rows(keys.a, n, row, row + 1)[0].astype(np.int64)
    bt = select_rows(keys.b, n, np.arange(col, col + CHUNK_ELEMENTS)).astype(np.int64)
    chunk: np.ndarray = bt @ a
    return chunk


def expected_chunks(keys: WorkloadKeys, n: int, indices: Sequence[int]) -> np.ndarray:
    """The exact values of many chunks at once, shape (len(indices), 64), int64.

    One batched product in fp32, which is exact here: every partial sum is an integer of
    magnitude at most 64 n <= 2^22 < 2^24.
    """
    positions = [chunk_position(n, i) for i in indices]
    a_rows = np.array([r for r, _ in positions], dtype=np.int64)
    cols = np.array([c for _, c in positions], dtype=np.int64)[:, None] + np.arange(CHUNK_ELEMENTS)
    a = select_rows(keys.a, n, a_rows).astype(np.float32)
    bt = select_rows(keys.b, n, cols.reshape(-1)).astype(np.float32)
    bt = bt.reshape(len(positions), CHUNK_ELEMENTS, n)
    chunks: np.ndarray = np.matmul(bt, a[:, :, None])[:, :, 0].astype(np.int64)
    return chunks


def check_chunk(
    seed: bytes,
    n: int,
    root: bytes,
    index: int,
    data: bytes,
    siblings: Sequence[bytes],
) -> None:
    """Raise unless `data` is chunk `index` of the tree `root` and holds the true values.

    `seed` is the GPU's seed (`gpu_seed`). Order matters: size, then inclusion (cheap, binds
    the data to the commitment), then values. Raises WrongSize, IndexOutOfRange, InvalidProof
    or WrongElement (the first bad element).
    """
    got = decode_chunk(data)
    verify_inclusion(leaf_hash(data), index, leaf_count(n), siblings, root)
    want = expected_chunk(WorkloadKeys.derive(seed), n, index)
    _compare(index, got, want)


def check_chunks(
    seed: bytes,
    n: int,
    root: bytes,
    answers: Sequence[tuple[int, bytes, Sequence[bytes]]],
) -> None:
    """`check_chunk` for many (index, data, siblings) answers, values recomputed in one batch.

    Every inclusion proof is checked before any value; the first failure in answer order raises.
    """
    count = leaf_count(n)
    values = []
    for index, data, siblings in answers:
        values.append(decode_chunk(data))
        verify_inclusion(leaf_hash(data), index, count, siblings, root)
    if not answers:
        return
    wanted = expected_chunks(WorkloadKeys.derive(seed), n, [index for index, _, _ in answers])
    for (index, _, _), got, want in zip(answers, values, wanted):
        _compare(index, got, want)


def _compare(index: int, got: np.ndarray, want: np.ndarray) -> None:
    bad = np.flatnonzero(got != want)
    if bad.size:
        offset = int(bad[0])
        raise WrongElement(index, offset, int(want[offset]), int(got[offset]))
