"""JobEscrow: a job's life (fund, accept, commit, challenge window, finalize), refunds, freezes
by the dispute role, pull payments per token, and the attacks on each step."""

import brownie
import pytest
from brownie import ZERO_ADDRESS, chain

from protocol.enums import JobStatus
from conftest import (CANCEL_GRACE, CHALLENGE_WINDOW, DAY, ETHER, MAX_JOB_DURATION, MIN_PROVIDER_STAKE, PROTOCOL_FEE_BPS,
                      WEEK, cancel_job, job_of, job_view)

PRICE = ETHER // 10
FEE = PRICE * PROTOCOL_FEE_BPS // 10_000
SPEC = b"\x11" * 32
ROOT = b"\x22" * 32
DIGEST = b"\x33" * 32
ITEMS = 64


DEADLINE_IN = 2 * DAY


def _deadline() -> int:
    return chain.time() + DEADLINE_IN


def _sleep_past_deadline() -> None:
    chain.sleep(DEADLINE_IN + 3600)


@pytest.fixture
def create(escrow, active_provider, renter):
    """Funds an ETH job for `active_provider` and returns its id."""

    def create_job(price: int = PRICE, sender=renter) -> int:
        tx = escrow.createJob(active_provider, SPEC, price, _deadline(), {"from": sender, "value": price})
        return tx.return_value

    return create_job


@pytest.fixture
def job_id(create) -> int:
    return create()


@pytest.fixture
def accepted(job_id) -> int:
    """A funded job its provider is about to commit (the commit accepts it)."""
    return job_id


@pytest.fixture
def committed(escrow, accepted, active_provider) -> int:
    escrow.commitResult(job_of(escrow, accepted), ROOT, ITEMS, DIGEST, {"from": active_provider})
    return accepted


def _status(escrow, job_id: int) -> int:
    return job_view(escrow, job_id)["status"]


# --- creation ---------------------------------------------------------------------------------


def test_create_job_escrows_eth_and_records_the_job(escrow, active_provider, renter):
    deadline = _deadline()
    tx = escrow.createJob(active_provider, SPEC, PRICE, deadline, {"from": renter, "value": PRICE})
    job_id = tx.return_value
    assert job_id == 1 and escrow.jobCount() == 1
    assert tx.events["JobCreated"] == {
        "jobId": 1,
        "renter": renter,
        "provider": active_provider,
        "token": ZERO_ADDRESS,
        "price": PRICE,
        "specHash": "0x" + SPEC.hex(),
        "deadline": deadline,
    }
    job = job_view(escrow, job_id)
    assert (job["renter"], job["provider"], job["token"]) == (renter, active_provider, ZERO_ADDRESS)
    assert (job["price"], job["deadline"], job["status"], job["frozen"]) == (PRICE, deadline, JobStatus.FUNDED, False)
    assert escrow.balance() == PRICE


def test_create_job_reverts_on_wrong_value(escrow, active_provider, renter, custom_error):
    with brownie.reverts(custom_error("JobEscrowWrongValue", PRICE - 1, PRICE)):
        escrow.createJob(active_provider, SPEC, PRICE, _deadline(), {"from": renter, "value": PRICE - 1})


def test_create_job_reverts_on_zero_price(escrow, active_provider, renter, custom_error):
    with brownie.reverts(custom_error("JobEscrowZeroPrice")):
        escrow.createJob(active_provider, SPEC, 0, _deadline(), {"from": renter, "value": 0})


def test_create_job_reverts_on_past_deadline(escrow, active_provider, renter, custom_error):
    # The latest block's time, not brownie's clock: after blocks were mined ahead of the wall clock
    # (anvil_mine), brownie's clock runs ahead of the next block's timestamp and `chain.time() - 1`
    # can still be in the chain's future (seen in CI).
    deadline = chain[-1].timestamp
    with brownie.reverts(custom_error("JobEscrowDeadlineInPast", deadline)):
        escrow.createJob(active_provider, SPEC, PRICE, deadline, {"from": renter, "value": PRICE})


def test_create_job_reverts_for_unregistered_provider(escrow, stranger, renter, custom_error):
    with brownie.reverts(custom_error("JobEscrowProviderInactive", stranger)):
        escrow.createJob(stranger, SPEC, PRICE, _deadline(), {"from": renter, "value": PRICE})


def test_create_job_reverts_for_deactivated_provider(escrow, registry, active_provider, renter, custom_error):
    registry.deactivate({"from": active_provider})
    with brownie.reverts(custom_error("JobEscrowProviderInactive", active_provider)):
        escrow.createJob(active_provider, SPEC, PRICE, _deadline(), {"from": renter, "value": PRICE})


