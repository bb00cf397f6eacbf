"""Staking: bonding, unbonding through the delay, slashing (bonded first, then unbonding, never
beyond the stake) and pull payments, including the attacks the design defends against."""

import brownie
import pytest
from brownie import chain

from conftest import ETHER, SLASH_REWARD_BPS, UNBONDING_DELAY


def _balance_invariant_holds(staking) -> bool:
    return staking.balance() == staking.totalBonded() + staking.totalUnbonding() + staking.totalOwed()


def _unbonding(staking, account) -> tuple[int, int]:
    unbonding = staking.unbondingOf(account)
    return int(unbonding["amount"]), int(unbonding["releaseAt"])


def test_stake_adds_to_bonded_stake_and_totals(staking, verifier):
    tx = staking.stake({"from": verifier, "value": ETHER})
    staking.stake({"from": verifier, "value": 2 * ETHER})
    assert staking.stakeOf(verifier) == 3 * ETHER
    assert staking.totalBonded() == 3 * ETHER
    assert tx.events["Staked"] == {"account": verifier, "amount": ETHER, "bonded": ETHER}
    assert _balance_invariant_holds(staking)


def test_stake_reverts_without_value(staking, verifier, custom_error):
    with brownie.reverts(custom_error("StakingZeroAmount")):
        staking.stake({"from": verifier, "value": 0})


def test_request_unbond_moves_stake_into_one_entry_and_resets_release(staking, verifier):
    staking.stake({"from": verifier, "value": 3 * ETHER})
    tx = staking.requestUnbond(ETHER, {"from": verifier})
    first_release = tx.timestamp + UNBONDING_DELAY
    assert tx.events["UnbondRequested"] == {
        "account": verifier,
        "amount": ETHER,
        "unbonding": ETHER,
        "releaseAt": first_release,
    }
    chain.sleep(3600)
    tx2 = staking.requestUnbond(ETHER, {"from": verifier})
    assert tx2.timestamp + UNBONDING_DELAY > first_release
    assert _unbonding(staking, verifier) == (2 * ETHER, tx2.timestamp + UNBONDING_DELAY)
    assert staking.stakeOf(verifier) == ETHER
    assert staking.totalBonded() == ETHER
    assert staking.totalUnbonding() == 2 * ETHER
    assert _balance_invariant_holds(staking)


def test_request_unbond_reverts_on_zero_amount(staking, verifier, custom_error):
    staking.stake({"from": verifier, "value": ETHER})
    with brownie.reverts(custom_error("StakingZeroAmount")):
        staking.requestUnbond(0, {"from": verifier})


def test_request_unbond_reverts_beyond_bonded_stake(staking, verifier, custom_error):
    staking.stake({"from": verifier, "value": ETHER})
    with brownie.reverts(custom_error("StakingInsufficientStake", verifier, ETHER + 1, ETHER)):
        staking.requestUnbond(ETHER + 1, {"from": verifier})


def test_withdraw_unbonded_reverts_before_release(staking, verifier, custom_error):
    staking.stake({"from": verifier, "value": ETHER})
    tx = staking.requestUnbond(ETHER, {"from": verifier})
    release = tx.timestamp + UNBONDING_DELAY
    chain.sleep(UNBONDING_DELAY - 60)
    with brownie.reverts(custom_error("StakingStillUnbonding", verifier, release)):
        staking.withdrawUnbonded({"from": verifier})


def test_withdraw_unbonded_pays_after_release_once(staking, verifier, custom_error):
    staking.stake({"from": verifier, "value": 2 * ETHER})
    staking.requestUnbond(ETHER, {"from": verifier})
    chain.sleep(UNBONDING_DELAY)
    before = verifier.balance()
    tx = staking.withdrawUnbonded({"from": verifier})
    assert tx.events["UnbondedWithdrawn"] == {"account": verifier, "amount": ETHER}
    assert verifier.balance() == before + ETHER  # base fee 0 on the test chain
    assert _unbonding(staking, verifier) == (0, 0)
    assert staking.stakeOf(verifier) == ETHER
    assert _balance_invariant_holds(staking)
    with brownie.reverts(custom_error("StakingNothingUnbonding", verifier)):
        staking.withdrawUnbonded({"from": verifier})


def test_withdraw_unbonded_reverts_when_nothing_unbonding(staking, verifier, custom_error):
    with brownie.reverts(custom_error("StakingNothingUnbonding", verifier)):
        staking.withdrawUnbonded({"from": verifier})


