"""ChallengeManager on anvil with the real Staking, registry, JobEscrow and ProofOfGpu:
PoG and job challenges, answers, timeouts, settlement and pull payments."""

import brownie
from conftest import job_of, job_view
import pytest
from brownie import chain
from brownie.test import strategy
from protocol.enums import ChallengeStatus, JobStatus
from conftest import (
    BOND_FEE_BPS,
    ESCALATION_WINDOW,
    FRAUD_WINDOW,
    JOB_PRICE,
    MIN_BOND,
    MIN_PROVIDER_STAKE,
    MIN_VERIFIER_STAKE,
    PROVIDER_SLASH,
    RESPONSE_WINDOW,
    SLASH_REWARD_BPS,
    mine_blocks,
)
from eth_abi import encode
from eth_utils import keccak

import proofs_support as ref

BOND = MIN_BOND


@pytest.fixture(scope="module")
def pog_round(active_provider, staked_verifier, proof_of_gpu, challenge_manager):
    """A committed PoG round of the 4-GPU provider with honest roots (n=64)."""
    return ref.commit_honest_round(proof_of_gpu, active_provider, staked_verifier)


@pytest.fixture(scope="module")
def job(committed_job, challenge_manager):
    return committed_job


def _challenge_pog(cm, round_id, gpu, verifier, k=32, bond=BOND):
    return cm.challengePog(round_id, gpu, k, {"from": verifier, "value": bond}).events["PogChallenged"]["challengeId"]


def _respond(cm, cid, commitment, provider):
    leaves, proofs = ref.answer(cm, cid, commitment)
    return cm.respond(cid, leaves, proofs, {"from": provider})


def test_pog_challenge_records_root_and_leaf_count(challenge_manager, pog_round, staked_verifier, provider):
    round_id, commitments = pog_round
    tx = challenge_manager.challengePog(round_id, 1, 40, {"from": staked_verifier, "value": BOND})
    c = challenge_manager.challenge(tx.events["PogChallenged"]["challengeId"])
    assert (c["challenger"], c["provider"], c["k"], c["gpuIndex"], c["subject"]) == (
        staked_verifier, provider, 40, 1, round_id
    )
    assert bytes(c["root"]) == commitments[1].root and c["leafCount"] == 64 * 64 // 64
    assert c["bond"] == BOND and c["status"] == ChallengeStatus.OPEN and c["anchorBlock"] == tx.block_number
    assert c["responseDeadline"] == chain[tx.block_number].timestamp + RESPONSE_WINDOW


def test_challenge_indices_follow_protocol(challenge_manager, pog_round, staked_verifier):
    round_id, commitments = pog_round
    tx = challenge_manager.challengePog(round_id, 0, 32, {"from": staked_verifier, "value": BOND})
    cid = tx.events["PogChallenged"]["challengeId"]
    # R = keccak256(abi.encode(blockhash(anchorBlock - 1), challengeId)), stored at the opening.
    anchor = challenge_manager.challenge(cid)["anchorBlock"]
    assert anchor == tx.block_number
    randomness = keccak(encode(["bytes32", "uint256"], [bytes(chain[anchor - 1].hash), cid]))
    assert bytes(tx.events["ChallengeRandomnessFixed"]["randomness"]) == randomness
    expected = ref.challenge_indices(randomness, commitments[0].root, 32, 64)
    assert list(challenge_manager.challengeIndices(cid)) == expected


@pytest.mark.parametrize("k", [0, 31, 65])
def test_pog_challenge_rejects_k_outside_32_to_64(challenge_manager, pog_round, staked_verifier, custom_error, k):
    with brownie.reverts(custom_error("ChallengeBadK", k)):
        challenge_manager.challengePog(pog_round[0], 0, k, {"from": staked_verifier, "value": BOND})


def test_challenge_rejects_small_bond(challenge_manager, pog_round, staked_verifier, custom_error):
    with brownie.reverts(custom_error("ChallengeBondTooSmall", BOND - 1, MIN_BOND)):
        challenge_manager.challengePog(pog_round[0], 0, 32, {"from": staked_verifier, "value": BOND - 1})


def test_pog_challenge_rejects_after_root_challenge_period(
    challenge_manager, proof_of_gpu, pog_round, staked_verifier, custom_error
):
    chain.sleep(proof_of_gpu.rootChallengePeriod() + 1)
    chain.mine()
    with brownie.reverts(custom_error("ChallengeRoundNotChallengeable", pog_round[0])):
        challenge_manager.challengePog(pog_round[0], 0, 32, {"from": staked_verifier, "value": BOND})