def test_a_reactivated_provider_can_be_funded_again(escrow, registry, active_provider, renter):
    registry.deactivate({"from": active_provider})
    assert not escrow.isProviderActive(active_provider)
    registry.reactivate({"from": active_provider})
    assert escrow.isProviderActive(active_provider)
    tx = escrow.createJob(active_provider, SPEC, PRICE, _deadline(), {"from": renter, "value": PRICE})
    assert tx.events["JobCreated"]["provider"] == active_provider


def test_only_the_registry_tells_the_escrow_who_is_active(escrow, active_provider, stranger, custom_error):
    with brownie.reverts(custom_error("JobEscrowNotRegistry", stranger)):
        escrow.setProviderActive(stranger, True, {"from": stranger})
    with brownie.reverts(custom_error("JobEscrowNotRegistry", active_provider)):
        escrow.setProviderActive(active_provider, False, {"from": active_provider})
    assert escrow.isProviderActive(active_provider) and not escrow.isProviderActive(stranger)


def test_a_provider_that_drops_below_the_minimum_after_funding_cannot_accept_and_the_renter_takes_it_back(
    escrow, staking, active_provider, renter, custom_error
):
    """Funding requires the minimum bonded and nothing unbonding (test_signed_results covers the
    refusal); the stake is checked again (and locked) where the job is accepted, at its commit, so
    a provider that started unbonding after the funding cannot take the job."""
    job_id = escrow.createJob(active_provider, SPEC, PRICE, _deadline(), {"from": renter, "value": PRICE}).return_value
    staking.requestUnbond(MIN_PROVIDER_STAKE, {"from": active_provider})
    with brownie.reverts(custom_error("StakingBelowMinimum", active_provider, 0, MIN_PROVIDER_STAKE)):
        escrow.commitResult(job_of(escrow, job_id), ROOT, 4, DIGEST, {"from": active_provider})
    cancel_job(escrow, job_id, renter)
    assert escrow.owedTo(ZERO_ADDRESS, renter) == PRICE


def test_create_job_with_token_pulls_the_price(escrow, stablecoin, active_provider, renter):
    stablecoin.mint(renter, 1_000_000, {"from": renter})
    stablecoin.approve(escrow, 1_000_000, {"from": renter})
    tx = escrow.createJobWithToken(active_provider, stablecoin, SPEC, 250_000, _deadline(), {"from": renter})
    assert tx.events["JobCreated"]["token"] == stablecoin
    assert job_view(escrow, tx.return_value)["token"] == stablecoin
    assert stablecoin.balanceOf(escrow) == 250_000
    assert stablecoin.balanceOf(renter) == 750_000


def test_create_job_with_token_reverts_without_allowance(escrow, stablecoin, active_provider, renter, custom_error):
    stablecoin.mint(renter, 1_000_000, {"from": renter})
    with brownie.reverts(custom_error("ERC20InsufficientAllowance", escrow, 0, 250_000)):
        escrow.createJobWithToken(active_provider, stablecoin, SPEC, 250_000, _deadline(), {"from": renter})


def test_create_job_with_token_reverts_on_zero_token(escrow, active_provider, renter, custom_error):
    with brownie.reverts(custom_error("JobEscrowZeroToken")):
        escrow.createJobWithToken(active_provider, ZERO_ADDRESS, SPEC, 1, _deadline(), {"from": renter})


def test_create_job_with_token_reverts_on_price_beyond_max_price(
    escrow, stablecoin, active_provider, renter, custom_error
):
    assert escrow.MAX_PRICE() == 2**80 - 1
    with brownie.reverts(custom_error("JobEscrowPriceTooLarge", 2**80)):
        escrow.createJobWithToken(active_provider, stablecoin, SPEC, 2**80, _deadline(), {"from": renter})


# --- commit -----------------------------------------------------------------------------------


def test_commit_result_records_root_and_opens_window(escrow, accepted, active_provider):
    tx = escrow.commitResult(job_of(escrow, accepted), ROOT, ITEMS, DIGEST, {"from": active_provider})
    window_end = tx.timestamp + CHALLENGE_WINDOW
    assert tx.events["ResultCommitted"] == {
        "jobId": accepted,
        "outputRoot": "0x" + ROOT.hex(),
        "itemCount": ITEMS,
        "resultDigest": "0x" + DIGEST.hex(),
        "challengeWindowEnd": window_end,
    }
    job = job_view(escrow, accepted)
    assert job["status"] == JobStatus.COMMITTED
    assert (job["committedAt"], job["challengeWindowEnd"]) == (tx.timestamp, window_end)
    assert (job["outputRoot"], job["itemCount"], job["resultDigest"]) == ("0x" + ROOT.hex(), ITEMS, "0x" + DIGEST.hex())


