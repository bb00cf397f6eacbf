"""Every attack the proof contracts defend against, performed on anvil against the deployed set:
forged inclusion proofs, replays, late answers, wrong PoG elements (caught by proveFraud), false
fraud claims, unstaked challengers, double slashing and a verifier's false claim in a dispute."""

import brownie
from conftest import job_of, job_view
import pytest
from brownie import ProofLibrariesHarness, chain
from protocol.enums import ChallengeStatus
from conftest import (
    BOND_FEE_BPS,
    FALSE_CLAIM_SLASH,
    FRAUD_WINDOW,
    MIN_BOND,
    MIN_PROVIDER_STAKE,
    MIN_VERIFIER_STAKE,
    PROVIDER_SLASH,
    RESPONSE_WINDOW,
    SLASH_REWARD_BPS,
    VOTE_WINDOW,
)

import proofs_support as ref

BOND = MIN_BOND


@pytest.fixture(scope="module")
def pog_round(active_provider, staked_verifier, proof_of_gpu, challenge_manager):
    return ref.commit_honest_round(proof_of_gpu, active_provider, staked_verifier)


def _challenge_pog(cm, round_id, gpu, challenger, k=32):
    return cm.challengePog(round_id, gpu, k, {"from": challenger, "value": BOND}).events["PogChallenged"][
        "challengeId"
    ]


def _challenge_job(escrow, cm, job_id, challenger, k=4):
    return cm.challengeJob(job_of(escrow, job_id), k, {"from": challenger, "value": BOND}).events["JobChallenged"]["challengeId"]


def _cheating_round(proof_of_gpu, provider, verifier):
    """A round whose provider commits, for GPU 0, the product of another seed (work done for an
    earlier round, reused) and honest roots for the other GPUs."""
    round_id = ref.request_round(proof_of_gpu, provider, verifier)
    seeds = [bytes(proof_of_gpu.gpuSeedOf(round_id, g)) for g in range(4)]
    stale = ref.honest_pog_commitment(bytes.fromhex("77" * 32), 64)
    commitments = [stale] + [ref.honest_pog_commitment(s, 64) for s in seeds[1:]]
    proof_of_gpu.commitRoots(round_id, [c.root for c in commitments], {"from": provider})
    return round_id, commitments


def test_proof_for_another_index_is_rejected(challenge_manager, pog_round, staked_verifier, provider, custom_error):
    round_id, commitments = pog_round
    cid = _challenge_pog(challenge_manager, round_id, 0, staked_verifier)
    leaves, proofs = ref.answer(challenge_manager, cid, commitments[0])
    indices = ref.indices_of(challenge_manager, cid)
    other = (indices[0] + 1) % 64
    leaves[0], proofs[0] = commitments[0].leaves[other], commitments[0].tree.siblings(other)
    with brownie.reverts(custom_error("ChallengeInvalidProof", 0, indices[0])):
        challenge_manager.respond(cid, leaves, proofs, {"from": provider})


def test_internal_node_presented_as_leaf_is_rejected(
    escrow, challenge_manager, committed_job, renter, provider, custom_error
):
    job_id, commitment = committed_job
    cid = _challenge_job(escrow, challenge_manager, job_id, renter, k=1)
    leaves, proofs = ref.answer(challenge_manager, cid, commitment)
    index = ref.indices_of(challenge_manager, cid)[0]
    # The level-1 node above the challenged leaf, with the rest of its path, posed as a 32-byte leaf.
    pair = index - index % 2
    node = ref.node_hash(commitment.tree.leaf_hash(pair), commitment.tree.leaf_hash(pair + 1))
    with brownie.reverts(custom_error("ChallengeInvalidProof", 0, index)):
        challenge_manager.respond(cid, [node], [proofs[0][1:]], {"from": provider})


