"""Residency fills (protocol/pog/residency.py): the rule, the spot checks, what dropping part of
a fill costs (in block hashes), the class sizing and the messages' strict parsing."""

from dataclasses import replace

import numpy as np
import pytest

from protocol.errors import InvalidParameter, InvalidProof, WrongBlock
from protocol.merkle import keccak256
from protocol.pog.messages import (
    FillRoot,
    GpuProbes,
    MalformedMessage,
    MessageTooLarge,
    RoundFills,
    RoundProbes,
    decode_fills,
    decode_probes,
    encode_fills,
    encode_probes,
)
from protocol.pog.profiles import GIB, PROFILES
from protocol.pog.residency import (
    FILL_RESERVE_GIB,
    MAX_BLOCKS,
    PARENTS,
    PROBE_DEADLINE_S,
    PROBES,
    RECOMPUTE_SHARE,
    REGEN_MARGIN,
    SPACE_GAP,
    FillParams,
    blocks_from_parents,
    check_probe,
    check_probes,
    detection_probability,
    fill_key,
    fill_params_for,
    fill_tree,
    fills_held,
    lane_starts,
    probe_indices,
    ref_indices,
    reference_fill,
    regeneration_s,
    resident_share,
)
from protocol.pog.workload import gpu_seed
from tests.support.residency import (
    answer_from,
    drop_least_referenced,
    parent_graph,
    probe_blocks,
    recompute_cost,
)

SEED = gpu_seed(keccak256(b"round"), 0, keccak256(b"GPU-0"))
SMALL = FillParams(lanes=16, steps=48, iterations=2)
GPUS = [p for p in PROFILES if not p.is_cpu]


@pytest.fixture(scope="module")
def small():
    fill = reference_fill(SEED, SMALL)
    return fill, fill_tree(fill)


@pytest.fixture(scope="module")
def large():
    """2^16 blocks: big enough for the dropping strategies to show how costs scale."""
    params = FillParams(lanes=256, steps=256, iterations=1)
    fill = reference_fill(SEED, params)
    return params, fill, parent_graph(fill, params)


def test_the_fill_follows_its_rule_and_is_bound_to_the_device_seed(small):
    fill, _ = small
    assert fill.shape == (SMALL.blocks, 32)
    assert (fill[:16] == lane_starts(fill_key(SEED), 16)).all()
    assert bytes(fill[0]) == keccak256(fill_key(SEED) + (0).to_bytes(32, "big"))
    # one block by hand: keccak256(0x02 || prev || 15 refs), then W - 1 more times
    index = 5 * 16 + 3
    prev = fill[index - 16]
    refs = ref_indices(prev, 5, 16)[0]
    x = keccak256(b"\x02" + bytes(prev) + b"".join(bytes(fill[r]) for r in refs))
    assert bytes(fill[index]) == keccak256(b"\x02" + x)
    other = reference_fill(gpu_seed(keccak256(b"round"), 1, keccak256(b"GPU-0")), SMALL)
    assert not (other == fill).all(axis=1).any()  # another device shares no block


