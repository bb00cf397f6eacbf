"""The operator cannot take anyone's money: attacks by the deployer on a set deployed by the real
deploy script (unchained_cli.deploy.deploy_all), and the bounds every parameter is held to.

Before roles were granted once, the deployer kept DEFAULT_ADMIN_ROLE everywhere: it could grant
itself SLASHER_ROLE and slash any stake to the treasury, freeze any job through DISPUTE_ROLE, or
set an unbonding delay so large that now + delay overflowed and every stake was stuck.
"""

import brownie
from conftest import job_of
import pytest
from brownie import ZERO_ADDRESS, chain, web3
from eth_abi import encode
from eth_utils import keccak

from conftest import (
    BOND_FEE_BPS, DAY, ESCALATION_WINDOW, ETHER, FALSE_CLAIM_SLASH, FRAUD_WINDOW, MIN_BOND, MIN_VERIFIER_STAKE,
    MIN_VOTER_STAKE, PROVIDER_SLASH, QUORUM_WEIGHT, RESPONSE_WINDOW, UNBONDING_DELAY, WEEK,
)
from unchained_cli.deploy import DeployParams, Deployer, deploy_all

JOB_PRICE = ETHER // 100
ADMIN_ROLE = bytes(32)


@pytest.fixture(scope="module")
def deployed(admin, Staking, ProviderRegistry, JobEscrow, LeaseManager, ProofOfGpu, DisputeCommittee, ChallengeManager):
    """The contract set as `unchained deploy` leaves it, deployed by `admin` (the node's first
    account) with `admin` as the treasury: the operator at its most powerful."""
    deployment = deploy_all(Deployer.connect(web3.provider.endpoint_uri), DeployParams(with_test_stablecoin=False))
    assert deployment.deployer == admin.address
    containers = {"Staking": Staking, "ProviderRegistry": ProviderRegistry, "JobEscrow": JobEscrow,
                  "LeaseManager": LeaseManager, "ProofOfGpu": ProofOfGpu, "DisputeCommittee": DisputeCommittee,
                  "ChallengeManager": ChallengeManager}
    return {name: container.at(deployment.contract(name).address) for name, container in containers.items()}


@pytest.fixture(scope="module")
def victim(escrow, deployed, accounts, admin):
    """A registered provider with 2 ether staked and a job it committed."""
    staking, registry, escrow = deployed["Staking"], deployed["ProviderRegistry"], deployed["JobEscrow"]
    provider, renter = accounts[2], accounts[4]
    staking.stake({"from": provider, "value": 2 * ETHER})
    registry.register(b"H100-SXM".ljust(32, b"\0"), [keccak(text="victim-GPU-0")], 10**15, 10**12, "ipfs://v",
                      {"from": provider})
    job_id = escrow.createJob(provider, keccak(text="spec"), JOB_PRICE, chain.time() + 3600,
                              {"from": renter, "value": JOB_PRICE}).return_value
    escrow.commitResult(job_of(escrow, job_id), keccak(text="root"), 4, keccak(text="digest"), {"from": provider})
    return provider, job_id


def _raw_call(sender, contract, signature: str, types: list[str], args: list) -> None:
    """Calls a function by signature, whether or not the contract's ABI still has it."""
    sender.transfer(contract, 0, data="0x" + (keccak(text=signature)[:4] + encode(types, args)).hex())


def test_deployer_cannot_grant_itself_a_role_anywhere(deployed, admin, custom_error):
    for name, role in (("Staking", "SLASHER_ROLE"), ("Staking", "LOCKER_ROLE"), ("JobEscrow", "DISPUTE_ROLE"),
                       ("ProviderRegistry", "POG_ROLE"), ("DisputeCommittee", "OPENER_ROLE")):
        contract = deployed[name]
        assert contract.wired()
        assert not contract.hasRole(ADMIN_ROLE, admin)
        with brownie.reverts(custom_error("AccessControlUnauthorizedAccount", admin, ADMIN_ROLE)):
            contract.grantRole(getattr(contract, role)(), admin, {"from": admin})
        with brownie.reverts(custom_error("WiringAlreadyDone")):
            if name == "Staking":
                contract.wire([admin], [admin], [admin], {"from": admin})
            elif name == "ProviderRegistry":
                contract.wire([admin], admin, {"from": admin})
            else:
                contract.wire([admin], {"from": admin})
        assert not contract.hasRole(getattr(contract, role)(), admin)