def test_provider_cannot_commit_for_someone_elses_job(
    escrow, register_provider, provider2, accepted, custom_error
):
    """Attack: another active provider commits a result to a job it was not hired for."""
    register_provider(provider2)
    with brownie.reverts(custom_error("JobEscrowNotProvider", provider2)):
        escrow.commitResult(job_of(escrow, accepted), ROOT, ITEMS, DIGEST, {"from": provider2})


def test_commit_result_accepts_a_funded_job_implicitly(escrow, staking, job_id, active_provider):
    tx = escrow.commitResult(job_of(escrow, job_id), ROOT, ITEMS, DIGEST, {"from": active_provider})
    assert "JobAccepted" not in tx.events  # the commit is the acceptance
    # The escrow counts the open job itself (no per-job write to Staking), and Staking adds it.
    assert "StakeLocked" not in tx.events
    assert escrow.lockedWorkOf(active_provider) == 1 and staking.openWorkOf(active_provider) == 1
    job = job_view(escrow, job_id)
    assert job["status"] == JobStatus.COMMITTED and job["committedAt"] == tx.timestamp


def test_implicit_accept_requires_the_minimum_stake(escrow, staking, job_id, active_provider, slasher, custom_error):
    staking.slash(active_provider, 1, ZERO_ADDRESS, {"from": slasher})
    with brownie.reverts(custom_error("StakingBelowMinimum", active_provider, ETHER - 1, ETHER)):
        escrow.commitResult(job_of(escrow, job_id), ROOT, ITEMS, DIGEST, {"from": active_provider})


def test_commit_result_reverts_on_a_cancelled_job(escrow, job_id, renter, active_provider, custom_error):
    cancel_job(escrow, job_id, renter)
    with brownie.reverts(custom_error("JobEscrowWrongStatus", job_id, JobStatus.REFUNDED)):
        escrow.commitResult(job_of(escrow, job_id), ROOT, ITEMS, DIGEST, {"from": active_provider})


def test_commit_result_reverts_twice(escrow, committed, active_provider, custom_error):
    with brownie.reverts(custom_error("JobEscrowWrongStatus", committed, JobStatus.COMMITTED)):
        escrow.commitResult(job_of(escrow, committed), ROOT, ITEMS, DIGEST, {"from": active_provider})


def test_commit_result_reverts_after_deadline(escrow, accepted, active_provider, custom_error):
    deadline = job_view(escrow, accepted)["deadline"]
    _sleep_past_deadline()
    with brownie.reverts(custom_error("JobEscrowDeadlinePassed", accepted, deadline)):
        escrow.commitResult(job_of(escrow, accepted), ROOT, ITEMS, DIGEST, {"from": active_provider})


@pytest.mark.parametrize("root, items", [(bytes(32), ITEMS), (ROOT, 0)])
def test_commit_result_reverts_on_empty_result(escrow, accepted, active_provider, root, items, custom_error):
    with brownie.reverts(custom_error("JobEscrowEmptyResult")):
        escrow.commitResult(job_of(escrow, accepted), root, items, DIGEST, {"from": active_provider})


def test_commit_result_reverts_on_item_count_beyond_max(escrow, accepted, active_provider, custom_error):
    assert escrow.MAX_ITEM_COUNT() == 2**32 - 1
    with brownie.reverts(custom_error("JobEscrowItemCountTooLarge", 2**32)):
        escrow.commitResult(job_of(escrow, accepted), ROOT, 2**32, DIGEST, {"from": active_provider})
    escrow.commitResult(job_of(escrow, accepted), ROOT, 2**32 - 1, DIGEST, {"from": active_provider})
    assert job_view(escrow, accepted)["itemCount"] == 2**32 - 1


# --- finalize ---------------------------------------------------------------------------------


def test_finalize_after_window_credits_provider_and_fee(escrow, committed, active_provider, treasury, stranger):
    chain.sleep(CHALLENGE_WINDOW)
    tx = escrow.finalize(job_of(escrow, committed), {"from": stranger})
    assert tx.events["JobFinalized"] == {
        "jobId": committed,
        "provider": active_provider,
        "providerAmount": PRICE - FEE,
        "fee": FEE,
    }
    assert _status(escrow, committed) == JobStatus.FINALIZED
    assert escrow.owedTo(ZERO_ADDRESS, active_provider) == PRICE - FEE
    assert escrow.owedTo(ZERO_ADDRESS, treasury) == FEE


def test_finalize_reverts_inside_window(escrow, committed, stranger, custom_error):
    window_end = job_view(escrow, committed)["challengeWindowEnd"]
    with brownie.reverts(custom_error("JobEscrowWindowOpen", committed, window_end)):
        escrow.finalize(job_of(escrow, committed), {"from": stranger})