def test_references_lie_in_earlier_steps_and_lean_to_recent_ones():
    rng = np.random.default_rng(1)
    prev = rng.integers(0, 256, (4096, 32), dtype=np.uint8)
    prev[0] = 0xFF  # the largest index words
    prev[1] = 0
    for step in (1, 2, 100, MAX_BLOCKS // 2**18 - 1):
        refs = ref_indices(prev, step, 2**18)
        assert refs.min() >= 0 and refs.max() < step * 2**18
    refs = ref_indices(prev, 1000, 64)
    back = 1000 * 64 - 1 - refs  # distance back: x^2 makes recent blocks likelier
    assert np.median(back) < 0.3 * 1000 * 64


def test_honest_answers_check_out(small):
    fill, tree = small
    indices = probe_indices(keccak256(b"R"), tree.root, SMALL) + [0, 15, 16]
    check_probes(SEED, SMALL, tree.root, indices, answer_from(fill, tree, SMALL, indices))


def test_forged_answers_are_refused_with_the_reason(small):
    fill, tree = small
    index = 20 * 16 + 7
    answer = answer_from(fill, tree, SMALL, [index])[0]
    other = bytes(fill[index + 1])

    def fails(bad, error, reason=None):
        with pytest.raises(error, match=reason):
            check_probe(SEED, SMALL, tree.root, index, bad)

    fails(replace(answer, opening=replace(answer.opening, block=other)), InvalidProof)
    swapped = (answer.parents[1], answer.parents[0], *answer.parents[2:])
    fails(replace(answer, parents=swapped), WrongBlock, "is not the named")
    fails(replace(answer, parents=answer.parents[:-1]), WrongBlock, "15 parents")
    fails(replace(answer, opening=replace(answer.opening, siblings=answer.opening.siblings[:-1])),
          InvalidProof)
    with pytest.raises(WrongBlock, match="answered block"):
        check_probe(SEED, SMALL, tree.root, index + 1, answer)
    first = answer_from(fill, tree, SMALL, [3])[0]
    fails_first = replace(first, parents=answer.parents)
    with pytest.raises(WrongBlock, match="no parents"):
        check_probe(SEED, SMALL, tree.root, 3, fails_first)
    with pytest.raises(WrongBlock, match="answers for"):
        check_probes(SEED, SMALL, tree.root, [index, 3], [answer])


def test_a_fill_not_built_by_the_rule_fails_spot_checks():
    # A cheaper fill: a share e of the blocks hash only their previous block (no gathers), the
    # rest follow the rule from there. Committed and answered as built, it is caught whenever a
    # probe lands on a cheap block: 1 - (1 - e)^q per round.
    params, share = FillParams(lanes=16, steps=64, iterations=1), 0.1
    fill = reference_fill(SEED, params)
    rng = np.random.default_rng(7)
    cheap = rng.random(params.blocks) < share
    cheap[:16] = False
    for step in range(1, params.steps):
        for lane in range(16):
            b = step * 16 + lane
            prev = fill[b - 16]
            if cheap[b]:
                fill[b] = np.frombuffer(keccak256(b"\x02" + bytes(prev)), dtype=np.uint8)
            else:
                parents = np.concatenate([prev[None], fill[ref_indices(prev, step, 16)[0]]])
                fill[b] = blocks_from_parents(parents[None], 1)[0]
    tree = fill_tree(fill)
    rounds, caught = 40, 0
    for r in range(rounds):
        indices = probe_indices(keccak256(b"R%d" % r), tree.root, params)
        try:
            check_probes(SEED, params, tree.root, indices, answer_from(fill, tree, params, indices))
        except WrongBlock as err:
            assert cheap[err.index] and "hash of its parents" in str(err)
            caught += 1
    expected = detection_probability(cheap.mean(), PROBES)
    assert expected > 0.95 and caught >= 0.85 * rounds


def test_detection_probability_for_q_probes():
    assert detection_probability(0.1, 32) == pytest.approx(1 - 0.9**32)  # 96.6%
    assert detection_probability(0.2, 32) > 0.999
    assert detection_probability(0.0, 32) == 0.0


def test_keeping_half_of_a_fill_or_less_costs_a_large_share_of_it_per_probe(large):
    # A device holding two fills of its class keeps at most about half of each. Answering the
    # 32 probes (each block and its 16 parents) then means recomputing a large part of the
    # dropped blocks: the cascade through 15 references per block reaches most of them.
    params, _, parents = large
    wanted = probe_blocks(parents, probe_indices(keccak256(b"R"), keccak256(b"root"), params))
    for k in (2, 3, 4):  # keeps 1/k: every k-th step whole, or the most cited blocks
        spaced = np.zeros(params.blocks, dtype=bool)
        for step in range(0, params.steps, k):
            spaced[step * params.lanes:(step + 1) * params.lanes] = True
        cited = drop_least_referenced(parents, params, 1 - 1 / k)
        for kept in (spaced, cited):
            assert recompute_cost(parents, kept, wanted) > 0.25 * params.blocks, k
    honest = np.ones(params.blocks, dtype=bool)
    assert recompute_cost(parents, honest, wanted) == 0


def test_the_space_gap_is_where_recomputing_turns_from_cheap_to_a_share_of_the_fill(large):
    # Documents SPACE_GAP and RECOMPUTE_SHARE: dropping a tenth of a fill (isolated, least
    # cited blocks) costs a few hashes per probe; dropping SPACE_GAP costs RECOMPUTE_SHARE.
    params, _, parents = large
    costs = {}
    for share in (0.1, SPACE_GAP):
        kept = drop_least_referenced(parents, params, share)
        costs[share] = [recompute_cost(parents, kept, probe_blocks(
            parents, probe_indices(keccak256(b"R%d" % r), keccak256(b"root"), params)))
            for r in range(3)]
    assert max(costs[0.1]) < 0.002 * params.blocks
    assert min(costs[SPACE_GAP]) > RECOMPUTE_SHARE * params.blocks


@pytest.mark.parametrize("profile", GPUS, ids=lambda p: p.name)
def test_every_class_gets_a_fill_one_device_cannot_hold_twice(profile):
    params = fill_params_for(profile)
    assert params.bytes <= (profile.usable_gib - FILL_RESERVE_GIB) * GIB
    assert params.blocks <= MAX_BLOCKS
    # Two fills kept beyond the space gap do not fit one device; one fits on its own.
    assert 2 * resident_share(profile, params) * (1 - SPACE_GAP) > 1
    assert fills_held(profile, params, 1) == 1
    # Regenerating what a prover may drop takes REGEN_MARGIN deadlines at the class's ceiling.
    assert regeneration_s(profile, params, RECOMPUTE_SHARE) >= REGEN_MARGIN * PROBE_DEADLINE_S
    assert regeneration_s(profile, replace(params, iterations=params.iterations - 1),
                          RECOMPUTE_SHARE) < REGEN_MARGIN * PROBE_DEADLINE_S or \
        params.iterations == 1


def test_fill_params_refuse_bad_shapes_and_the_cpu_class():
    for bad in ((3, 8, 1), (16, 1, 1), (16, 8, 0), (0, 8, 1), (2**20, 2**13, 1), (16, True, 1)):
        with pytest.raises(InvalidParameter):
            FillParams(*bad)
    with pytest.raises(InvalidParameter, match="CPU"):
        fill_params_for(next(p for p in PROFILES if p.is_cpu))


def test_fill_and_probe_messages_round_trip_and_refuse_bad_input(small):
    fill, tree = small
    fills = RoundFills(keccak256(b"s"), (FillRoot(0, 16, 48, 2, tree.root),))
    assert decode_fills(encode_fills(fills), 1) == fills
    indices = probe_indices(keccak256(b"R"), tree.root, SMALL)
    probes = RoundProbes(keccak256(b"s"), (GpuProbes(0, answer_from(fill, tree, SMALL, indices)),))
    raw = encode_probes(probes)
    assert decode_probes(raw, 1, PROBES) == probes
    with pytest.raises(MessageTooLarge):
        decode_probes(raw + b" " * len(raw) * 40, 1, PROBES)
    bad_shape = encode_fills(RoundFills(keccak256(b"s"), (FillRoot(0, 12, 48, 2, tree.root),)))
    with pytest.raises(MalformedMessage, match="power of two"):
        decode_fills(bad_shape, 1)
    with pytest.raises(MalformedMessage, match="'root'"):
        decode_fills(b'{"round_seed":"0x' + b"00" * 32 + b'","gpus":[{"gpu_index":0,'
                     b'"lanes":16,"steps":48,"iterations":2}]}', 1)
    too_many = raw.replace(b'"parents":[', b'"parents":[' + b'{"index":0},' * PARENTS, 1)
    with pytest.raises(MalformedMessage, match="'parents' has"):
        decode_probes(too_many, 1, PROBES)
    short_block = raw.replace(b'"block":"0x', b'"block":"0x00', 1)
    with pytest.raises(MalformedMessage, match="'block'"):
        decode_probes(short_block, 1, PROBES)