def test_internal_node_preimage_as_64_byte_leaf_fails_library_verification():
    """OpenZeppelin's forged 64-byte leaf: left || right of a node, claimed as leaf data at the
    node's position, must not verify because leaves are hashed with 0x00 and nodes with 0x01."""
    harness = ProofLibrariesHarness.deploy({"from": brownie.accounts[0]})
    tree = ref.merkle_tree([bytes([i]) * 32 for i in range(8)])
    forged = tree.leaf_hash(2) + tree.leaf_hash(3)
    parent_path = tree.siblings(2)[1:]  # the path of node (2,3) as if it were leaf 1 of 4
    node = ref.node_hash(tree.leaf_hash(2), tree.leaf_hash(3))
    for index in range(8):
        assert not harness.verify(parent_path, tree.root, ref.leaf_hash(forged), index, 8)
        assert not harness.verify(tree.siblings(2), tree.root, ref.leaf_hash(forged), index, 8)
        # Even the node value itself, posed as a leaf hash, fits no index of the real tree size.
        assert not harness.verify(parent_path, tree.root, node, index, 8)


def test_replayed_answer_is_rejected(challenge_manager, pog_round, staked_verifier, provider, custom_error):
    round_id, commitments = pog_round
    cid = _challenge_pog(challenge_manager, round_id, 0, staked_verifier)
    leaves, proofs = ref.answer(challenge_manager, cid, commitments[0])
    challenge_manager.respond(cid, leaves, proofs, {"from": provider})
    with brownie.reverts(custom_error("ChallengeWrongStatus", cid, ChallengeStatus.ANSWERED)):
        challenge_manager.respond(cid, leaves, proofs, {"from": provider})
    # The same answer for a new challenge of the same root: other indices, so it fails.
    second = _challenge_pog(challenge_manager, round_id, 0, staked_verifier)
    ref.wait_for_randomness(challenge_manager, second)
    with brownie.reverts():
        challenge_manager.respond(second, leaves, proofs, {"from": provider})


def test_answer_after_deadline_is_rejected_and_provider_slashed(
    challenge_manager, staking, pog_round, staked_verifier, provider, stranger, custom_error
):
    round_id, commitments = pog_round
    cid = _challenge_pog(challenge_manager, round_id, 3, staked_verifier)
    leaves, proofs = ref.answer(challenge_manager, cid, commitments[3])
    deadline = challenge_manager.challenge(cid)["responseDeadline"]
    chain.sleep(RESPONSE_WINDOW + 1)
    with brownie.reverts(custom_error("ChallengeDeadlinePassed", cid, deadline)):
        challenge_manager.respond(cid, leaves, proofs, {"from": provider})
    challenge_manager.claimTimeout(cid, {"from": stranger})
    assert staking.stakeOf(provider) == MIN_PROVIDER_STAKE - PROVIDER_SLASH


def test_wrong_element_is_caught_by_prove_fraud(
    challenge_manager, proof_of_gpu, staking, active_provider, staked_verifier, stranger
):
    round_id, commitments = _cheating_round(proof_of_gpu, active_provider, staked_verifier)
    cid = _challenge_pog(challenge_manager, round_id, 0, staked_verifier)
    leaves, proofs = ref.answer(challenge_manager, cid, commitments[0])
    challenge_manager.respond(cid, leaves, proofs, {"from": active_provider})  # inclusion holds: it is its root
    # Any verifier re-derives an element of an answered chunk and finds it wrong.
    index = challenge_manager.challengeIndices(cid)[0]
    seed = bytes(proof_of_gpu.gpuSeedOf(round_id, 0))
    flat = ref.product(seed, 64).reshape(-1).tolist()
    offset = next(e for e in range(64) if ref.element_of_chunk(leaves[0], e) != flat[index * 64 + e])
    tx = challenge_manager.proveFraud(cid, index, leaves[0], proofs[0], offset, {"from": stranger})
    event = tx.events["FraudProven"]
    assert event["expected"] == flat[index * 64 + offset]
    assert event["claimed"] == ref.element_of_chunk(leaves[0], offset)
    assert challenge_manager.challenge(cid)["status"] == ChallengeStatus.PROVIDER_FAULTED
    assert staking.stakeOf(active_provider) == MIN_PROVIDER_STAKE - PROVIDER_SLASH
    assert staking.owedTo(stranger) == PROVIDER_SLASH * SLASH_REWARD_BPS // 10_000
    assert challenge_manager.owedTo(staked_verifier) == BOND


