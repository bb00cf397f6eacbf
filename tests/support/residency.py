"""Residency fills for tests: the parent graph of a real fill, and what a prover that kept only
part of it must recompute to answer a probe (counted in block hashes, never in wall time)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from protocol.merkle import MerkleTree
from protocol.pog.residency import (
    BLOCK_BYTES,
    PARENTS,
    BlockOpening,
    FillParams,
    ProbeAnswer,
    parent_indices,
    ref_indices,
)


def parent_graph(fill: np.ndarray, params: FillParams) -> np.ndarray:
    """(N, 16) int64: each block's parents (previous block first); -1 on step 0."""
    lanes = params.lanes
    parents = np.full((params.blocks, PARENTS), -1, dtype=np.int64)
    for step in range(1, params.steps):
        rows = np.arange(step * lanes, (step + 1) * lanes)
        parents[rows, 0] = rows - lanes
        parents[rows, 1:] = ref_indices(fill[rows - lanes], step, lanes)
    return parents


def recompute_cost(parents: np.ndarray, kept: np.ndarray, wanted: Iterable[int]) -> int:
    """Block hashes a prover holding only the `kept` blocks (a bool mask) needs to produce
    every block in `wanted`: each missing block, and recursively its missing parents, once."""
    done: set[int] = set()
    stack = [int(b) for b in wanted if not kept[b]]
    done.update(stack)
    while stack:
        block = stack.pop()
        for parent in parents[block]:
            p = int(parent)
            if p >= 0 and not kept[p] and p not in done:
                done.add(p)
                stack.append(p)
    return len(done)


def probe_blocks(parents: np.ndarray, indices: Iterable[int]) -> list[int]:
    """Every block an answer to these probes reveals: each probed block and its parents."""
    out = []
    for index in indices:
        out.append(int(index))
        out.extend(int(p) for p in parents[index] if p >= 0)
    return out


def drop_least_referenced(parents: np.ndarray, params: FillParams, share: float,
                          seed: int = 0) -> np.ndarray:
    """The cheapest dropping strategy we know: drop the blocks other blocks cite least,
    never two neighbours of a lane (so a dropped block's previous block is at hand). Returns the
    kept mask with `share` of the blocks dropped."""
    rng = np.random.default_rng(seed)
    cited = np.bincount(parents[parents >= 0].ravel(), minlength=params.blocks)
    order = np.argsort(cited + rng.random(params.blocks) * 0.5, kind="stable")
    dropped = np.zeros(params.blocks, dtype=bool)
    target = int(share * params.blocks)
    count = 0
    for block in order:
        if count >= target:
            break
        before, after = block - params.lanes, block + params.lanes
        if (before >= 0 and dropped[before]) or (after < params.blocks and dropped[after]):
            continue
        dropped[block] = True
        count += 1
    for block in order:  # isolation ran out: drop the least cited of the rest
        if count >= target:
            break
        if not dropped[block]:
            dropped[block] = True
            count += 1
    return ~dropped


def answer_from(fill: np.ndarray, tree: MerkleTree, params: FillParams,
                indices: Iterable[int]) -> tuple[ProbeAnswer, ...]:
    """Probe answers read off a whole fill held in memory (the honest reference)."""
    def opening(i: int) -> BlockOpening:
        return BlockOpening(i, bytes(fill[i]), tuple(tree.proof(i)))

    answers = []
    for index in indices:
        prev = bytes(fill[index - params.lanes]) if index >= params.lanes else bytes(BLOCK_BYTES)
        wanted = parent_indices(params, index, prev) if index >= params.lanes else []
        answers.append(ProbeAnswer(opening(index), tuple(opening(p) for p in wanted)))
    return tuple(answers)