def test_deployer_cannot_slash_a_stake_to_the_treasury(deployed, victim, admin, custom_error):
    staking = deployed["Staking"]
    provider, _ = victim
    with brownie.reverts(custom_error("AccessControlUnauthorizedAccount", admin, staking.SLASHER_ROLE())):
        staking.slash(provider, 2 * ETHER, admin, {"from": admin})
    assert staking.stakeOf(provider) == 2 * ETHER
    assert staking.owedTo(admin) == 0


def test_deployer_cannot_freeze_or_refund_a_job(deployed, victim, admin, custom_error):
    escrow = deployed["JobEscrow"]
    _, job_id = victim
    role = escrow.DISPUTE_ROLE()
    with brownie.reverts(custom_error("AccessControlUnauthorizedAccount", admin, role)):
        escrow.freeze(job_of(escrow, job_id), {"from": admin})
    with brownie.reverts(custom_error("AccessControlUnauthorizedAccount", admin, role)):
        escrow.resolveFreeze(job_id, True, {"from": admin})
    chain.sleep(escrow.challengeWindow())
    assert escrow.finalize(job_of(escrow, job_id), {"from": admin}).events["JobFinalized"]["jobId"] == job_id


def test_deployer_cannot_record_pog_results_or_open_disputes(deployed, victim, admin, custom_error):
    registry, committee = deployed["ProviderRegistry"], deployed["DisputeCommittee"]
    provider, _ = victim
    with brownie.reverts(custom_error("AccessControlUnauthorizedAccount", admin, registry.POG_ROLE())):
        registry.setPogStatus(provider, 1, bytes(32), 0, False, {"from": admin})
    with brownie.reverts(custom_error("AccessControlUnauthorizedAccount", admin, committee.OPENER_ROLE())):
        committee.open(1, admin, provider, {"from": admin})


@pytest.mark.parametrize(
    "contract, signature, types, args",
    [
        ("Staking", "setUnbondingDelay(uint64)", ["uint64"], [2**64 - 1]),
        ("Staking", "setSlashRewardBps(uint16)", ["uint16"], [0]),
        ("Staking", "setTreasury(address)", ["address"], [ZERO_ADDRESS]),
        ("JobEscrow", "setChallengeWindow(uint64)", ["uint64"], [2**32 - 1]),
        ("JobEscrow", "setProtocolFeeBps(uint16)", ["uint16"], [1_000]),
        ("JobEscrow", "setTreasury(address)", ["address"], [ZERO_ADDRESS]),
        ("ProviderRegistry", "setMinProviderStake(uint256)", ["uint256"], [100 * ETHER]),
    ],
)
def test_deployer_cannot_change_a_parameter(deployed, admin, contract, signature, types, args):
    """The old setters, called by the deployer: none exists any more, so each call reverts."""
    with brownie.reverts():
        _raw_call(admin, deployed[contract], signature, types, args)
    assert not [f for f in deployed[contract].abi if f["type"] == "function" and f["name"].startswith("set")
                and f["name"] not in ("setPogStatus", "setPrices", "setMetadataURI", "setProviderActive")]


def test_stake_still_leaves_after_the_deployers_attempts(escrow, deployed, victim, admin):
    """The huge-delay attack left stake stuck forever; here the provider leaves on time."""
    staking, escrow = deployed["Staking"], deployed["JobEscrow"]
    provider, job_id = victim
    with brownie.reverts():
        _raw_call(admin, staking, "setUnbondingDelay(uint64)", ["uint64"], [2**64 - 1])
    chain.sleep(escrow.challengeWindow())
    escrow.finalize(job_of(escrow, job_id), {"from": provider})
    tx = staking.requestUnbond(2 * ETHER, {"from": provider})
    assert tx.events["UnbondRequested"]["releaseAt"] == tx.timestamp + staking.unbondingDelay()
    chain.sleep(staking.unbondingDelay())
    assert staking.withdrawUnbonded({"from": provider}).events["UnbondedWithdrawn"]["amount"] == 2 * ETHER