def test_single_flipped_element_anywhere_under_the_root_is_caught(
    challenge_manager, proof_of_gpu, staking, active_provider, staked_verifier, stranger
):
    round_id = ref.request_round(proof_of_gpu, active_provider, staked_verifier)
    honest = [ref.honest_pog_commitment(bytes(proof_of_gpu.gpuSeedOf(round_id, g)), 64) for g in range(4)]
    leaves = list(honest[1].leaves)
    leaves[41] = ref.with_element(leaves[41], 17, ref.element_of_chunk(leaves[41], 17) + 1)
    forged = ref.commit(leaves)
    proof_of_gpu.commitRoots(round_id, [honest[0].root, forged.root] + [c.root for c in honest[2:]],
                             {"from": active_provider})
    cid = _challenge_pog(challenge_manager, round_id, 1, staked_verifier)
    answer_leaves, proofs = ref.answer(challenge_manager, cid, forged)
    challenge_manager.respond(cid, answer_leaves, proofs, {"from": active_provider})
    challenge_manager.proveFraud(cid, 41, leaves[41], forged.tree.siblings(41), 17, {"from": stranger})
    assert challenge_manager.challenge(cid)["status"] == ChallengeStatus.PROVIDER_FAULTED
    assert staking.stakeOf(active_provider) == MIN_PROVIDER_STAKE - PROVIDER_SLASH


def test_prove_fraud_reverts_on_a_correct_element(
    challenge_manager, pog_round, staked_verifier, provider, stranger, custom_error
):
    round_id, commitments = pog_round
    cid = _challenge_pog(challenge_manager, round_id, 2, staked_verifier)
    leaves, proofs = ref.answer(challenge_manager, cid, commitments[2])
    challenge_manager.respond(cid, leaves, proofs, {"from": provider})
    index = challenge_manager.challengeIndices(cid)[5]
    value = ref.element_of_chunk(leaves[5], 63)
    with brownie.reverts(custom_error("ChallengeNoFraud", index, 63, value)):
        challenge_manager.proveFraud(cid, index, leaves[5], proofs[5], 63, {"from": stranger})


def test_prove_fraud_with_a_chunk_that_was_never_committed_reverts(
    challenge_manager, pog_round, staked_verifier, provider, stranger, custom_error
):
    """A lying verifier alters an honest chunk to frame the provider: inclusion fails."""
    round_id, commitments = pog_round
    cid = _challenge_pog(challenge_manager, round_id, 2, staked_verifier)
    leaves, proofs = ref.answer(challenge_manager, cid, commitments[2])
    challenge_manager.respond(cid, leaves, proofs, {"from": provider})
    index = challenge_manager.challengeIndices(cid)[0]
    framed = ref.with_element(leaves[0], 0, 12345)
    with brownie.reverts(custom_error("ChallengeInvalidProof", 0, index)):
        challenge_manager.proveFraud(cid, index, framed, proofs[0], 0, {"from": stranger})


def test_unstaked_and_understaked_challengers_are_refused(
    challenge_manager, staking, pog_round, stranger, custom_error
):
    with brownie.reverts(custom_error("ChallengeNotStakedVerifier", stranger, 0, MIN_VERIFIER_STAKE)):
        challenge_manager.challengePog(pog_round[0], 0, 32, {"from": stranger, "value": BOND})
    staking.stake({"from": stranger, "value": MIN_VERIFIER_STAKE - 1})
    with brownie.reverts(
        custom_error("ChallengeNotStakedVerifier", stranger, MIN_VERIFIER_STAKE - 1, MIN_VERIFIER_STAKE)
    ):
        challenge_manager.challengePog(pog_round[0], 0, 32, {"from": stranger, "value": BOND})