def test_pog_challenge_rejects_uncommitted_round(
    challenge_manager, proof_of_gpu, active_provider, staked_verifier, custom_error
):
    round_id = ref.request_round(proof_of_gpu, active_provider, staked_verifier)
    with brownie.reverts(custom_error("ChallengeRoundNotChallengeable", round_id)):
        challenge_manager.challengePog(round_id, 0, 32, {"from": staked_verifier, "value": BOND})


def test_honest_answer_then_settle_pays_bond_minus_fee_to_provider(
    challenge_manager, pog_round, staked_verifier, provider, treasury, stranger, custom_error
):
    round_id, commitments = pog_round
    cid = _challenge_pog(challenge_manager, round_id, 2, staked_verifier, k=64)
    tx = _respond(challenge_manager, cid, commitments[2], provider)
    assert tx.events["ChallengeAnswered"]["challengeId"] == cid
    assert challenge_manager.challenge(cid)["status"] == ChallengeStatus.ANSWERED
    window_end = challenge_manager.challenge(cid)["answeredAt"] + FRAUD_WINDOW
    with brownie.reverts(custom_error("ChallengeWindowOpen", cid, window_end)):
        challenge_manager.settle(cid, {"from": stranger})
    chain.sleep(FRAUD_WINDOW + 1)
    challenge_manager.settle(cid, {"from": stranger})
    fee = BOND * BOND_FEE_BPS // 10_000
    assert challenge_manager.owedTo(provider) == BOND - fee
    assert challenge_manager.owedTo(treasury) == fee
    assert challenge_manager.owedTo(staked_verifier) == 0
    assert challenge_manager.challenge(cid)["status"] == ChallengeStatus.SETTLED
    balance = provider.balance()
    tx = challenge_manager.withdraw({"from": provider})
    assert provider.balance() == balance + BOND - fee - tx.gas_used * tx.gas_price
    with brownie.reverts(custom_error("ChallengeNothingOwed", provider)):
        challenge_manager.withdraw({"from": provider})


def test_pog_timeout_slashes_provider_and_returns_bond(
    challenge_manager, staking, pog_round, staked_verifier, provider, stranger, custom_error
):
    cid = _challenge_pog(challenge_manager, pog_round[0], 0, staked_verifier)
    deadline = challenge_manager.challenge(cid)["responseDeadline"]
    with brownie.reverts(custom_error("ChallengeDeadlineNotPassed", cid, deadline)):
        challenge_manager.claimTimeout(cid, {"from": stranger})
    chain.sleep(RESPONSE_WINDOW + 1)
    tx = challenge_manager.claimTimeout(cid, {"from": stranger})
    assert tx.events["ChallengeTimedOut"]["provider"] == provider
    assert tx.events["OffenderSlashed"]["slashed"] == PROVIDER_SLASH
    assert staking.stakeOf(provider) == MIN_PROVIDER_STAKE - PROVIDER_SLASH
    assert staking.owedTo(staked_verifier) == PROVIDER_SLASH * SLASH_REWARD_BPS // 10_000
    assert challenge_manager.owedTo(staked_verifier) == BOND
    assert challenge_manager.challenge(cid)["status"] == ChallengeStatus.PROVIDER_FAULTED


def test_job_challenge_freezes_escrow_and_honest_answer_unfreezes_it(
    challenge_manager, escrow, job, renter, provider, stranger
):
    job_id, commitment = job
    tx = challenge_manager.challengeJob(job_of(escrow, job_id), 5, {"from": renter, "value": BOND})
    cid = tx.events["JobChallenged"]["challengeId"]
    assert job_view(escrow, job_id)["frozen"]
    assert challenge_manager.activeJobChallenge(job_id) == cid
    _respond(challenge_manager, cid, commitment, provider)
    chain.sleep(ESCALATION_WINDOW + 1)
    challenge_manager.settle(cid, {"from": stranger})
    assert not job_view(escrow, job_id)["frozen"]
    assert challenge_manager.activeJobChallenge(job_id) == 0
    chain.sleep(24 * 3600)
    escrow.finalize(job_of(escrow, job_id), {"from": stranger})  # the provider gets paid after an unfounded challenge
    assert job_view(escrow, job_id)["status"] == JobStatus.FINALIZED


