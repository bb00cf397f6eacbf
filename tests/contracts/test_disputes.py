"""Job disputes: escalation of an answered job challenge, the stake-weighted committee vote and
each verdict's payouts and slashes, on anvil with the real Staking and JobEscrow."""

import brownie
from conftest import job_of, job_view
import pytest
from brownie import chain
from protocol.enums import ChallengeStatus, JobStatus, Verdict
from conftest import (
    BOND_FEE_BPS,
    ESCALATION_WINDOW,
    FALSE_CLAIM_SLASH,
    JOB_PRICE,
    MIN_BOND,
    MIN_PROVIDER_STAKE,
    MIN_VERIFIER_STAKE,
    MIN_VOTER_STAKE,
    PROVIDER_SLASH,
    VOTE_WINDOW,
)

import proofs_support as ref

BOND = MIN_BOND


@pytest.fixture
def answered(escrow, challenge_manager, committed_job, staked_verifier, provider):
    """A job challenge by the staked verifier, answered honestly by the provider."""
    job_id, commitment = committed_job
    cid = challenge_manager.challengeJob(job_of(escrow, job_id), 4, {"from": staked_verifier, "value": BOND}).events[
        "JobChallenged"
    ]["challengeId"]
    leaves, proofs = ref.answer(challenge_manager, cid, commitment)
    challenge_manager.respond(cid, leaves, proofs, {"from": provider})
    return job_id, cid


@pytest.fixture
def escalated(challenge_manager, answered, staked_verifier):
    job_id, cid = answered
    dispute_id = challenge_manager.escalate(cid, {"from": staked_verifier}).events["ChallengeEscalated"]["disputeId"]
    return job_id, cid, dispute_id


def _vote_and_resolve(committee, dispute_id, votes, voters, caller):
    for voter, at_fault in zip(voters, votes):
        committee.vote(dispute_id, at_fault, {"from": voter})
    chain.sleep(VOTE_WINDOW + 1)
    return committee.resolve(dispute_id, {"from": caller})


def test_escalation_opens_committee_dispute_and_keeps_escrow_frozen(
    challenge_manager, dispute_committee, escrow, escalated, staked_verifier, provider
):
    job_id, cid, dispute_id = escalated
    c = challenge_manager.challenge(cid)
    assert c["status"] == ChallengeStatus.ESCALATED and c["disputeId"] == dispute_id
    d = dispute_committee.dispute(dispute_id)
    assert (d["opener"], d["ref"], d["challenger"], d["provider"]) == (challenge_manager, cid, staked_verifier, provider)
    assert job_view(escrow, job_id)["frozen"]


def test_committee_finds_provider_at_fault(
    challenge_manager, dispute_committee, escrow, staking, escalated, voters, staked_verifier, renter, provider,
    stranger,
):
    job_id, cid, dispute_id = escalated
    tx = _vote_and_resolve(dispute_committee, dispute_id, [True, True, False], voters, stranger)
    assert tx.events["DisputeResolved"]["verdict"] == Verdict.PROVIDER_AT_FAULT
    assert challenge_manager.challenge(cid)["status"] == ChallengeStatus.PROVIDER_FAULTED
    assert staking.stakeOf(provider) == MIN_PROVIDER_STAKE - PROVIDER_SLASH
    assert job_view(escrow, job_id)["status"] == JobStatus.REFUNDED
    assert escrow.owedTo(brownie.ZERO_ADDRESS, renter) == JOB_PRICE
    assert challenge_manager.owedTo(staked_verifier) == BOND
    assert staking.stakeOf(staked_verifier) == MIN_VERIFIER_STAKE


def test_committee_finds_challenger_wrong(
    challenge_manager, dispute_committee, escrow, staking, escalated, voters, staked_verifier, provider, treasury,
    stranger,
):
    job_id, cid, dispute_id = escalated
    tx = _vote_and_resolve(dispute_committee, dispute_id, [False, False, True], voters, stranger)
    assert tx.events["DisputeResolved"]["verdict"] == Verdict.CHALLENGER_WRONG
    assert challenge_manager.challenge(cid)["status"] == ChallengeStatus.CHALLENGER_FAULTED
    fee = BOND * BOND_FEE_BPS // 10_000
    assert challenge_manager.owedTo(provider) == BOND - fee
    assert challenge_manager.owedTo(treasury) == fee
    assert challenge_manager.owedTo(staked_verifier) == 0
    assert staking.stakeOf(staked_verifier) == MIN_VERIFIER_STAKE - FALSE_CLAIM_SLASH
    assert staking.stakeOf(provider) == MIN_PROVIDER_STAKE
    assert not job_view(escrow, job_id)["frozen"]
    chain.sleep(24 * 3600)
    escrow.finalize(job_of(escrow, job_id), {"from": stranger})
    assert job_view(escrow, job_id)["status"] == JobStatus.FINALIZED  # the provider is paid


def test_no_quorum_returns_bond_and_slashes_nobody(
    challenge_manager, dispute_committee, escrow, staking, escalated, voters, staked_verifier, provider, stranger
):
    job_id, cid, dispute_id = escalated
    tx = _vote_and_resolve(dispute_committee, dispute_id, [True], voters[:1], stranger)
    assert tx.events["DisputeResolved"]["verdict"] == Verdict.NO_FAULT
    assert challenge_manager.challenge(cid)["status"] == ChallengeStatus.DISMISSED
    assert challenge_manager.owedTo(staked_verifier) == BOND
    assert staking.stakeOf(provider) == MIN_PROVIDER_STAKE
    assert staking.stakeOf(staked_verifier) == MIN_VERIFIER_STAKE
    assert not job_view(escrow, job_id)["frozen"]