def test_withdraw_unbonded_reverts_when_receiver_rejects_ether(staking, attacker, custom_error):
    attacker.execute(staking, staking.stake.encode_input(), ETHER, {"value": ETHER})
    attacker.execute(staking, staking.requestUnbond.encode_input(ETHER), 0)
    chain.sleep(UNBONDING_DELAY)
    attacker.setRejectPayments(True)
    with brownie.reverts(custom_error("StakingTransferFailed", attacker, ETHER)):
        attacker.execute(staking, staking.withdrawUnbonded.encode_input(), 0)


def test_slash_takes_bonded_stake_and_splits_reward(staking, provider, verifier, treasury, slasher):
    staking.stake({"from": provider, "value": 2 * ETHER})
    tx = staking.slash(provider, ETHER, verifier, {"from": slasher})
    reward = ETHER * SLASH_REWARD_BPS // 10_000
    assert tx.events["Slashed"] == {
        "offender": provider,
        "requested": ETHER,
        "slashed": ETHER,
        "rewardRecipient": verifier,
        "reward": reward,
    }
    assert tx.return_value == ETHER
    assert staking.stakeOf(provider) == ETHER
    assert staking.owedTo(verifier) == reward
    assert staking.owedTo(treasury) == ETHER - reward
    assert _balance_invariant_holds(staking)


def test_slash_reaches_unbonding_stake_after_bonded(staking, provider, verifier, slasher):
    staking.stake({"from": provider, "value": 3 * ETHER})
    tx = staking.requestUnbond(2 * ETHER, {"from": provider})
    staking.slash(provider, 2 * ETHER, verifier, {"from": slasher})
    assert staking.stakeOf(provider) == 0
    assert _unbonding(staking, provider) == (ETHER, tx.timestamp + UNBONDING_DELAY)
    assert staking.totalUnbonding() == ETHER
    assert _balance_invariant_holds(staking)


