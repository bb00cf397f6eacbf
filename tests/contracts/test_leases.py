"""LeaseManager: prepaid GPU leases settled per second, GPU accounting per provider, pull
payments, and delivery certified by the renter: a lease the provider never offered, or whose
offer the renter disputed (stopped) inside its confirm window, refunds in full; a renter who
confirmed, or let the window pass, pays the seconds from the offer on."""

import brownie
import pytest
from brownie import chain

from protocol.enums import LeaseStatus
from conftest import PRICE_PER_GPU_HOUR

HOUR = 3600
WINDOW = 5 * 60  # DELIVERY_WINDOW: the provider offers within it
CONFIRM = 5 * 60  # CONFIRM_WINDOW: the renter may dispute an unconfirmed offer within it
ACCESS_HASH = "0x" + "ab" * 32  # stands for the EIP-712 digest of the provider's signed LeaseAccess


def _cost(gpus: int, seconds: int, price: int = PRICE_PER_GPU_HOUR) -> int:
    return price * gpus * seconds // HOUR


@pytest.fixture
def start(leases, active_provider, renter):
    """Starts a lease of `gpus` GPUs of `active_provider` for `seconds` and, unless told not to,
    has the provider offer the machine and the renter confirm it logged in; returns the start tx."""

    def start_lease(gpus: int = 2, seconds: int = HOUR, sender=renter, deliver: bool = True):
        tx = leases.startLease(active_provider, gpus, seconds, {"from": sender, "value": _cost(gpus, seconds)})
        if deliver:
            leases.offerAccess(tx.return_value, ACCESS_HASH, {"from": active_provider})
            leases.confirmDelivery(tx.return_value, ACCESS_HASH, {"from": sender})
        return tx

    return start_lease


def _offered_at(leases, lease_id: int) -> int:
    return leases.getDelivery(lease_id)["offeredAt"]


def _earned(leases, lease_id: int, until: int) -> int:
    """What the provider earns for a delivered lease ended at `until`: the seconds from the offer."""
    lease = leases.getLease(lease_id)
    until = min(until, lease["endsAt"])
    return lease["paid"] * (until - _offered_at(leases, lease_id)) // (lease["endsAt"] - lease["startedAt"])


def test_start_lease_records_lease_and_counts_gpus(leases, start, active_provider, renter):
    tx = start(2, HOUR)
    paid = _cost(2, HOUR)
    assert tx.return_value == 1 and leases.leaseCount() == 1
    assert tx.events["LeaseStarted"] == {
        "leaseId": 1,
        "renter": renter,
        "provider": active_provider,
        "gpuCount": 2,
        "endsAt": tx.timestamp + HOUR,
        "paid": paid,
    }
    lease = leases.getLease(1)
    assert (lease["renter"], lease["provider"], lease["gpuCount"]) == (renter, active_provider, 2)
    assert (lease["startedAt"], lease["endsAt"], lease["endedAt"]) == (tx.timestamp, tx.timestamp + HOUR, 0)
    assert (lease["status"], lease["paid"]) == (LeaseStatus.ACTIVE, paid)
    assert leases.leasedGpusOf(active_provider) == 2
    assert leases.availableGpusOf(active_provider) == 2
    assert leases.isLeased(active_provider)
    assert leases.balance() == paid


def test_lease_cost_quotes_hourly_price_per_second(leases, active_provider):
    assert leases.leaseCost(active_provider, 3, 90) == _cost(3, 90)


def test_start_lease_reverts_on_zero_gpus(leases, active_provider, renter, custom_error):
    with brownie.reverts(custom_error("LeaseManagerZeroGpuCount")):
        leases.startLease(active_provider, 0, HOUR, {"from": renter})


def test_start_lease_reverts_on_zero_duration(leases, active_provider, renter, custom_error):
    with brownie.reverts(custom_error("LeaseManagerZeroDuration")):
        leases.startLease(active_provider, 1, 0, {"from": renter})


