"""`unchained lease status` quotes what stopping now would pay (renter.orders.quote_lease): the
quote must be what LeaseManager.endLease then pays, in each delivery state (never offered,
offered and inside the confirm window, offered and past it, confirmed)."""

from __future__ import annotations

import pytest

from renter.orders import quote_lease
from client.contracts import emitted

ACCESS = b"\xab" * 32
WINDOW = 300  # CONFIRM_WINDOW


@pytest.mark.parametrize("offer, confirm, after_offer_s, expect_paid", [
    (False, False, 60, False),   # nothing handed over: everything back
    (True, False, 60, False),    # offered, not confirmed, disputed inside the window: everything back
    (True, False, WINDOW + 60, True),  # offered and not disputed in time: counts as delivered
    (True, True, 60, True),      # the renter confirmed its login: it pays from the offer on
])
def test_quote_is_what_ending_the_lease_pays(session, market, offer, confirm, after_offer_s, expect_paid):  # type: ignore[no-untyped-def]
    leases = session.contract("LeaseManager")
    cost = leases.functions.leaseCost(market.provider2, 1, 3600).call()
    receipt = session.send(leases.functions.startLease(market.provider2, 1, 3600), market.renter, value=cost)
    lease_id = emitted(leases, "LeaseStarted", receipt)[0]["args"]["leaseId"]
    if offer:
        session.send(leases.functions.offerAccess(lease_id, ACCESS), market.provider2)
    if confirm:
        session.send(leases.functions.confirmDelivery(lease_id, ACCESS), market.renter)
    session.advance(after_offer_s)
    at = session.now() + 5
    quote = quote_lease(leases, lease_id, at)
    assert quote.active and quote.offered == offer and quote.confirmed == confirm and quote.delivered == expect_paid
    assert (quote.full_refund_until == 0) == expect_paid
    session.web3.provider.make_request("evm_setNextBlockTimestamp", [at])
    ended = emitted(leases, "LeaseEnded", session.send(leases.functions.endLease(lease_id), market.renter))[0]["args"]
    assert (ended["providerEarned"], ended["renterRefund"]) == (quote.earned_if_stopped, quote.refund_if_stopped)
    assert (ended["providerEarned"] > 0) == expect_paid