def test_job_timeout_refunds_renter_and_slashes_provider(
    challenge_manager, escrow, staking, job, renter, provider, stranger
):
    job_id, _ = job
    cid = challenge_manager.challengeJob(job_of(escrow, job_id), 3, {"from": renter, "value": BOND}).events["JobChallenged"][
        "challengeId"
    ]
    chain.sleep(RESPONSE_WINDOW + 1)
    challenge_manager.claimTimeout(cid, {"from": stranger})
    j = job_view(escrow, job_id)
    assert j["status"] == JobStatus.REFUNDED and not j["frozen"]
    assert escrow.owedTo(brownie.ZERO_ADDRESS, renter) == JOB_PRICE
    assert staking.stakeOf(provider) == MIN_PROVIDER_STAKE - PROVIDER_SLASH
    assert challenge_manager.owedTo(renter) == BOND


def test_job_challenge_by_renter_needs_no_stake_but_stranger_does(
    escrow, challenge_manager, job, renter, stranger, custom_error
):
    job_id, _ = job
    with brownie.reverts(custom_error("ChallengeNotStakedVerifier", stranger, 0, MIN_VERIFIER_STAKE)):
        challenge_manager.challengeJob(job_of(escrow, job_id), 3, {"from": stranger, "value": BOND})
    challenge_manager.challengeJob(job_of(escrow, job_id), 3, {"from": renter, "value": BOND})


def test_second_job_challenge_while_one_is_open_reverts(
    escrow, challenge_manager, job, renter, staked_verifier, custom_error
):
    job_id, _ = job
    cid = challenge_manager.challengeJob(job_of(escrow, job_id), 3, {"from": renter, "value": BOND}).events["JobChallenged"][
        "challengeId"
    ]
    with brownie.reverts(custom_error("ChallengeJobAlreadyChallenged", job_id, cid)):
        challenge_manager.challengeJob(job_of(escrow, job_id), 3, {"from": staked_verifier, "value": BOND})


def test_job_challenge_after_window_reverts(challenge_manager, escrow, job, renter, custom_error):
    job_id, _ = job
    chain.sleep(24 * 3600 + 1)
    chain.mine()
    with brownie.reverts(custom_error("ChallengeJobNotChallengeable", job_id)):
        challenge_manager.challengeJob(job_of(escrow, job_id), 3, {"from": renter, "value": BOND})


def test_provider_cannot_challenge_itself(escrow, challenge_manager, job, provider, staking, custom_error):
    job_id, _ = job
    with brownie.reverts(custom_error("ChallengeSelfChallenge", provider)):
        challenge_manager.challengeJob(job_of(escrow, job_id), 3, {"from": provider, "value": BOND})


def test_answer_with_wrong_leaf_count_or_size_reverts(
    escrow, challenge_manager, pog_round, job, renter, staked_verifier, provider, custom_error
):
    round_id, commitments = pog_round
    cid = _challenge_pog(challenge_manager, round_id, 0, staked_verifier)
    chain.mine()
    leaves, proofs = ref.answer(challenge_manager, cid, commitments[0])
    with brownie.reverts(custom_error("ChallengeWrongAnswerCount", cid, 31, 32, 32)):
        challenge_manager.respond(cid, leaves[:31], proofs, {"from": provider})
    with brownie.reverts(custom_error("ChallengeBadLeafLength", 0, 255, 256)):
        challenge_manager.respond(cid, [leaves[0][:255]] + leaves[1:], proofs, {"from": provider})
    job_id, commitment = job
    jid = challenge_manager.challengeJob(job_of(escrow, job_id), 2, {"from": renter, "value": BOND}).events["JobChallenged"][
        "challengeId"
    ]
    chain.mine()
    leaves, proofs = ref.answer(challenge_manager, jid, commitment)
    with brownie.reverts(custom_error("ChallengeBadLeafLength", 1, 33, 32)):
        challenge_manager.respond(jid, [leaves[0], leaves[1] + b"\x00"], proofs, {"from": provider})


def test_only_provider_answers(challenge_manager, pog_round, staked_verifier, stranger, custom_error):
    round_id, commitments = pog_round
    cid = _challenge_pog(challenge_manager, round_id, 0, staked_verifier)
    chain.mine()
    leaves, proofs = ref.answer(challenge_manager, cid, commitments[0])
    with brownie.reverts(custom_error("ChallengeNotProvider", cid, stranger)):
        challenge_manager.respond(cid, leaves, proofs, {"from": stranger})


def _mine_past_horizon(blocks: int = 300) -> None:
    """More than 256 blocks in one RPC call, as a fast chain makes inside a response window."""
    mine_blocks(blocks)