def test_finalize_reverts_before_commit(escrow, accepted, stranger, custom_error):
    with brownie.reverts(custom_error("JobEscrowWrongStatus", accepted, JobStatus.FUNDED)):
        escrow.finalize(job_of(escrow, accepted), {"from": stranger})


def test_finalize_reverts_while_dispute_open(escrow, committed, disputer, active_provider, custom_error):
    """Attack: the provider tries to collect while a challenge holds the escrow."""
    escrow.freeze(job_of(escrow, committed), {"from": disputer})
    chain.sleep(CHALLENGE_WINDOW * 3)
    with brownie.reverts(custom_error("JobEscrowFrozen", committed)):
        escrow.finalize(job_of(escrow, committed), {"from": active_provider})


def test_second_finalize_pays_nothing_more(escrow, committed, active_provider, custom_error):
    """Attack: finalize the same job twice to be credited twice."""
    chain.sleep(CHALLENGE_WINDOW)
    escrow.finalize(job_of(escrow, committed), {"from": active_provider})
    with brownie.reverts(custom_error("JobEscrowWrongStatus", committed, JobStatus.FINALIZED)):
        escrow.finalize(job_of(escrow, committed), {"from": active_provider})
    assert escrow.owedTo(ZERO_ADDRESS, active_provider) == PRICE - FEE


# --- refunds ----------------------------------------------------------------------------------


def test_refund_expired_credits_renter_in_full(escrow, job_id, active_provider, renter, stranger):
    _sleep_past_deadline()
    tx = escrow.refundExpired(job_of(escrow, job_id), {"from": stranger})
    assert tx.events["JobExpired"] == {"jobId": job_id, "renter": renter, "refund": PRICE}
    assert _status(escrow, job_id) == JobStatus.REFUNDED
    assert escrow.owedTo(ZERO_ADDRESS, renter) == PRICE


def test_refund_expired_reverts_before_deadline(escrow, job_id, stranger, custom_error):
    deadline = job_view(escrow, job_id)["deadline"]
    with brownie.reverts(custom_error("JobEscrowDeadlineNotPassed", job_id, deadline)):
        escrow.refundExpired(job_of(escrow, job_id), {"from": stranger})


def test_refund_after_commit_is_refused(escrow, committed, renter, custom_error):
    """Attack: the renter waits past the deadline and claims a refund for a delivered job."""
    chain.sleep(3 * DAY)
    with brownie.reverts(custom_error("JobEscrowWrongStatus", committed, JobStatus.COMMITTED)):
        escrow.refundExpired(job_of(escrow, committed), {"from": renter})


def test_cancel_by_renter_refunds_an_uncommitted_job_after_the_grace(escrow, job_id, renter, custom_error):
    tx = escrow.requestCancel(job_of(escrow, job_id), {"from": renter})
    cancellable_at = tx.timestamp + CANCEL_GRACE
    assert tx.events["JobCancelRequested"] == {"jobId": job_id, "renter": renter, "cancellableAt": cancellable_at}
    view = job_view(escrow, job_id)
    assert (view["status"], view["cancellableAt"], view["challengeWindowEnd"]) == (JobStatus.FUNDED, cancellable_at, 0)
    with brownie.reverts(custom_error("JobEscrowCancelAlreadyRequested", job_id, cancellable_at)):
        escrow.requestCancel(job_of(escrow, job_id), {"from": renter})
    chain.sleep(CANCEL_GRACE)
    tx = escrow.cancel(job_of(escrow, job_id), {"from": renter})
    assert tx.events["JobCancelled"] == {"jobId": job_id, "renter": renter, "refund": PRICE}
    assert _status(escrow, job_id) == JobStatus.REFUNDED
    assert escrow.owedTo(ZERO_ADDRESS, renter) == PRICE


def test_cancel_without_a_request_reverts(escrow, job_id, renter, custom_error):
    with brownie.reverts(custom_error("JobEscrowCancelNotRequested", job_id)):
        escrow.cancel(job_of(escrow, job_id), {"from": renter})