def test_timeout_cannot_be_claimed_twice(
    challenge_manager, staking, pog_round, staked_verifier, provider, stranger, custom_error
):
    cid = _challenge_pog(challenge_manager, pog_round[0], 0, staked_verifier)
    chain.sleep(RESPONSE_WINDOW + 1)
    chain.mine()
    challenge_manager.claimTimeout(cid, {"from": stranger})
    with brownie.reverts(custom_error("ChallengeWrongStatus", cid, ChallengeStatus.PROVIDER_FAULTED)):
        challenge_manager.claimTimeout(cid, {"from": stranger})
    assert staking.stakeOf(provider) == MIN_PROVIDER_STAKE - PROVIDER_SLASH
    assert challenge_manager.owedTo(staked_verifier) == BOND


def test_fraud_cannot_be_proven_after_settle(
    challenge_manager, proof_of_gpu, staking, active_provider, staked_verifier, stranger, custom_error
):
    round_id, commitments = _cheating_round(proof_of_gpu, active_provider, staked_verifier)
    cid = _challenge_pog(challenge_manager, round_id, 0, staked_verifier)
    leaves, proofs = ref.answer(challenge_manager, cid, commitments[0])
    challenge_manager.respond(cid, leaves, proofs, {"from": active_provider})
    chain.sleep(FRAUD_WINDOW + 1)
    challenge_manager.settle(cid, {"from": stranger})
    index = challenge_manager.challengeIndices(cid)[0]
    with brownie.reverts(custom_error("ChallengeWrongStatus", cid, ChallengeStatus.SETTLED)):
        challenge_manager.proveFraud(cid, index, leaves[0], proofs[0], 0, {"from": stranger})
    with brownie.reverts(custom_error("ChallengeWrongStatus", cid, ChallengeStatus.SETTLED)):
        challenge_manager.settle(cid, {"from": stranger})
    assert staking.stakeOf(active_provider) == MIN_PROVIDER_STAKE


def test_fraud_proven_twice_or_on_two_challenges_of_one_root_slashes_once(
    challenge_manager, proof_of_gpu, staking, active_provider, staked_verifier, stranger, custom_error
):
    round_id, commitments = _cheating_round(proof_of_gpu, active_provider, staked_verifier)
    first = _challenge_pog(challenge_manager, round_id, 0, staked_verifier)
    second = _challenge_pog(challenge_manager, round_id, 0, staked_verifier)
    seed = bytes(proof_of_gpu.gpuSeedOf(round_id, 0))
    flat = ref.product(seed, 64).reshape(-1).tolist()
    for cid in (first, second):
        leaves, proofs = ref.answer(challenge_manager, cid, commitments[0])
        challenge_manager.respond(cid, leaves, proofs, {"from": active_provider})
    leaves, proofs = ref.answer(challenge_manager, first, commitments[0])
    index = challenge_manager.challengeIndices(first)[0]
    offset = next(e for e in range(64) if ref.element_of_chunk(leaves[0], e) != flat[index * 64 + e])
    challenge_manager.proveFraud(first, index, leaves[0], proofs[0], offset, {"from": stranger})
    with brownie.reverts(custom_error("ChallengeWrongStatus", first, ChallengeStatus.PROVIDER_FAULTED)):
        challenge_manager.proveFraud(first, index, leaves[0], proofs[0], offset, {"from": stranger})
    # The same fault through the other open challenge: dismissed, bond back, no second slash.
    tx = challenge_manager.proveFraud(second, index, leaves[0], proofs[0], offset, {"from": stranger})
    assert challenge_manager.challenge(second)["status"] == ChallengeStatus.DISMISSED
    assert "OffenderSlashed" not in tx.events
    assert staking.stakeOf(active_provider) == MIN_PROVIDER_STAKE - PROVIDER_SLASH
    assert challenge_manager.owedTo(staked_verifier) == 2 * BOND
    with brownie.reverts(custom_error("ChallengeRootFaulted", round_id, 0)):
        challenge_manager.challengePog(round_id, 0, 32, {"from": staked_verifier, "value": BOND})


