"""PoG residency (v1): a memory fill per claimed device, probed for every device at once.

The matmul rate cannot count devices: A, Bt and any element of C regenerate cheaply from the
seed, so one device can compute several devices' work one after the other. Memory can count
them when what is stored cannot be regenerated quickly. After the matmul roots, each claimed
device g builds a *fill* of N = lanes x steps blocks of 32 bytes in its own memory and commits a
Merkle root over it; then the verifier reveals fresh randomness and, for every device at once,
wants q blocks at indices derived from (randomness, fill root), each with its Merkle proof and
its parents (a spot check of the construction), before a deadline far below the time to
regenerate the part of a fill a prover could have dropped (docs/PROTOCOL.md, "PoG residency").

The fill (all blocks 32 bytes; index b = step * lanes + lane, step-major):
- fillKey = keccak256(abi.encodePacked(gpuSeed, uint8 2)) (A and B use 0 and 1).
- Step 0: block[lane] = keccak256(abi.encode(fillKey, uint256 lane)).
- Step i >= 1, lane l: prev = block[(i-1) L + l]; the index words s_0..s_15 are the 16
  little-endian uint32 of prev || keccak256(0x03 || prev); ref r (r < 15) is a block of an
  earlier step, biased towards recent ones like Argon2's: with E = i L (the blocks before step
  i), t = s_r >> 1, x = t^2 >> 31, ref_r = E - 1 - ((E x) >> 31). Then
  x_1 = keccak256(0x02 || prev || block[ref_0] || ... || block[ref_14]) (513 bytes),
  x_{k+1} = keccak256(0x02 || x_k), and the block is x_W (W = `iterations`).
Why so: the lanes run side by side (a GPU builds a step of 2^18 lanes in one batch, so the fill
takes `steps` sequential rounds, not N); the references cross lanes and are data-dependent,
so regenerating one block needs its whole ancestry (no lane can be recomputed on its own, as a
prefix of same-lane blocks could); 15 references make the graph dense enough that dropping a
quarter of a fill makes probed blocks cost a good part of the fill to recompute (measured by
tests/protocol/test_pog_residency.py's attacker); the recency bias leaves no rarely referenced
tail that could be dropped for free (uniform references did: late blocks are seldom cited);
W stretches the cost of a block so that regenerating what was dropped outlasts the deadline
at the class's fastest keccak rate. The tree is protocol.merkle's over the N blocks.

Limit (v1): a probe reads 544 blocks a device, which host RAM or NVMe serve within the deadline
as well as device memory does, so this binds fills stored within the deadline's reach, not
fills in device memory (docs/PROTOCOL.md, "Storage off the device": what a full-pass probe
would and would not close).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from protocol.errors import InvalidParameter, WrongBlock
from protocol.merkle import (
    MAX_PROOF_DEPTH,
    Hash32,
    MerkleTree,
    MessageHasher,
    hash_messages,
    keccak256,
    leaf_hash,
    verify_inclusion,
)
from protocol.pog.challenge import challenge_indices
from protocol.pog.profiles import GIB, GpuProfile

BLOCK_BYTES = 32
PARENTS = 16  # the previous block of the lane and 15 references
REFS = PARENTS - 1
FILL_DOMAIN = 2
BLOCK_PREFIX = b"\x02"
INDEX_PREFIX = b"\x03"
MAX_BLOCKS = 1 << MAX_PROOF_DEPTH
# keccak-f permutations per block: the 513-byte first message takes 4 (136-byte rate), the
# index hash 1, each further iteration 1; committing adds about 2 (leaf and node hashes).
PERMUTATIONS_FIRST = 4
PERMUTATIONS_COMMIT = 2

# --- How the verifier sizes a class's fill (docs/PROTOCOL.md has the arithmetic). ---
# Probes per device and round: a fill with a share e of blocks not built by the rule fails a
# round with probability 1 - (1 - e)^q (`detection_probability`).
PROBES = 32
# The probe's deadline, from revealing the randomness to the answers of every device: room
# for a round trip and ~1.3 MB of answers per device, far below regenerating a fill.
PROBE_DEADLINE_S = 0.5
# A prover that keeps less than 1 - SPACE_GAP of a fill must, to answer q = 32 probes (each
# block with its 16 parents), regenerate at least RECOMPUTE_SHARE of the fill's blocks. With the
# cheapest dropping strategy we found (drop the least cited blocks, never two neighbours of a
# lane; tests/support/residency.py) at N = 2^18, dropping 10% costs 0.02% of N, 20% 1.4-2.4%,
# 25% 7-8%, 30% 13-14%, half 42-46% (costs as a share of N hold from 2^16 to 2^18 from 25%
# up; at 20% they shrink with N). Below SPACE_GAP, dropped blocks are recomputed from stored
# parents cheaply: that much of a fill is not bound.
SPACE_GAP = 0.30
RECOMPUTE_SHARE = 0.08
# Regenerating RECOMPUTE_SHARE of a fill at the class's keccak ceiling takes REGEN_MARGIN x the
# deadline: W (iterations per block) is the smallest that makes it so.
REGEN_MARGIN = 2.0
# Left free on a device beside its fill: the CUDA context, the build's working tensors.
FILL_RESERVE_GIB = 2.0
# Lanes of a GPU class's fill: enough blocks per step to keep a GPU busy (262,144 hashes).
FILL_LANES = 1 << 18
# Fewest 32-bit instructions a keccak-f[1600] permutation takes on a GPU (24 rounds of ~190
# with 3-input logic ops and funnel shifts is ~4,600; 2,000 leaves a margin), at most one
# per fp32 lane and cycle: the class's keccak ceiling is fp32_tflops / 2 / this.
KECCAK_MIN_INSTRUCTIONS = 2000


@dataclass(frozen=True)
class FillParams:
    """A fill's shape, set by the verifier from the claimed class: `lanes` (a power of two)
    blocks per step, `steps` steps, `iterations` hashes per block (W)."""

    lanes: int
    steps: int
    iterations: int

    def __post_init__(self) -> None:
        for name in ("lanes", "steps", "iterations"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidParameter(name, value, "must be a positive integer")
        if self.lanes & (self.lanes - 1):
            raise InvalidParameter("lanes", self.lanes, "must be a power of two")
        if self.steps < 2:
            raise InvalidParameter("steps", self.steps, "must be at least 2")
        if self.blocks > MAX_BLOCKS:
            raise InvalidParameter("blocks", self.blocks, f"must be at most {MAX_BLOCKS}")

    @property
    def blocks(self) -> int:
        return self.lanes * self.steps

    @property
    def bytes(self) -> int:
        return self.blocks * BLOCK_BYTES

    @property
    def permutations_per_block(self) -> int:
        """keccak-f permutations to build one block (committing not included)."""
        return self.iterations + PERMUTATIONS_FIRST


@dataclass(frozen=True)
class BlockOpening:
    """One revealed block with its inclusion proof under the fill root."""

    index: int
    block: bytes
    siblings: tuple[bytes, ...]


@dataclass(frozen=True)
class ProbeAnswer:
    """A probed block and its parents (none for a lane's first block), each with its proof."""

    opening: BlockOpening
    parents: tuple[BlockOpening, ...]


def _bytes32(name: str, value: bytes) -> bytes:
    if not isinstance(value, (bytes, bytearray)) or len(value) != 32:
        raise InvalidParameter(name, value, "must be 32 bytes")
    return bytes(value)


def fill_key(gpu_seed: bytes) -> Hash32:
    """keccak256(abi.encodePacked(gpuSeed, uint8 2))."""
    return keccak256(_bytes32("gpu_seed", gpu_seed) + bytes([FILL_DOMAIN]))


def lane_starts(key: bytes, lanes: int) -> np.ndarray:
    """Step 0 of a fill: keccak256(abi.encode(fillKey, uint256 lane)) per lane, (lanes, 32)."""
    key = _bytes32("fill_key", key)
    raw = b"".join(keccak256(key + lane.to_bytes(32, "big")) for lane in range(lanes))
    return np.frombuffer(raw, dtype=np.uint8).reshape(lanes, BLOCK_BYTES).copy()


def ref_indices(prev: np.ndarray, step: int | np.ndarray, lanes: int,
                hasher: MessageHasher = hash_messages) -> np.ndarray:
    """The 15 referenced block indices of the blocks whose previous blocks are `prev`
    ((k, 32) uint8) at `step` (scalar or (k,)): (k, 15) int64."""
    prev = np.ascontiguousarray(prev, dtype=np.uint8).reshape(-1, BLOCK_BYTES)
    mixed = np.frombuffer(hasher(prev.tobytes(), BLOCK_BYTES, INDEX_PREFIX), dtype=np.uint8)
    words = np.concatenate([prev, mixed.reshape(-1, BLOCK_BYTES)], axis=1).view("<u4")
    t = (words[:, :REFS] >> 1).astype(np.uint64)
    x = (t * t) >> np.uint64(31)
    earlier = (np.asarray(step, dtype=np.uint64) * np.uint64(lanes)).reshape(-1, 1)
    back = (earlier * x) >> np.uint64(31)
    refs: np.ndarray = (earlier - np.uint64(1) - back).astype(np.int64)
    return refs


def blocks_from_parents(parents: np.ndarray, iterations: int,
                        hasher: MessageHasher = hash_messages) -> np.ndarray:
    """Blocks from their parents ((k, 16, 32) or (k, 512) uint8, the previous block first):
    (k, 32) uint8."""
    data = np.ascontiguousarray(parents, dtype=np.uint8).tobytes()
    out = hasher(data, PARENTS * BLOCK_BYTES, BLOCK_PREFIX)
    for _ in range(iterations - 1):
        out = hasher(out, BLOCK_BYTES, BLOCK_PREFIX)
    return np.frombuffer(out, dtype=np.uint8).reshape(-1, BLOCK_BYTES).copy()


def reference_fill(gpu_seed: bytes, params: FillParams,
                   hasher: MessageHasher = hash_messages) -> np.ndarray:
    """The whole fill as (N, 32) uint8, step by step in numpy: the slow, obvious reference
    (small N only; provers build it on their device)."""
    lanes = params.lanes
    fill = np.empty((params.steps, lanes, BLOCK_BYTES), dtype=np.uint8)
    fill[0] = lane_starts(fill_key(gpu_seed), lanes)
    flat = fill.reshape(-1, BLOCK_BYTES)
    for step in range(1, params.steps):
        prev = fill[step - 1]
        refs = ref_indices(prev, step, lanes, hasher)
        parents = np.concatenate([prev[:, None, :], flat[refs]], axis=1)
        fill[step] = blocks_from_parents(parents, params.iterations, hasher)
    return flat


def fill_tree(fill: np.ndarray, hasher: MessageHasher = hash_messages) -> MerkleTree:
    """The commitment over a fill's blocks (each block one leaf)."""
    data = np.ascontiguousarray(fill, dtype=np.uint8)
    if data.size == 0 or data.size % BLOCK_BYTES:
        raise InvalidParameter("fill", data.shape, "must be whole 32-byte blocks")
    return MerkleTree(hasher(data.tobytes(), BLOCK_BYTES, b"\x00"), hasher)


def parent_indices(params: FillParams, index: int, prev_block: bytes) -> list[int]:
    """The indices of block `index`'s parents, given its previous block (none at step 0)."""
    if not 0 <= index < params.blocks:
        raise InvalidParameter("index", index, f"must be below {params.blocks}")
    step = index // params.lanes
    if step == 0:
        return []
    prev = np.frombuffer(_bytes32("prev_block", prev_block), dtype=np.uint8)
    refs = ref_indices(prev, step, params.lanes)[0]
    return [index - params.lanes, *(int(r) for r in refs)]


def probe_indices(randomness: bytes, root: bytes, params: FillParams, q: int = PROBES) -> list[int]:
    """The q probed blocks: challenge_indices(R, fillRoot, N, q) (PROTOCOL.md's derivation)."""
    return challenge_indices(randomness, root, params.blocks, q)


def _verify_opening(opening: BlockOpening, count: int, root: bytes) -> None:
    if len(opening.block) != BLOCK_BYTES:
        raise WrongBlock(opening.index, f"{len(opening.block)} bytes, not {BLOCK_BYTES}")
    verify_inclusion(leaf_hash(opening.block), opening.index, count, opening.siblings, root)


def check_probe(gpu_seed: bytes, params: FillParams, root: bytes, index: int,
                answer: ProbeAnswer) -> None:
    """Raise unless `answer` opens block `index` of the fill under `root`, with the parents the
    rule names, each under `root` too, and the block is what the rule makes of them.

    Raises InvalidProof (a block is not in the committed tree where claimed), WrongBlock (wrong
    index, wrong parent, or a block not built by the rule)."""
    if answer.opening.index != index:
        raise WrongBlock(index, f"answered block {answer.opening.index} instead")
    _verify_opening(answer.opening, params.blocks, root)
    step, lane = divmod(index, params.lanes)
    if step == 0:
        if answer.parents:
            raise WrongBlock(index, "a lane's first block has no parents")
        if answer.opening.block != bytes(lane_starts(fill_key(gpu_seed), lane + 1)[lane]):
            raise WrongBlock(index, "not the lane's seed block")
        return
    if len(answer.parents) != PARENTS:
        raise WrongBlock(index, f"{len(answer.parents)} parents, the rule has {PARENTS}")
    wanted = parent_indices(params, index, answer.parents[0].block)
    for parent, want in zip(answer.parents, wanted):
        if parent.index != want:
            raise WrongBlock(index, f"parent {parent.index} is not the named {want}")
        _verify_opening(parent, params.blocks, root)
    parents = np.frombuffer(b"".join(p.block for p in answer.parents), dtype=np.uint8)
    if bytes(blocks_from_parents(parents, params.iterations)[0]) != answer.opening.block:
        raise WrongBlock(index, "not the hash of its parents")


def check_probes(gpu_seed: bytes, params: FillParams, root: bytes, indices: Sequence[int],
                 answers: Sequence[ProbeAnswer]) -> None:
    """`check_probe` for every probed index, in order; the first failure raises."""
    if len(answers) != len(indices):
        raise WrongBlock(-1, f"{len(answers)} answers for {len(indices)} probes")
    for index, answer in zip(indices, answers):
        check_probe(gpu_seed, params, root, index, answer)


def detection_probability(bad_share: float, q: int = PROBES) -> float:
    """Chance that q probes hit at least one of a fill's blocks not built by the rule."""
    return 1.0 - (1.0 - bad_share) ** q


# --- Sizing from the claimed class ---

def keccak_ceiling(profile: GpuProfile) -> float:
    """An upper bound on the class's keccak-f[1600] permutations per second (module comment)."""
    return profile.fp32_tflops * 1e12 / 2 / KECCAK_MIN_INSTRUCTIONS * (1.0 + profile.tolerance)


def fill_params_for(profile: GpuProfile) -> FillParams:
    """The fill the verifier assigns a device of `profile`: all of its usable memory but
    FILL_RESERVE_GIB, W large enough that regenerating RECOMPUTE_SHARE of it at the class's
    keccak ceiling takes REGEN_MARGIN deadlines."""
    if profile.is_cpu:
        raise InvalidParameter("profile", profile.name, "the CPU class has no residency fill")
    steps = min(int((profile.usable_gib - FILL_RESERVE_GIB) * GIB) // (BLOCK_BYTES * FILL_LANES),
                MAX_BLOCKS // FILL_LANES)  # 128 GiB at most: proofs stay within 32 levels
    blocks = steps * FILL_LANES
    needed = REGEN_MARGIN * PROBE_DEADLINE_S * keccak_ceiling(profile) / (RECOMPUTE_SHARE * blocks)
    return FillParams(FILL_LANES, steps, max(1, math.ceil(needed) - PERMUTATIONS_FIRST))


def regeneration_s(profile: GpuProfile, params: FillParams, share: float) -> float:
    """Seconds a device of `profile` at its keccak ceiling takes to rebuild `share` of a fill."""
    return share * params.blocks * params.permutations_per_block / keccak_ceiling(profile)


def build_s(params: FillParams, permutations_per_s: float) -> float:
    """Seconds to build and commit a fill at a given keccak rate."""
    per_block = params.permutations_per_block + PERMUTATIONS_COMMIT
    return params.blocks * per_block / permutations_per_s


def resident_share(profile: GpuProfile, params: FillParams) -> float:
    """The fill's share of a device's whole memory (the nominal size, all an attacker has)."""
    return params.bytes / (profile.memory_gib * GIB)


def fills_held(profile: GpuProfile, params: FillParams, devices: int) -> int:
    """The most fills `devices` devices of `profile` can keep answerable: each needs more than
    1 - SPACE_GAP of its blocks resident."""
    return math.floor(devices * profile.memory_gib * GIB / (params.bytes * (1.0 - SPACE_GAP)))