def test_cancel_after_a_signed_result_cannot_take_the_work_free(escrow, job_id, renter, active_provider, custom_error):
    """Attack: the renter has the provider's signed result (served before the batched commit)
    and cancels at once to get the work and its money back. The cancel must wait out the grace,
    the provider's commit in the grace voids the request, and the provider is paid."""
    tx = escrow.requestCancel(job_of(escrow, job_id), {"from": renter})
    cancellable_at = tx.timestamp + CANCEL_GRACE
    with brownie.reverts(custom_error("JobEscrowCancelTooEarly", job_id, cancellable_at)):
        escrow.cancel(job_of(escrow, job_id), {"from": renter})
    chain.sleep(CANCEL_GRACE // 2)
    escrow.commitResult(job_of(escrow, job_id), ROOT, ITEMS, DIGEST, {"from": active_provider})
    assert job_view(escrow, job_id)["cancellableAt"] == 0  # the request is void
    chain.sleep(CANCEL_GRACE)
    with brownie.reverts(custom_error("JobEscrowWrongStatus", job_id, JobStatus.COMMITTED)):
        escrow.cancel(job_of(escrow, job_id), {"from": renter})
    with brownie.reverts(custom_error("JobEscrowWrongStatus", job_id, JobStatus.COMMITTED)):
        escrow.requestCancel(job_of(escrow, job_id), {"from": renter})
    chain.sleep(CHALLENGE_WINDOW)
    escrow.finalize(job_of(escrow, job_id), {"from": renter})
    assert escrow.owedTo(ZERO_ADDRESS, renter) == 0
    assert escrow.owedTo(ZERO_ADDRESS, active_provider) == PRICE - PRICE * PROTOCOL_FEE_BPS // 10_000


def test_request_cancel_reverts_for_other_caller_and_after_the_deadline(escrow, job_id, renter, active_provider,
                                                                       custom_error):
    with brownie.reverts(custom_error("JobEscrowNotRenter", active_provider)):
        escrow.requestCancel(job_of(escrow, job_id), {"from": active_provider})
    deadline = job_view(escrow, job_id)["deadline"]
    chain.sleep(deadline - chain.time() + 1)
    with brownie.reverts(custom_error("JobEscrowDeadlinePassed", job_id, deadline)):
        escrow.requestCancel(job_of(escrow, job_id), {"from": renter})


def test_cancel_reverts_for_other_caller(escrow, job_id, renter, active_provider, custom_error):
    escrow.requestCancel(job_of(escrow, job_id), {"from": renter})
    chain.sleep(CANCEL_GRACE)
    with brownie.reverts(custom_error("JobEscrowNotRenter", active_provider)):
        escrow.cancel(job_of(escrow, job_id), {"from": active_provider})


def test_cancelled_job_cannot_also_expire(escrow, job_id, renter, custom_error):
    cancel_job(escrow, job_id, renter)
    chain.sleep(3 * DAY)
    with brownie.reverts(custom_error("JobEscrowWrongStatus", job_id, JobStatus.REFUNDED)):
        escrow.refundExpired(job_of(escrow, job_id), {"from": renter})
    assert escrow.owedTo(ZERO_ADDRESS, renter) == PRICE


# --- freeze -----------------------------------------------------------------------------------


def test_freeze_marks_committed_job_frozen(escrow, committed, disputer):
    tx = escrow.freeze(job_of(escrow, committed), {"from": disputer})
    assert tx.events["JobFrozen"] == {"jobId": committed, "by": disputer}
    assert job_view(escrow, committed)["frozen"] is True


def test_freeze_reverts_without_dispute_role(escrow, committed, renter, custom_error):
    with brownie.reverts(custom_error("AccessControlUnauthorizedAccount", renter, escrow.DISPUTE_ROLE())):
        escrow.freeze(job_of(escrow, committed), {"from": renter})


def test_freeze_reverts_before_commit(escrow, accepted, disputer, custom_error):
    with brownie.reverts(custom_error("JobEscrowWrongStatus", accepted, JobStatus.FUNDED)):
        escrow.freeze(job_of(escrow, accepted), {"from": disputer})


def test_freeze_reverts_after_window(escrow, committed, disputer, custom_error):
    window_end = job_view(escrow, committed)["challengeWindowEnd"]
    chain.sleep(CHALLENGE_WINDOW)
    with brownie.reverts(custom_error("JobEscrowWindowClosed", committed, window_end)):
        escrow.freeze(job_of(escrow, committed), {"from": disputer})


def test_freeze_reverts_when_already_frozen(escrow, committed, disputer, custom_error):
    escrow.freeze(job_of(escrow, committed), {"from": disputer})
    with brownie.reverts(custom_error("JobEscrowFrozen", committed)):
        escrow.freeze(job_of(escrow, committed), {"from": disputer})


def test_resolve_freeze_with_provider_at_fault_refunds_renter(escrow, committed, disputer, renter, custom_error):
    escrow.freeze(job_of(escrow, committed), {"from": disputer})
    tx = escrow.resolveFreeze(committed, True, {"from": disputer})
    assert tx.events["JobUnfrozen"] == {"jobId": committed, "providerAtFault": True, "renterRefund": PRICE}
    job = job_view(escrow, committed)
    assert (job["status"], job["frozen"]) == (JobStatus.REFUNDED, False)
    assert escrow.owedTo(ZERO_ADDRESS, renter) == PRICE
    chain.sleep(CHALLENGE_WINDOW)
    with brownie.reverts(custom_error("JobEscrowWrongStatus", committed, JobStatus.REFUNDED)):
        escrow.finalize(job_of(escrow, committed), {"from": renter})


def test_resolve_freeze_in_providers_favour_allows_finalize_after_window(
    escrow, committed, disputer, active_provider, custom_error
):
    escrow.freeze(job_of(escrow, committed), {"from": disputer})
    tx = escrow.resolveFreeze(committed, False, {"from": disputer})
    assert tx.events["JobUnfrozen"] == {"jobId": committed, "providerAtFault": False, "renterRefund": 0}
    window_end = job_view(escrow, committed)["challengeWindowEnd"]
    with brownie.reverts(custom_error("JobEscrowWindowOpen", committed, window_end)):
        escrow.finalize(job_of(escrow, committed), {"from": active_provider})
    chain.sleep(CHALLENGE_WINDOW)
    escrow.finalize(job_of(escrow, committed), {"from": active_provider})
    assert _status(escrow, committed) == JobStatus.FINALIZED


def test_resolve_freeze_after_window_allows_finalize_at_once(escrow, committed, disputer, active_provider):
    escrow.freeze(job_of(escrow, committed), {"from": disputer})
    chain.sleep(CHALLENGE_WINDOW * 2)
    escrow.resolveFreeze(committed, False, {"from": disputer})
    escrow.finalize(job_of(escrow, committed), {"from": active_provider})
    assert escrow.owedTo(ZERO_ADDRESS, active_provider) == PRICE - FEE


def test_resolve_freeze_reverts_when_not_frozen(escrow, committed, disputer, custom_error):
    with brownie.reverts(custom_error("JobEscrowNotFrozen", committed)):
        escrow.resolveFreeze(committed, True, {"from": disputer})


def test_resolve_freeze_reverts_without_dispute_role(escrow, committed, disputer, renter, custom_error):
    escrow.freeze(job_of(escrow, committed), {"from": disputer})
    with brownie.reverts(custom_error("AccessControlUnauthorizedAccount", renter, escrow.DISPUTE_ROLE())):
        escrow.resolveFreeze(committed, True, {"from": renter})


# --- withdraw ---------------------------------------------------------------------------------


def test_withdraw_pays_eth_once(escrow, job_id, renter, custom_error):
    cancel_job(escrow, job_id, renter)
    before = renter.balance()
    tx = escrow.withdraw(ZERO_ADDRESS, {"from": renter})
    assert tx.events["Withdrawn"] == {"token": ZERO_ADDRESS, "account": renter, "amount": PRICE}
    assert renter.balance() == before + PRICE
    assert escrow.balance() == 0
    with brownie.reverts(custom_error("JobEscrowNothingOwed", ZERO_ADDRESS, renter)):
        escrow.withdraw(ZERO_ADDRESS, {"from": renter})


def test_a_withdrawn_balance_is_credited_again_in_full(escrow, create, active_provider, renter, custom_error):
    """A withdrawal keeps the balance slot live (a flag stays set): owedTo still reads zero, a
    second withdraw still finds nothing, and the next credit adds up from zero."""
    for _ in range(2):
        job_id = create()
        escrow.commitResult(job_of(escrow, job_id), ROOT, ITEMS, DIGEST, {"from": active_provider})
        chain.sleep(CHALLENGE_WINDOW)
        escrow.finalize(job_of(escrow, job_id), {"from": renter})
        payout = PRICE - PRICE * PROTOCOL_FEE_BPS // 10_000
        assert escrow.owedTo(ZERO_ADDRESS, active_provider) == payout
        assert escrow.withdraw(ZERO_ADDRESS, {"from": active_provider}).events["Withdrawn"]["amount"] == payout
        assert escrow.owedTo(ZERO_ADDRESS, active_provider) == 0
        with brownie.reverts(custom_error("JobEscrowNothingOwed", ZERO_ADDRESS, active_provider)):
            escrow.withdraw(ZERO_ADDRESS, {"from": active_provider})


def test_token_job_pays_provider_and_treasury_in_tokens(escrow, stablecoin, active_provider, renter, treasury):
    stablecoin.mint(renter, 1_000_000, {"from": renter})
    stablecoin.approve(escrow, 1_000_000, {"from": renter})
    job = escrow.createJobWithToken(active_provider, stablecoin, SPEC, 1_000_000, _deadline(), {"from": renter})
    job_id = job.return_value
    escrow.commitResult(job_of(escrow, job_id), ROOT, ITEMS, DIGEST, {"from": active_provider})
    chain.sleep(CHALLENGE_WINDOW)
    escrow.finalize(job_of(escrow, job_id), {"from": renter})
    fee = 1_000_000 * PROTOCOL_FEE_BPS // 10_000
    assert escrow.owedTo(ZERO_ADDRESS, active_provider) == 0
    tx = escrow.withdraw(stablecoin, {"from": active_provider})
    assert tx.events["Withdrawn"]["amount"] == 1_000_000 - fee
    escrow.withdraw(stablecoin, {"from": treasury})
    assert stablecoin.balanceOf(active_provider) == 1_000_000 - fee
    assert stablecoin.balanceOf(treasury) == fee
    assert stablecoin.balanceOf(escrow) == 0


def test_withdraw_reentrancy_pays_only_once(escrow, active_provider, create, renter, attacker):
    """Attack: a renter contract re-enters withdraw() from its receive hook to be paid twice."""
    create(price=5 * PRICE, sender=renter)  # other renters' escrow the attacker could drain
    deadline = _deadline()
    data = escrow.createJob.encode_input(active_provider, SPEC, PRICE, deadline)
    job_id = attacker.execute(escrow, data, PRICE, {"value": PRICE}).events["JobCreated"]["jobId"]
    attacker.execute(escrow, escrow.requestCancel.encode_input(job_of(escrow, job_id)), 0)
    chain.sleep(CANCEL_GRACE)
    attacker.execute(escrow, escrow.cancel.encode_input(job_of(escrow, job_id)), 0)
    withdraw = escrow.withdraw.encode_input(ZERO_ADDRESS)
    attacker.arm(escrow, withdraw, 3)
    attacker.execute(escrow, withdraw, 0)
    assert attacker.balance() == PRICE
    assert (attacker.reentryAttempts(), attacker.reentrySuccesses()) == (1, 0)
    assert escrow.balance() == 5 * PRICE


def test_withdraw_reverts_when_receiver_rejects_ether(escrow, active_provider, attacker, custom_error):
    data = escrow.createJob.encode_input(active_provider, SPEC, PRICE, _deadline())
    job_id = attacker.execute(escrow, data, PRICE, {"value": PRICE}).events["JobCreated"]["jobId"]
    attacker.execute(escrow, escrow.requestCancel.encode_input(job_of(escrow, job_id)), 0)
    chain.sleep(CANCEL_GRACE)
    attacker.execute(escrow, escrow.cancel.encode_input(job_of(escrow, job_id)), 0)
    attacker.setRejectPayments(True)
    with brownie.reverts(custom_error("JobEscrowTransferFailed", attacker, PRICE)):
        attacker.execute(escrow, escrow.withdraw.encode_input(ZERO_ADDRESS), 0)


# --- parameters (immutable, bounded) ------------------------------------------------------------


@pytest.mark.parametrize(
    "window, fee, duration, grace, error",
    [
        (0, PROTOCOL_FEE_BPS, WEEK, CANCEL_GRACE, ("JobEscrowInvalidWindow", 0)),
        (WEEK + 1, PROTOCOL_FEE_BPS, WEEK, CANCEL_GRACE, ("JobEscrowInvalidWindow", WEEK + 1)),
        (CHALLENGE_WINDOW, 1_001, WEEK, CANCEL_GRACE, ("JobEscrowInvalidFee", 1_001)),
        (CHALLENGE_WINDOW, PROTOCOL_FEE_BPS, 0, CANCEL_GRACE, ("JobEscrowInvalidMaxDuration", 0)),
        (CHALLENGE_WINDOW, PROTOCOL_FEE_BPS, 30 * DAY + 1, CANCEL_GRACE,
         ("JobEscrowInvalidMaxDuration", 30 * DAY + 1)),
        (CHALLENGE_WINDOW, PROTOCOL_FEE_BPS, WEEK, 0, ("JobEscrowInvalidCancelGrace", 0)),
        (CHALLENGE_WINDOW, PROTOCOL_FEE_BPS, WEEK, DAY + 1, ("JobEscrowInvalidCancelGrace", DAY + 1)),
    ],
)
def test_constructor_rejects_parameters_out_of_bounds(
    JobEscrow, registry, admin, treasury, window, fee, duration, grace, error, custom_error, deploy_revert
):
    reason = deploy_revert(JobEscrow, registry, treasury, window, fee, duration, grace, sender=admin)
    assert reason == custom_error(*error)


def test_constructor_rejects_zero_treasury(JobEscrow, registry, admin, custom_error, deploy_revert):
    reason = deploy_revert(JobEscrow, registry, ZERO_ADDRESS, CHALLENGE_WINDOW, PROTOCOL_FEE_BPS, WEEK, CANCEL_GRACE,
                           sender=admin)
    assert reason == custom_error("JobEscrowZeroAddress")


def test_escrow_reads_stake_rules_from_its_registry(escrow, registry, staking):
    assert escrow.staking() == staking
    assert escrow.minProviderStake() == registry.minProviderStake()
    assert escrow.maxJobDuration() == MAX_JOB_DURATION


def test_deadline_beyond_the_max_job_duration_is_refused(escrow, active_provider, renter):
    """Attack: an unbounded deadline kept a job (and its provider's obligations) open forever."""
    deadline = chain.time() + MAX_JOB_DURATION + 3600
    # JobEscrowDeadlineTooFar(deadline, latest): latest depends on the block's time
    with brownie.reverts(revert_pattern=f"JobEscrowDeadlineTooFar: {deadline}, [0-9]+"):
        escrow.createJob(active_provider, SPEC, PRICE, deadline, {"from": renter, "value": PRICE})
    tx = escrow.createJob(active_provider, SPEC, PRICE, chain.time() + MAX_JOB_DURATION - 60,
                          {"from": renter, "value": PRICE})
    assert tx.events["JobCreated"]["jobId"] == tx.return_value


# --- open work keeps the provider's stake slashable -----------------------------------------------


def test_provider_cannot_unbond_between_commit_and_settlement(escrow, staking, job_id, active_provider, custom_error):
    """Attack: commit a job, unbond everything, let the later slash find nothing. The committed job
    locks the stake: unbonding is refused until the job is paid or refunded."""
    escrow.commitResult(job_of(escrow, job_id), ROOT, ITEMS, DIGEST, {"from": active_provider})
    with brownie.reverts(custom_error("StakingWorkOpen", active_provider, 1)):
        staking.requestUnbond(ETHER, {"from": active_provider})
    chain.sleep(CHALLENGE_WINDOW)
    escrow.finalize(job_of(escrow, job_id), {"from": active_provider})
    assert staking.openWorkOf(active_provider) == 0
    staking.requestUnbond(ETHER, {"from": active_provider})


def test_refund_of_a_committed_job_releases_the_lock(escrow, staking, job_id, active_provider, disputer):
    escrow.commitResult(job_of(escrow, job_id), ROOT, ITEMS, DIGEST, {"from": active_provider})
    escrow.freeze(job_of(escrow, job_id), {"from": disputer})
    escrow.resolveFreeze(job_id, True, {"from": disputer})
    assert _status(escrow, job_id) == JobStatus.REFUNDED
    assert staking.openWorkOf(active_provider) == 0


def test_lock_holds_through_a_dispute_the_provider_wins(escrow, staking, committed, active_provider, disputer):
    escrow.freeze(job_of(escrow, committed), {"from": disputer})
    escrow.resolveFreeze(committed, False, {"from": disputer})
    assert staking.openWorkOf(active_provider) == 1
    chain.sleep(CHALLENGE_WINDOW)
    escrow.finalize(job_of(escrow, committed), {"from": active_provider})
    assert staking.openWorkOf(active_provider) == 0


def test_refund_of_a_funded_job_touches_no_lock(escrow, staking, job_id, active_provider, renter):
    cancel_job(escrow, job_id, renter)
    assert staking.openWorkOf(active_provider) == 0


# --- gas --------------------------------------------------------------------------------------


def test_gas_of_a_job_life(escrow, active_provider, renter, treasury, stranger):
    """Measures (asserts nothing about) the gas of each step of an ETH job's life, the commit
    accepting it implicitly; run with -s."""
    steps = {}
    # Warm the treasury's and provider's balances as on a live deployment with earlier jobs.
    for _ in range(2):
        tx = escrow.createJob(active_provider, SPEC, PRICE, _deadline(), {"from": renter, "value": PRICE})
        steps["create"] = tx.gas_used
        job_id = tx.return_value
        steps["commit"] = escrow.commitResult(job_of(escrow, job_id), ROOT, ITEMS, DIGEST, {"from": active_provider}).gas_used
        chain.sleep(CHALLENGE_WINDOW)
        steps["finalize"] = escrow.finalize(job_of(escrow, job_id), {"from": stranger}).gas_used
        steps["withdraw"] = escrow.withdraw(ZERO_ADDRESS, {"from": active_provider}).gas_used
        print(f"job gas: {steps} total={sum(steps.values())}")
    assert escrow.owedTo(ZERO_ADDRESS, treasury) == 2 * FEE