def test_verifier_false_claim_loses_bond_in_the_vote(
    challenge_manager, dispute_committee, staking, escrow, committed_job, staked_verifier, provider, voters,
    treasury, stranger, custom_error,
):
    """A verifier disputes an honest job result; the committee re-executes and disagrees."""
    job_id, commitment = committed_job
    cid = _challenge_job(escrow, challenge_manager, job_id, staked_verifier)
    leaves, proofs = ref.answer(challenge_manager, cid, commitment)
    challenge_manager.respond(cid, leaves, proofs, {"from": provider})
    dispute_id = challenge_manager.escalate(cid, {"from": staked_verifier}).events["ChallengeEscalated"][
        "disputeId"
    ]
    for voter in voters:
        dispute_committee.vote(dispute_id, False, {"from": voter})
    chain.sleep(VOTE_WINDOW + 1)
    dispute_committee.resolve(dispute_id, {"from": stranger})
    fee = BOND * BOND_FEE_BPS // 10_000
    assert challenge_manager.challenge(cid)["status"] == ChallengeStatus.CHALLENGER_FAULTED
    assert challenge_manager.owedTo(provider) == BOND - fee
    assert challenge_manager.owedTo(treasury) == fee
    assert challenge_manager.owedTo(staked_verifier) == 0
    assert staking.stakeOf(staked_verifier) == MIN_VERIFIER_STAKE - FALSE_CLAIM_SLASH
    assert staking.owedTo(provider) == FALSE_CLAIM_SLASH * SLASH_REWARD_BPS // 10_000
    assert not job_view(escrow, job_id)["frozen"]
    # The verdict is final: no second delivery, no timeout, no settle.
    with brownie.reverts():
        dispute_committee.resolve(dispute_id, {"from": stranger})
    with brownie.reverts(custom_error("ChallengeWrongStatus", cid, ChallengeStatus.CHALLENGER_FAULTED)):
        challenge_manager.settle(cid, {"from": stranger})


def test_gas_of_prove_fraud_at_n4096(
    challenge_manager, proof_of_gpu, provider2, staked_verifier, register_provider, stranger
):
    """A provider commits a depth-18 tree (n=4096) of one made-up chunk; the fraud proof
    recomputes one element (a dot product of length 4096) on-chain."""
    register_provider(provider2, gpus=1)
    round_id = ref.request_round(proof_of_gpu, provider2, staked_verifier, n=4096)
    chunk = b"".join((10**6 + i).to_bytes(4, "big", signed=True) for i in range(64))  # |C| <= 64n < 10^6
    tree = ref.UniformTree(chunk, 18)
    proof_of_gpu.commitRoots(round_id, [tree.root], {"from": provider2})
    cid = _challenge_pog(challenge_manager, round_id, 0, staked_verifier)
    leaves, proofs = ref.answer(challenge_manager, cid, tree)
    challenge_manager.respond(cid, leaves, proofs, {"from": provider2})
    index = challenge_manager.challengeIndices(cid)[0]
    tx = challenge_manager.proveFraud(cid, index, chunk, proofs[0], 63, {"from": stranger})
    print(f"\nGAS proveFraud n=4096 (depth 18 proof + one element): {tx.gas_used}")
    assert challenge_manager.challenge(cid)["status"] == ChallengeStatus.PROVIDER_FAULTED