def test_silent_provider_is_slashed_however_late_after_the_anchor_expired(
    challenge_manager, staking, pog_round, staked_verifier, provider, stranger
):
    """The attack: stay silent and let nobody fix R for 256 blocks; the timeout used to be
    dismissed then. Silence must be slashed whatever the randomness."""
    cid = _challenge_pog(challenge_manager, pog_round[0], 0, staked_verifier)
    _mine_past_horizon()
    chain.sleep(RESPONSE_WINDOW + 1)
    _mine_past_horizon()  # and claimed late, long after the deadline
    tx = challenge_manager.claimTimeout(cid, {"from": stranger})
    assert tx.events["ChallengeClosed"]["status"] == ChallengeStatus.PROVIDER_FAULTED
    assert tx.events["OffenderSlashed"]["slashed"] == PROVIDER_SLASH
    assert staking.stakeOf(provider) == MIN_PROVIDER_STAKE - PROVIDER_SLASH
    assert challenge_manager.owedTo(staked_verifier) == BOND


def test_silent_provider_of_a_job_is_slashed_and_renter_refunded_after_the_anchor_expired(
    challenge_manager, escrow, staking, job, renter, provider, stranger
):
    job_id, _ = job
    cid = challenge_manager.challengeJob(job_of(escrow, job_id), 3, {"from": renter, "value": BOND}).events["JobChallenged"][
        "challengeId"
    ]
    _mine_past_horizon()
    chain.sleep(RESPONSE_WINDOW + 1)
    tx = challenge_manager.claimTimeout(cid, {"from": stranger})
    assert tx.events["ChallengeClosed"]["status"] == ChallengeStatus.PROVIDER_FAULTED
    assert job_view(escrow, job_id)["status"] == JobStatus.REFUNDED
    assert escrow.owedTo(brownie.ZERO_ADDRESS, renter) == JOB_PRICE
    assert staking.stakeOf(provider) == MIN_PROVIDER_STAKE - PROVIDER_SLASH


def test_honest_provider_answers_long_after_the_opening(
    challenge_manager, pog_round, staked_verifier, provider
):
    """R is stored at the opening: more than 256 blocks later the provider still answers it
    (nothing to re-anchor, so nothing the provider could re-draw)."""
    round_id, commitments = pog_round
    cid = _challenge_pog(challenge_manager, round_id, 1, staked_verifier)
    _mine_past_horizon()
    leaves, proofs = ref.answer(challenge_manager, cid, commitments[1])
    challenge_manager.respond(cid, leaves, proofs, {"from": provider})
    assert challenge_manager.challenge(cid)["status"] == ChallengeStatus.ANSWERED


def test_job_provider_answers_long_after_the_opening(escrow, challenge_manager, job, renter, provider):
    job_id, commitment = job
    cid = challenge_manager.challengeJob(job_of(escrow, job_id), 4, {"from": renter, "value": BOND}).events["JobChallenged"][
        "challengeId"
    ]
    _mine_past_horizon()
    leaves, proofs = ref.answer(challenge_manager, cid, commitment)
    challenge_manager.respond(cid, leaves, proofs, {"from": provider})
    assert challenge_manager.challenge(cid)["status"] == ChallengeStatus.ANSWERED


def test_gas_of_k32_pog_answer_at_depth_20(
    challenge_manager, proof_of_gpu, provider2, staked_verifier, register_provider
):
    """n = 8192 gives 2^20 chunks (depth 20); the committed tree repeats one chunk so proofs are
    cheap to build, while the contract does the full work of 32 proofs of 20 levels."""
    register_provider(provider2, gpus=1)
    round_id = ref.request_round(proof_of_gpu, provider2, staked_verifier, n=8192)
    tree = ref.UniformTree(bytes(range(256)), 20)
    proof_of_gpu.commitRoots(round_id, [tree.root], {"from": provider2})
    cid = _challenge_pog(challenge_manager, round_id, 0, staked_verifier, k=32)
    assert challenge_manager.challenge(cid)["leafCount"] == 2**20
    tx = _respond(challenge_manager, cid, tree, provider2)
    data = bytes.fromhex(tx.input[2:])
    tokens = data.count(0) + 4 * (len(data) - data.count(0))
    print(f"\nGAS PoG respond k=32, depth 20 (256-byte chunks): {tx.gas_used}; calldata {len(data)} bytes, "
          f"EIP-7623 floor 21000 + 10*{tokens} = {21000 + 10 * tokens}")
    assert challenge_manager.challenge(cid)["status"] == ChallengeStatus.ANSWERED