def test_tie_finds_no_fault(challenge_manager, dispute_committee, escalated, voters, stranger):
    _, cid, dispute_id = escalated
    tx = _vote_and_resolve(dispute_committee, dispute_id, [True, False], voters[:2], stranger)
    assert tx.events["DisputeResolved"]["verdict"] == Verdict.NO_FAULT
    assert challenge_manager.challenge(cid)["status"] == ChallengeStatus.DISMISSED


def test_vote_weight_is_stake_at_vote_time(dispute_committee, staking, escalated, voters):
    _, _, dispute_id = escalated
    staking.stake({"from": voters[0], "value": MIN_VOTER_STAKE})
    tx = dispute_committee.vote(dispute_id, True, {"from": voters[0]})
    assert tx.events["Voted"]["weight"] == 2 * MIN_VOTER_STAKE
    staking.stake({"from": voters[0], "value": MIN_VOTER_STAKE})
    assert dispute_committee.dispute(dispute_id)["weightProviderAtFault"] == 2 * MIN_VOTER_STAKE


def test_parties_unstaked_accounts_and_double_votes_are_refused(
    dispute_committee, escalated, voters, staked_verifier, provider, stranger, custom_error
):
    _, _, dispute_id = escalated
    with brownie.reverts(custom_error("DisputeCommitteePartyCannotVote", dispute_id, staked_verifier)):
        dispute_committee.vote(dispute_id, False, {"from": staked_verifier})
    with brownie.reverts(custom_error("DisputeCommitteePartyCannotVote", dispute_id, provider)):
        dispute_committee.vote(dispute_id, False, {"from": provider})
    with brownie.reverts(custom_error("DisputeCommitteeVoterNotStaked", stranger, 0, MIN_VOTER_STAKE)):
        dispute_committee.vote(dispute_id, True, {"from": stranger})
    dispute_committee.vote(dispute_id, True, {"from": voters[0]})
    with brownie.reverts(custom_error("DisputeCommitteeAlreadyVoted", dispute_id, voters[0])):
        dispute_committee.vote(dispute_id, False, {"from": voters[0]})


def test_vote_after_window_and_resolve_before_end_or_twice_revert(
    dispute_committee, escalated, voters, stranger, custom_error
):
    _, _, dispute_id = escalated
    vote_end = dispute_committee.dispute(dispute_id)["voteEnd"]
    with brownie.reverts(custom_error("DisputeCommitteeVoteStillOpen", dispute_id, vote_end)):
        dispute_committee.resolve(dispute_id, {"from": stranger})
    chain.sleep(VOTE_WINDOW + 1)
    with brownie.reverts(custom_error("DisputeCommitteeVoteClosed", dispute_id, vote_end)):
        dispute_committee.vote(dispute_id, True, {"from": voters[0]})
    dispute_committee.resolve(dispute_id, {"from": stranger})
    with brownie.reverts(custom_error("DisputeCommitteeAlreadyResolved", dispute_id)):
        dispute_committee.resolve(dispute_id, {"from": stranger})


def test_only_opener_role_opens_and_only_committee_delivers_verdicts(
    challenge_manager, dispute_committee, escalated, stranger, custom_error
):
    _, cid, _ = escalated
    with brownie.reverts():
        dispute_committee.open(1, stranger, stranger, {"from": stranger})
    with brownie.reverts(custom_error("ChallengeNotCommittee", stranger)):
        challenge_manager.onDisputeResolved(cid, Verdict.PROVIDER_AT_FAULT, {"from": stranger})


def test_escalation_only_by_challenger_inside_window(
    challenge_manager, answered, staked_verifier, stranger, custom_error
):
    _, cid = answered
    with brownie.reverts(custom_error("ChallengeNotChallenger", cid, stranger)):
        challenge_manager.escalate(cid, {"from": stranger})
    window_end = challenge_manager.challenge(cid)["answeredAt"] + ESCALATION_WINDOW
    chain.sleep(ESCALATION_WINDOW + 1)
    with brownie.reverts(custom_error("ChallengeWindowClosed", cid, window_end)):
        challenge_manager.escalate(cid, {"from": staked_verifier})


def test_unanswered_challenge_cannot_be_escalated(
    escrow, challenge_manager, committed_job, renter, custom_error
):
    job_id, _ = committed_job
    cid = challenge_manager.challengeJob(job_of(escrow, job_id), 2, {"from": renter, "value": BOND}).events["JobChallenged"][
        "challengeId"
    ]
    with brownie.reverts(custom_error("ChallengeWrongStatus", cid, 1)):
        challenge_manager.escalate(cid, {"from": renter})


def test_escalated_challenge_cannot_be_settled_or_timed_out(
    challenge_manager, escalated, stranger, custom_error
):
    _, cid, _ = escalated
    chain.sleep(ESCALATION_WINDOW + 1)
    with brownie.reverts(custom_error("ChallengeWrongStatus", cid, ChallengeStatus.ESCALATED)):
        challenge_manager.settle(cid, {"from": stranger})
    with brownie.reverts(custom_error("ChallengeWrongStatus", cid, ChallengeStatus.ESCALATED)):
        challenge_manager.claimTimeout(cid, {"from": stranger})