def test_start_lease_reverts_on_too_long_duration(leases, active_provider, renter, custom_error):
    too_long = leases.MAX_DURATION() + 1
    with brownie.reverts(custom_error("LeaseManagerDurationTooLong", too_long, too_long - 1)):
        leases.startLease(active_provider, 1, too_long, {"from": renter})


def test_start_lease_reverts_for_inactive_provider(leases, registry, active_provider, renter, custom_error):
    registry.deactivate({"from": active_provider})
    with brownie.reverts(custom_error("LeaseManagerProviderInactive", active_provider)):
        leases.startLease(active_provider, 1, HOUR, {"from": renter, "value": _cost(1, HOUR)})


def test_start_lease_reverts_beyond_registered_gpus(leases, active_provider, renter, custom_error):
    with brownie.reverts(custom_error("LeaseManagerNotEnoughGpus", active_provider, 5, 4)):
        leases.startLease(active_provider, 5, HOUR, {"from": renter, "value": _cost(5, HOUR)})


def test_provider_cannot_be_leased_beyond_its_gpus_at_once(leases, start, active_provider, stranger, custom_error):
    """Attack (double booking): a second renter asks for GPUs that are already leased."""
    start(3, HOUR)
    with brownie.reverts(custom_error("LeaseManagerNotEnoughGpus", active_provider, 2, 1)):
        start(2, HOUR, sender=stranger)
    start(1, HOUR, sender=stranger)
    assert leases.availableGpusOf(active_provider) == 0


def test_start_lease_reverts_when_cost_rounds_to_zero(leases, registry, active_provider, renter, custom_error):
    registry.setPrices(1, 1, {"from": active_provider})
    with brownie.reverts(custom_error("LeaseManagerZeroPrice")):
        leases.startLease(active_provider, 1, 1, {"from": renter})


def test_start_lease_reverts_on_wrong_value(leases, active_provider, renter, custom_error):
    cost = _cost(1, HOUR)
    with brownie.reverts(custom_error("LeaseManagerWrongValue", cost + 1, cost)):
        leases.startLease(active_provider, 1, HOUR, {"from": renter, "value": cost + 1})