def test_unbonding_to_dodge_a_pending_slash_fails(staking, provider, verifier, slasher, custom_error):
    """Attack: a provider that expects a slash unbonds everything at once; the slash, landing
    inside the unbonding delay, still takes the stake and nothing is left to withdraw."""
    staking.stake({"from": provider, "value": 2 * ETHER})
    staking.requestUnbond(2 * ETHER, {"from": provider})
    assert staking.stakeOf(provider) == 0
    chain.sleep(UNBONDING_DELAY // 2)
    tx = staking.slash(provider, 2 * ETHER, verifier, {"from": slasher})
    assert tx.events["Slashed"]["slashed"] == 2 * ETHER
    chain.sleep(UNBONDING_DELAY)
    with brownie.reverts(custom_error("StakingNothingUnbonding", provider)):
        staking.withdrawUnbonded({"from": provider})


def test_slashing_more_than_the_stake_takes_only_the_stake(staking, provider, verifier, treasury, slasher):
    """Attack (by a faulty slasher): a slash larger than everything the offender holds is capped."""
    staking.stake({"from": provider, "value": 2 * ETHER})
    staking.requestUnbond(ETHER, {"from": provider})
    tx = staking.slash(provider, 10 * ETHER, verifier, {"from": slasher})
    assert tx.events["Slashed"]["slashed"] == 2 * ETHER
    assert staking.stakeOf(provider) == 0
    assert staking.unbondingOf(provider)["amount"] == 0
    assert staking.owedTo(verifier) + staking.owedTo(treasury) == 2 * ETHER
    again = staking.slash(provider, ETHER, verifier, {"from": slasher})
    assert again.events["Slashed"]["slashed"] == 0
    assert _balance_invariant_holds(staking)


def test_slash_without_reward_recipient_credits_treasury(staking, provider, treasury, slasher):
    staking.stake({"from": provider, "value": ETHER})
    staking.slash(provider, ETHER, brownie.ZERO_ADDRESS, {"from": slasher})
    assert staking.owedTo(treasury) == ETHER


def test_offender_earns_no_reward_from_its_own_slash(staking, provider, treasury, slasher):
    staking.stake({"from": provider, "value": ETHER})
    tx = staking.slash(provider, ETHER, provider, {"from": slasher})
    assert tx.events["Slashed"]["reward"] == 0
    assert staking.owedTo(provider) == 0
    assert staking.owedTo(treasury) == ETHER


def test_slash_reverts_without_slasher_role(staking, provider, stranger, custom_error):
    staking.stake({"from": provider, "value": ETHER})
    with brownie.reverts(custom_error("AccessControlUnauthorizedAccount", stranger, staking.SLASHER_ROLE())):
        staking.slash(provider, ETHER, stranger, {"from": stranger})


def test_withdraw_pays_owed_balance_once(staking, provider, verifier, slasher, custom_error):
    staking.stake({"from": provider, "value": ETHER})
    staking.slash(provider, ETHER, verifier, {"from": slasher})
    owed = staking.owedTo(verifier)
    before = verifier.balance()
    tx = staking.withdraw({"from": verifier})
    assert tx.events["Withdrawn"] == {"account": verifier, "amount": owed}
    assert verifier.balance() == before + owed
    assert staking.owedTo(verifier) == 0
    assert _balance_invariant_holds(staking)
    with brownie.reverts(custom_error("StakingNothingOwed", verifier)):
        staking.withdraw({"from": verifier})


def test_withdraw_reentrancy_pays_only_once(staking, provider, slasher, attacker):
    """Attack: the reward recipient re-enters withdraw() from its receive hook."""
    staking.stake({"from": provider, "value": 2 * ETHER})
    staking.stake({"from": slasher, "value": ETHER})  # other funds the attacker could drain
    staking.slash(provider, 2 * ETHER, attacker, {"from": slasher})
    owed = staking.owedTo(attacker)
    attacker.arm(staking, staking.withdraw.encode_input(), 3)
    attacker.execute(staking, staking.withdraw.encode_input(), 0)
    assert attacker.balance() == owed
    assert attacker.reentryAttempts() == 1
    assert attacker.reentrySuccesses() == 0
    assert staking.stakeOf(slasher) == ETHER
    assert _balance_invariant_holds(staking)


def test_withdraw_reverts_when_receiver_rejects_ether(staking, provider, slasher, attacker, custom_error):
    staking.stake({"from": provider, "value": ETHER})
    staking.slash(provider, ETHER, attacker, {"from": slasher})
    owed = staking.owedTo(attacker)
    attacker.setRejectPayments(True)
    with brownie.reverts(custom_error("StakingTransferFailed", attacker, owed)):
        attacker.execute(staking, staking.withdraw.encode_input(), 0)


@pytest.mark.parametrize(
    "args, error",
    [
        ((0, SLASH_REWARD_BPS), ("StakingInvalidDelay", 0, 30 * 24 * 3600)),
        ((30 * 24 * 3600 + 1, SLASH_REWARD_BPS), ("StakingInvalidDelay", 30 * 24 * 3600 + 1, 30 * 24 * 3600)),
        ((2**64 - 1, SLASH_REWARD_BPS), ("StakingInvalidDelay", 2**64 - 1, 30 * 24 * 3600)),
        ((UNBONDING_DELAY, 10_001), ("StakingInvalidBps", 10_001)),
    ],
)
def test_constructor_rejects_parameters_out_of_bounds(Staking, admin, treasury, args, error, custom_error,
                                                     deploy_revert):
    assert deploy_revert(Staking, *args, treasury, sender=admin) == custom_error(*error)


def test_constructor_rejects_zero_treasury(Staking, admin, custom_error, deploy_revert):
    assert deploy_revert(Staking, UNBONDING_DELAY, SLASH_REWARD_BPS, brownie.ZERO_ADDRESS, sender=admin) == (
        custom_error("StakingZeroAddress"))


def test_longest_delay_still_unbonds_and_releases(Staking, admin, treasury, verifier):
    """The old attack set the delay so large that now + delay overflowed uint64 and every unbond
    request reverted; at the largest delay a deployment may choose, stake still comes back."""
    contract = Staking.deploy(30 * 24 * 3600, SLASH_REWARD_BPS, treasury, {"from": admin})
    contract.stake({"from": verifier, "value": ETHER})
    tx = contract.requestUnbond(ETHER, {"from": verifier})
    assert tx.events["UnbondRequested"]["releaseAt"] == tx.timestamp + 30 * 24 * 3600
    chain.sleep(30 * 24 * 3600)
    assert contract.withdrawUnbonded({"from": verifier}).events["UnbondedWithdrawn"]["amount"] == ETHER


def test_wire_refuses_a_locker_contract_that_does_not_count_its_work(
    Staking, TestStablecoin, admin, treasury, escrow, leases
):
    """A locker contract must answer IStakeLocker.lockedWorkOf: one that cannot would make every
    unbond revert later (or, if skipped, let stake it secures leave), so the wiring refuses it."""
    not_a_locker = TestStablecoin.deploy({"from": admin})
    contract = Staking.deploy(UNBONDING_DELAY, SLASH_REWARD_BPS, treasury, {"from": admin})
    with brownie.reverts():
        contract.wire([], [escrow, not_a_locker], [], {"from": admin})
    contract.wire([], [escrow, leases], [], {"from": admin})
    assert contract.openWorkOf(admin) == 0


def test_wire_grants_roles_once_and_only_for_the_deployer(Staking, admin, treasury, stranger, custom_error):
    contract = Staking.deploy(UNBONDING_DELAY, SLASH_REWARD_BPS, treasury, {"from": admin})
    with brownie.reverts(custom_error("WiringNotDeployer", stranger)):
        contract.wire([stranger], [], [], {"from": stranger})
    with brownie.reverts(custom_error("WiringTooManyHolders", 5, 4)):
        contract.wire([stranger] * 5, [], [], {"from": admin})
    with brownie.reverts(custom_error("WiringZeroAddress")):
        contract.wire([brownie.ZERO_ADDRESS], [], [], {"from": admin})
    tx = contract.wire([stranger], [admin], [], {"from": admin})
    assert tx.events["Wired"] == {"by": admin}
    assert contract.wired()
    assert contract.hasRole(contract.SLASHER_ROLE(), stranger)
    assert contract.hasRole(contract.LOCKER_ROLE(), admin)
    with brownie.reverts(custom_error("WiringAlreadyDone")):
        contract.wire([admin], [], [], {"from": admin})
    with brownie.reverts(custom_error("AccessControlUnauthorizedAccount", admin, bytes(32))):
        contract.grantRole(contract.SLASHER_ROLE(), admin, {"from": admin})
    with brownie.reverts(custom_error("AccessControlUnauthorizedAccount", admin, bytes(32))):
        contract.revokeRole(contract.SLASHER_ROLE(), stranger, {"from": admin})


# --- Open work: stake that secures an accepted job or an active lease cannot start unbonding ---


def test_only_lockers_lock_or_unlock(staking, provider, stranger, custom_error):
    """The escrow and the lease contract hold LOCKER_ROLE (their tests drive the real paths);
    nobody else can lock a provider's stake or release its lock."""
    staking.stake({"from": provider, "value": 2 * ETHER})
    role = staking.LOCKER_ROLE()
    with brownie.reverts(custom_error("AccessControlUnauthorizedAccount", stranger, role)):
        staking.lockStake(provider, ETHER, {"from": stranger})
    with brownie.reverts(custom_error("AccessControlUnauthorizedAccount", stranger, role)):
        staking.unlockStake(provider, {"from": stranger})


def test_lock_requires_the_minimum_stake(locker, staking, provider, custom_error):
    staking.stake({"from": provider, "value": ETHER // 2})
    with brownie.reverts(custom_error("StakingBelowMinimum", provider, ETHER // 2, ETHER)):
        staking.lockStake(provider, ETHER, {"from": locker})


def test_unbonding_is_refused_while_work_is_open_and_allowed_after(locker, staking, provider, custom_error):
    staking.stake({"from": provider, "value": 2 * ETHER})
    tx = staking.lockStake(provider, ETHER, {"from": locker})
    assert tx.events["StakeLocked"] == {"account": provider, "locker": locker, "openWork": 1}
    staking.lockStake(provider, ETHER, {"from": locker})
    assert staking.openWorkOf(provider) == 2
    with brownie.reverts(custom_error("StakingWorkOpen", provider, 2)):
        staking.requestUnbond(ETHER, {"from": provider})
    staking.unlockStake(provider, {"from": locker})
    with brownie.reverts(custom_error("StakingWorkOpen", provider, 1)):
        staking.requestUnbond(ETHER, {"from": provider})
    tx = staking.unlockStake(provider, {"from": locker})
    assert tx.events["StakeUnlocked"] == {"account": provider, "locker": locker, "openWork": 0}
    staking.requestUnbond(2 * ETHER, {"from": provider})
    with brownie.reverts(custom_error("StakingNoOpenWork", provider)):
        staking.unlockStake(provider, {"from": locker})


def test_locked_stake_stays_slashable(locker, staking, provider, verifier, slasher):
    staking.stake({"from": provider, "value": ETHER})
    staking.lockStake(provider, ETHER, {"from": locker})
    assert staking.slash(provider, ETHER, verifier, {"from": slasher}).return_value == ETHER
    assert staking.openWorkOf(provider) == 1