class ChallengeMachine:
    """Random challenge / answer / timeout / settle / withdraw sequences on honest PoG roots.
    After every step the manager's ETH balance equals the modelled pull balances plus the bonds of
    unresolved challenges, and its pull balances match the model; a root is slashed at most once
    and never beyond the provider's stake."""

    st_pick = strategy("uint256", max_value=2**16)
    st_k = strategy("uint256", min_value=32, max_value=64)
    st_seconds = strategy("uint256", min_value=1800, max_value=2 * 3600)
    MARGIN = 30  # seconds around a deadline where the next block's time cannot be predicted

    def __init__(cls, cm, staking, round_id, commitments, verifier, provider, treasury):
        cls.cm, cls.staking, cls.round_id, cls.commitments = cm, staking, round_id, commitments
        cls.verifier, cls.provider, cls.treasury = verifier, provider, treasury

    def setup(self):
        self.pending: dict[int, dict] = {}
        self.owed = {a.address: 0 for a in (self.verifier, self.provider, self.treasury)}
        self.faulted_gpus: set[int] = set()
        # Short examples need challenges at every stage: one answered, one open.
        self.rule_challenge(0, 32)
        self.rule_respond(0)
        self.rule_challenge(1, 32)

    def _pick(self, pick, status):
        ids = sorted(cid for cid, c in self.pending.items() if c["status"] == status)
        return ids[pick % len(ids)] if ids else None

    def rule_challenge(self, st_pick, st_k):
        gpu = st_pick % 4
        if gpu in self.faulted_gpus:
            return
        tx = self.cm.challengePog(self.round_id, gpu, st_k, {"from": self.verifier, "value": BOND})
        cid = tx.events["PogChallenged"]["challengeId"]
        self.pending[cid] = {"status": ChallengeStatus.OPEN, "gpu": gpu,
                             "deadline": tx.events["PogChallenged"]["responseDeadline"]}

    def rule_respond(self, st_pick):
        cid = self._pick(st_pick, ChallengeStatus.OPEN)
        if cid is None or chain.time() > self.pending[cid]["deadline"] - self.MARGIN:
            return
        leaves, proofs = ref.answer(self.cm, cid, self.commitments[self.pending[cid]["gpu"]])
        tx = self.cm.respond(cid, leaves, proofs, {"from": self.provider})
        self.pending[cid].update(status=ChallengeStatus.ANSWERED,
                                 window_end=chain[tx.block_number].timestamp + FRAUD_WINDOW)

    def rule_claim_timeout(self, st_pick):
        cid = self._pick(st_pick, ChallengeStatus.OPEN)
        if cid is None or chain.time() < self.pending[cid]["deadline"] + self.MARGIN:
            return
        chain.mine()
        gpu = self.pending.pop(cid)["gpu"]
        tx = self.cm.claimTimeout(cid, {"from": self.treasury})
        assert ("OffenderSlashed" in tx.events) == (gpu not in self.faulted_gpus)
        self.faulted_gpus.add(gpu)
        self.owed[self.verifier.address] += BOND

    def rule_settle(self, st_pick):
        cid = self._pick(st_pick, ChallengeStatus.ANSWERED)
        if cid is None or chain.time() < self.pending[cid]["window_end"] + self.MARGIN:
            return
        self.pending.pop(cid)
        self.cm.settle(cid, {"from": self.treasury})
        fee = BOND * BOND_FEE_BPS // 10_000
        self.owed[self.provider.address] += BOND - fee
        self.owed[self.treasury.address] += fee

    def rule_withdraw(self, st_pick):
        account = (self.verifier, self.provider, self.treasury)[st_pick % 3]
        owed = self.owed[account.address]
        if owed == 0:
            with brownie.reverts():
                self.cm.withdraw({"from": account})
            return
        tx = self.cm.withdraw({"from": account})
        assert tx.events["Withdrawn"]["amount"] == owed
        self.owed[account.address] = 0

    def rule_sleep(self, st_seconds):
        chain.sleep(st_seconds)

    def invariant_balance_is_owed_plus_open_bonds(self):
        assert self.cm.balance() == sum(self.owed.values()) + BOND * len(self.pending)
        for address, owed in self.owed.items():
            assert self.cm.owedTo(address) == owed
        assert self.staking.stakeOf(self.provider) == MIN_PROVIDER_STAKE - (
            PROVIDER_SLASH if self.faulted_gpus else 0
        )


def test_manager_balance_always_equals_owed_plus_open_bonds(
    chain_state_machine, challenge_manager, staking, pog_round, staked_verifier, provider, treasury
):
    round_id, commitments = pog_round
    chain_state_machine(
        ChallengeMachine, challenge_manager, staking, round_id, commitments, staked_verifier, provider, treasury,
        settings={"max_examples": 12, "stateful_step_count": 12, "deadline": None},
    )