def test_renter_ending_early_pays_elapsed_seconds_and_gets_the_rest(leases, start, active_provider, renter):
    start(2, HOUR)
    chain.sleep(HOUR // 3)
    tx = leases.endLease(1, {"from": renter})
    paid = _cost(2, HOUR)
    earned = paid * (tx.timestamp - _offered_at(leases, 1)) // HOUR
    assert 0 < earned < paid and earned == _earned(leases, 1, tx.timestamp)
    assert tx.events["LeaseEnded"] == {
        "leaseId": 1,
        "endedBy": renter,
        "providerEarned": earned,
        "renterRefund": paid - earned,
    }
    assert leases.owedTo(active_provider) == earned
    assert leases.owedTo(renter) == paid - earned
    lease = leases.getLease(1)
    assert (lease["status"], lease["endedAt"]) == (LeaseStatus.ENDED, tx.timestamp)
    assert leases.leasedGpusOf(active_provider) == 0
    assert not leases.isLeased(active_provider)


def test_anyone_can_end_an_expired_lease_and_provider_earns_at_most_the_payment(
    leases, start, active_provider, renter, stranger
):
    start(1, HOUR)
    chain.sleep(5 * HOUR)
    tx = leases.endLease(1, {"from": stranger})
    earned = _earned(leases, 1, tx.timestamp)  # the seconds from the offer to the end
    assert _cost(1, HOUR) - _cost(1, 10) <= earned <= _cost(1, HOUR)
    assert tx.events["LeaseEnded"]["providerEarned"] == earned
    assert leases.owedTo(active_provider) == earned
    assert leases.owedTo(renter) == _cost(1, HOUR) - earned


def test_end_lease_reverts_for_stranger_before_the_end(leases, start, stranger, custom_error):
    tx = start(1, HOUR)
    with brownie.reverts(custom_error("LeaseManagerNotRenter", stranger, tx.timestamp + HOUR)):
        leases.endLease(1, {"from": stranger})


def test_provider_cannot_end_a_lease_early_to_collect(leases, start, active_provider, custom_error):
    tx = start(1, HOUR)
    with brownie.reverts(custom_error("LeaseManagerNotRenter", active_provider, tx.timestamp + HOUR)):
        leases.endLease(1, {"from": active_provider})


def test_end_lease_twice_pays_nothing_more(leases, start, active_provider, renter, custom_error):
    start(1, HOUR)
    chain.sleep(2 * HOUR)
    leases.endLease(1, {"from": renter})
    with brownie.reverts(custom_error("LeaseManagerNotActive", 1)):
        leases.endLease(1, {"from": renter})
    assert leases.owedTo(active_provider) == _earned(leases, 1, leases.getLease(1)["endsAt"])


def test_end_lease_reverts_for_unknown_lease(leases, renter, custom_error):
    with brownie.reverts(custom_error("LeaseManagerUnknownLease", 9)):
        leases.endLease(9, {"from": renter})


def test_price_change_does_not_touch_a_running_lease(leases, registry, start, active_provider, renter):
    start(1, HOUR)
    registry.setPrices(PRICE_PER_GPU_HOUR * 10, 0, {"from": active_provider})
    chain.sleep(2 * HOUR)
    leases.endLease(1, {"from": renter})
    assert leases.owedTo(active_provider) == _earned(leases, 1, leases.getLease(1)["endsAt"]) > 0


def test_withdraw_pays_provider_and_renter_once(leases, start, active_provider, renter, custom_error):
    start(2, HOUR)
    chain.sleep(HOUR // 2)
    leases.endLease(1, {"from": renter})
    for account in (active_provider, renter):
        owed = leases.owedTo(account)
        before = account.balance()
        tx = leases.withdraw({"from": account})
        assert tx.events["Withdrawn"] == {"account": account, "amount": owed}
        assert account.balance() == before + owed
        with brownie.reverts(custom_error("LeaseManagerNothingOwed", account)):
            leases.withdraw({"from": account})
    assert leases.balance() == 0


def test_withdraw_reentrancy_pays_only_once(leases, start, active_provider, attacker):
    """Attack: a renter contract ends its lease early and re-enters withdraw() when refunded."""
    start(1, HOUR)  # another renter's prepayment the attacker could drain
    cost = _cost(2, HOUR)
    attacker.execute(leases, leases.startLease.encode_input(active_provider, 2, HOUR), cost, {"value": cost})
    attacker.execute(leases, leases.endLease.encode_input(2), 0)
    refund = leases.owedTo(attacker)
    assert refund > 0
    withdraw = leases.withdraw.encode_input()
    attacker.arm(leases, withdraw, 3)
    attacker.execute(leases, withdraw, 0)
    assert attacker.balance() == refund
    assert (attacker.reentryAttempts(), attacker.reentrySuccesses()) == (1, 0)
    assert leases.balance() == _cost(1, HOUR) + leases.owedTo(active_provider)


def test_withdraw_reverts_when_receiver_rejects_ether(leases, active_provider, attacker, custom_error):
    cost = _cost(1, HOUR)
    attacker.execute(leases, leases.startLease.encode_input(active_provider, 1, HOUR), cost, {"value": cost})
    attacker.execute(leases, leases.endLease.encode_input(1), 0)
    refund = leases.owedTo(attacker)
    attacker.setRejectPayments(True)
    with brownie.reverts(custom_error("LeaseManagerTransferFailed", attacker, refund)):
        attacker.execute(leases, leases.withdraw.encode_input(), 0)


def test_provider_cannot_unbond_while_a_lease_is_active(leases, staking, start, active_provider, renter, custom_error):
    """Attack: a leased provider unbonds and walks away with its stake while renters depend on it.
    Each active lease locks the stake until the lease ends."""
    first = start(1, HOUR).return_value
    second = start(1, 2 * HOUR).return_value
    assert staking.openWorkOf(active_provider) == 2
    with brownie.reverts(custom_error("StakingWorkOpen", active_provider, 2)):
        staking.requestUnbond(staking.stakeOf(active_provider), {"from": active_provider})
    leases.endLease(first, {"from": renter})
    chain.sleep(2 * HOUR)
    leases.endLease(second, {"from": active_provider})
    assert staking.openWorkOf(active_provider) == 0
    staking.requestUnbond(staking.stakeOf(active_provider), {"from": active_provider})


# ---- delivery ----


def test_offer_access_records_the_access_hash_and_opens_the_confirm_window(leases, start, active_provider):
    tx = start(1, HOUR, deliver=False)
    assert leases.deliveryOf(1) == "0x" + "00" * 32 and leases.confirmDeadline(1) == 0
    assert leases.deliveryDeadline(1) == tx.timestamp + WINDOW
    offered = leases.offerAccess(1, ACCESS_HASH, {"from": active_provider})
    assert offered.events["LeaseAccessOffered"] == {"leaseId": 1, "provider": active_provider, "accessHash": ACCESS_HASH}
    assert leases.deliveryOf(1) == ACCESS_HASH
    assert tuple(leases.getDelivery(1)) == (ACCESS_HASH, offered.timestamp, 0)
    assert leases.confirmDeadline(1) == offered.timestamp + CONFIRM
    assert not leases.isDelivered(1)  # an offer is not a delivery until the renter confirms or lets the window pass
    chain.sleep(CONFIRM)
    chain.mine()
    assert leases.isDelivered(1)


def test_confirm_delivery_records_the_renters_confirmation(leases, start, active_provider, renter):
    start(1, HOUR, deliver=False)
    leases.offerAccess(1, ACCESS_HASH, {"from": active_provider})
    tx = leases.confirmDelivery(1, ACCESS_HASH, {"from": renter})
    assert tx.events["LeaseDelivered"] == {"leaseId": 1, "renter": renter, "accessHash": ACCESS_HASH}
    assert leases.getDelivery(1)["confirmedAt"] == tx.timestamp
    assert leases.isDelivered(1)


def test_offer_access_reverts_for_anyone_but_the_provider(leases, start, active_provider, renter, custom_error):
    start(1, HOUR, deliver=False)
    with brownie.reverts(custom_error("LeaseManagerNotProvider", renter, active_provider)):
        leases.offerAccess(1, ACCESS_HASH, {"from": renter})


def test_provider_cannot_certify_its_own_delivery(leases, start, active_provider, renter, custom_error):
    """Attack (self-certified delivery): the provider offers the machine and confirms the
    delivery itself, so that a renter its sshd refuses would still pay."""
    start(1, HOUR, deliver=False)
    leases.offerAccess(1, ACCESS_HASH, {"from": active_provider})
    with brownie.reverts(custom_error("LeaseManagerNotLeaseRenter", active_provider, renter)):
        leases.confirmDelivery(1, ACCESS_HASH, {"from": active_provider})
    chain.sleep(CONFIRM - 30)  # the renter's login keeps failing; it stops inside its window
    tx = leases.endLease(1, {"from": renter})
    assert tx.events["LeaseEnded"]["providerEarned"] == 0
    assert leases.owedTo(renter) == _cost(1, HOUR) and leases.owedTo(active_provider) == 0


def test_renter_refused_at_login_gets_a_full_refund(leases, start, active_provider, renter):
    """Attack: the provider offers (signed details, hash on-chain) a machine whose sshd refuses the
    renter. The renter never confirms and stops: everything back, nothing to the provider."""
    start(2, HOUR, deliver=False)
    chain.sleep(WINDOW - 10)
    leases.offerAccess(1, ACCESS_HASH, {"from": active_provider})
    chain.sleep(60)
    tx = leases.endLease(1, {"from": renter})
    assert tx.events["LeaseEnded"] == {"leaseId": 1, "endedBy": renter, "providerEarned": 0,
                                       "renterRefund": _cost(2, HOUR)}
    assert leases.leasedGpusOf(active_provider) == 0


def test_renter_never_served_pays_nothing_for_stopping_before_the_delivery_window_ends(
    leases, start, active_provider, renter
):
    """Attack (issue 34): nothing was handed over yet; stopping before the delivery window ended
    used to pay the provider the elapsed seconds."""
    start(1, HOUR, deliver=False)
    chain.sleep(WINDOW - 30)
    tx = leases.endLease(1, {"from": renter})
    assert tx.events["LeaseEnded"]["providerEarned"] == 0
    assert leases.owedTo(renter) == _cost(1, HOUR) and leases.owedTo(active_provider) == 0


def test_renter_who_confirmed_cannot_get_a_full_refund(leases, start, active_provider, renter):
    """Attack: a renter logs in, its client confirms, it uses the GPUs and stops inside the
    confirm window claiming it was never served: it pays the seconds since the offer."""
    start(1, HOUR)
    chain.sleep(CONFIRM - 60)
    tx = leases.endLease(1, {"from": renter})
    earned = tx.events["LeaseEnded"]["providerEarned"]
    assert earned == _earned(leases, 1, tx.timestamp) >= _cost(1, CONFIRM - 60)
    assert leases.owedTo(renter) == _cost(1, HOUR) - earned


def test_silent_renter_pays_once_its_confirm_window_passed(leases, start, active_provider, renter):
    """Attack: a renter that logged in never confirms (a patched client) and stops later to get
    everything back: past the confirm window its silence counts as delivery; the free use it can
    get is bounded by CONFIRM_WINDOW."""
    start(1, HOUR, deliver=False)
    leases.offerAccess(1, ACCESS_HASH, {"from": active_provider})
    chain.sleep(HOUR // 2)
    tx = leases.endLease(1, {"from": renter})
    earned = tx.events["LeaseEnded"]["providerEarned"]
    assert earned == _earned(leases, 1, tx.timestamp) >= _cost(1, HOUR // 2)


def test_confirm_delivery_reverts_without_an_offer_on_another_hash_and_twice(
    leases, start, active_provider, renter, stranger, custom_error
):
    start(1, HOUR, deliver=False)
    with brownie.reverts(custom_error("LeaseManagerAccessNotOffered", 1)):
        leases.confirmDelivery(1, ACCESS_HASH, {"from": renter})
    leases.offerAccess(1, ACCESS_HASH, {"from": active_provider})
    other = "0x" + "cd" * 32  # the renter confirms only the host key it checked
    with brownie.reverts(custom_error("LeaseManagerAccessMismatch", 1, bytes.fromhex("ab" * 32),
                                      bytes.fromhex("cd" * 32))):
        leases.confirmDelivery(1, other, {"from": renter})
    with brownie.reverts(custom_error("LeaseManagerNotLeaseRenter", stranger, renter)):
        leases.confirmDelivery(1, ACCESS_HASH, {"from": stranger})
    leases.confirmDelivery(1, ACCESS_HASH, {"from": renter})
    with brownie.reverts(custom_error("LeaseManagerAlreadyConfirmed", 1)):
        leases.confirmDelivery(1, ACCESS_HASH, {"from": renter})
    leases.endLease(1, {"from": renter})
    with brownie.reverts(custom_error("LeaseManagerNotActive", 1)):
        leases.confirmDelivery(1, ACCESS_HASH, {"from": renter})


def test_offer_access_reverts_twice_and_on_zero_hash(leases, start, active_provider, custom_error):
    start(1, HOUR, deliver=False)
    with brownie.reverts(custom_error("LeaseManagerZeroAccessHash")):
        leases.offerAccess(1, "0x" + "00" * 32, {"from": active_provider})
    leases.offerAccess(1, ACCESS_HASH, {"from": active_provider})
    with brownie.reverts(custom_error("LeaseManagerAlreadyOffered", 1)):
        leases.offerAccess(1, "0x" + "cd" * 32, {"from": active_provider})


def test_offer_access_reverts_after_the_window(leases, start, active_provider, custom_error):
    """Attack: a provider that missed the window offers late to turn a refund into earnings."""
    tx = start(1, HOUR, deliver=False)
    chain.sleep(WINDOW)
    chain.mine()
    with brownie.reverts(custom_error("LeaseManagerDeliveryWindowClosed", 1, tx.timestamp + WINDOW)):
        leases.offerAccess(1, ACCESS_HASH, {"from": active_provider})


def test_offer_access_reverts_for_unknown_or_ended_lease(leases, start, active_provider, renter, custom_error):
    with brownie.reverts(custom_error("LeaseManagerUnknownLease", 7)):
        leases.offerAccess(7, ACCESS_HASH, {"from": active_provider})
    start(1, HOUR, deliver=False)
    leases.endLease(1, {"from": renter})
    with brownie.reverts(custom_error("LeaseManagerNotActive", 1)):
        leases.offerAccess(1, ACCESS_HASH, {"from": active_provider})


def test_delivery_and_confirm_deadlines_end_with_a_short_lease(leases, start, active_provider):
    tx = start(1, 120, deliver=False)
    assert leases.deliveryDeadline(1) == tx.timestamp + 120
    leases.offerAccess(1, ACCESS_HASH, {"from": active_provider})
    assert leases.confirmDeadline(1) == tx.timestamp + 120


def test_undelivered_lease_refunds_the_renter_in_full_at_once(leases, start, active_provider, renter):
    start(2, HOUR, deliver=False)
    chain.sleep(WINDOW + 1)
    tx = leases.endLease(1, {"from": renter})
    assert tx.events["LeaseEnded"] == {"leaseId": 1, "endedBy": renter, "providerEarned": 0,
                                       "renterRefund": _cost(2, HOUR)}
    assert leases.owedTo(renter) == _cost(2, HOUR) and leases.owedTo(active_provider) == 0
    assert leases.leasedGpusOf(active_provider) == 0


def test_anyone_can_end_a_lease_never_offered_once_the_window_passed(leases, start, active_provider, renter,
                                                                    custom_error):
    """The provider's agent frees the GPUs of a lease it could not deliver (no key came), so they
    are not held (and its miner paused) for the whole paid time; the renter gets it all back."""
    tx = start(2, HOUR, deliver=False)
    with brownie.reverts(custom_error("LeaseManagerNotRenter", active_provider, tx.timestamp + HOUR)):
        leases.endLease(1, {"from": active_provider})
    chain.sleep(WINDOW + 1)
    ended = leases.endLease(1, {"from": active_provider})
    assert ended.events["LeaseEnded"] == {"leaseId": 1, "endedBy": active_provider, "providerEarned": 0,
                                          "renterRefund": _cost(2, HOUR)}
    assert leases.availableGpusOf(active_provider) == 4


def test_nobody_but_the_renter_ends_an_offered_lease_early(leases, start, active_provider, stranger, custom_error):
    tx = start(1, HOUR, deliver=False)
    leases.offerAccess(1, ACCESS_HASH, {"from": active_provider})
    chain.sleep(WINDOW + 1)
    for caller in (active_provider, stranger):
        with brownie.reverts(custom_error("LeaseManagerNotRenter", caller, tx.timestamp + HOUR)):
            leases.endLease(1, {"from": caller})


def test_provider_cannot_collect_an_undelivered_expired_lease(leases, start, active_provider, renter):
    """Attack: the provider never hands the machine over, waits for the end and ends the lease itself."""
    start(1, HOUR, deliver=False)
    chain.sleep(2 * HOUR)
    tx = leases.endLease(1, {"from": active_provider})
    assert tx.events["LeaseEnded"]["providerEarned"] == 0
    assert leases.owedTo(renter) == _cost(1, HOUR) and leases.owedTo(active_provider) == 0