def test_roles_are_held_by_exactly_the_contracts_that_need_them(deployed, admin):
    staking, escrow = deployed["Staking"], deployed["JobEscrow"]
    challenges, leases = deployed["ChallengeManager"], deployed["LeaseManager"]
    assert staking.hasRole(staking.SLASHER_ROLE(), challenges) and staking.hasRole(staking.SLASHER_ROLE(), escrow)
    assert staking.hasRole(staking.LOCKER_ROLE(), escrow) and staking.hasRole(staking.LOCKER_ROLE(), leases)
    assert escrow.hasRole(escrow.DISPUTE_ROLE(), challenges)
    assert deployed["ProviderRegistry"].hasRole(deployed["ProviderRegistry"].POG_ROLE(), deployed["ProofOfGpu"])
    assert deployed["DisputeCommittee"].hasRole(deployed["DisputeCommittee"].OPENER_ROLE(), challenges)
    for name in ("Staking", "JobEscrow", "ProviderRegistry", "DisputeCommittee"):
        assert not deployed[name].hasRole(ADMIN_ROLE, admin)


# --- ChallengeManager refuses windows that outlast the unbonding delay ----------------------------


def _config(unchained, treasury, response=RESPONSE_WINDOW, fraud=FRAUD_WINDOW, escalation=ESCALATION_WINDOW,
            fee=BOND_FEE_BPS):
    return (
        unchained["staking"], unchained["proof_of_gpu"], unchained["escrow"], unchained["dispute_committee"],
        treasury, MIN_BOND, MIN_VERIFIER_STAKE, PROVIDER_SLASH, FALSE_CLAIM_SLASH, fee, response, fraud, escalation,
    )


def test_challenge_windows_longer_than_the_unbonding_delay_are_refused(
    ChallengeManager, unchained, treasury, admin, custom_error, deploy_revert
):
    """A provider unbonding when its PoG round is requested must still be slashable when the
    fraud window of its last answer closes: commit + root challenge + response + fraud < delay.
    (Here the job path, which shares the response window, is longer still and is reported.)"""
    pog = unchained["proof_of_gpu"]
    pog_rest = pog.commitWindow() + pog.rootChallengePeriod() + FRAUD_WINDOW
    response = UNBONDING_DELAY - pog_rest  # exactly the delay: one second too long
    job_path = unchained["escrow"].challengeWindow() + response + ESCALATION_WINDOW + unchained[
        "dispute_committee"].voteWindow()
    reason = deploy_revert(ChallengeManager, _config(unchained, treasury, response=response), sender=admin)
    assert reason == custom_error("ChallengeWindowsExceedUnbonding", max(UNBONDING_DELAY, job_path), UNBONDING_DELAY)


def test_job_dispute_path_longer_than_the_unbonding_delay_is_refused(
    ChallengeManager, unchained, treasury, admin, custom_error, deploy_revert
):
    """A challenger found wrong by the committee is slashed after response + escalation + vote."""
    escalation = UNBONDING_DELAY - DAY - RESPONSE_WINDOW - DAY  # challenge window and vote are a day each
    reason = deploy_revert(ChallengeManager, _config(unchained, treasury, escalation=escalation), sender=admin)
    assert reason == custom_error("ChallengeWindowsExceedUnbonding", UNBONDING_DELAY, UNBONDING_DELAY)
    ok = ChallengeManager.deploy(_config(unchained, treasury, escalation=escalation - 1), {"from": admin})
    assert ok.escalationWindow() == escalation - 1


@pytest.mark.parametrize("field", ["response", "fraud", "escalation"])
def test_zero_challenge_windows_are_refused(
    ChallengeManager, unchained, treasury, admin, field, custom_error, deploy_revert
):
    reason = deploy_revert(ChallengeManager, _config(unchained, treasury, **{field: 0}), sender=admin)
    assert reason == custom_error("ChallengeZeroWindow")


def test_bond_fee_above_the_cap_is_refused(ChallengeManager, unchained, treasury, admin, custom_error, deploy_revert):
    reason = deploy_revert(ChallengeManager, _config(unchained, treasury, fee=1_001), sender=admin)
    assert reason == custom_error("ChallengeBadFeeBps", 1_001)


@pytest.mark.parametrize("window", [0, WEEK + 1])
def test_vote_window_out_of_bounds_is_refused(DisputeCommittee, staking, admin, window, custom_error, deploy_revert):
    reason = deploy_revert(DisputeCommittee, staking, MIN_VOTER_STAKE, QUORUM_WEIGHT, window, sender=admin)
    assert reason == custom_error("DisputeCommitteeInvalidVoteWindow", window, WEEK)
