"""JobEscrow batches: commitResults and finalizeJobs settle many jobs in one transaction, all or
nothing, with the same checks, credits and stake locks as one job at a time."""

import brownie
import pytest
from brownie import ZERO_ADDRESS, chain

from protocol.enums import JobStatus
from conftest import CHALLENGE_WINDOW, DAY, ETHER, PROTOCOL_FEE_BPS, job_of, job_view

PRICE = ETHER // 10
TOKEN_PRICE = 1_000_000
ROOT = b"\x22" * 32
DIGEST = b"\x33" * 32
ITEMS = 64


def _fee(price: int) -> int:
    return price * PROTOCOL_FEE_BPS // 10_000


@pytest.fixture
def fund(escrow, stablecoin):
    """Funds a job for `provider` from `renter`, in ETH or in the test stablecoin; returns its id."""

    def fund_job(provider, renter, token: bool = False) -> int:
        deadline = chain.time() + 2 * DAY
        if not token:
            return escrow.createJob(provider, ROOT, PRICE, deadline, {"from": renter, "value": PRICE}).return_value
        stablecoin.mint(renter, TOKEN_PRICE, {"from": renter})
        stablecoin.approve(escrow, TOKEN_PRICE, {"from": renter})
        return escrow.createJobWithToken(provider, stablecoin, ROOT, TOKEN_PRICE, deadline, {"from": renter}).return_value

    return fund_job


def _commit_all(escrow, jobs, provider):
    """Commits every job (an id, or a Job tuple as it is) in one batch."""
    n = len(jobs)
    jobs = [job_of(escrow, j) if isinstance(j, int) else j for j in jobs]
    return escrow.commitResults(jobs, [ROOT] * n, [ITEMS] * n, [DIGEST] * n, {"from": provider})


def test_a_batch_mixing_renters_tokens_and_providers_settles_every_job_once(
    escrow, staking, stablecoin, fund, register_provider, active_provider, provider2, renter, stranger, treasury
):
    register_provider(provider2)
    mine = [fund(active_provider, renter), fund(active_provider, stranger, token=True),
            fund(active_provider, stranger), fund(active_provider, renter, token=True)]
    theirs = [fund(provider2, renter), fund(provider2, stranger, token=True)]
    tx = _commit_all(escrow, mine, active_provider)
    assert [e["jobId"] for e in tx.events["ResultCommitted"]] == mine
    # One piece of open work per job (each settles on its own), counted by the escrow in one write.
    assert "StakeLocked" not in tx.events and escrow.lockedWorkOf(active_provider) == len(mine)
    _commit_all(escrow, theirs, provider2)
    assert (staking.openWorkOf(active_provider), staking.openWorkOf(provider2)) == (4, 2)

    chain.sleep(CHALLENGE_WINDOW)
    batch = [mine[0], theirs[0], mine[1], mine[2], theirs[1], mine[3]]
    tx = escrow.finalizeJobs([job_of(escrow, i) for i in batch], {"from": stranger})
    assert [e["jobId"] for e in tx.events["JobFinalized"]] == batch
    assert all(job_view(escrow, i)["status"] == JobStatus.FINALIZED for i in batch)
    assert (staking.openWorkOf(active_provider), staking.openWorkOf(provider2)) == (0, 0)
    owed = {
        (ZERO_ADDRESS, active_provider): 2 * (PRICE - _fee(PRICE)),
        (stablecoin.address, active_provider): 2 * (TOKEN_PRICE - _fee(TOKEN_PRICE)),
        (ZERO_ADDRESS, provider2): PRICE - _fee(PRICE),
        (stablecoin.address, provider2): TOKEN_PRICE - _fee(TOKEN_PRICE),
        (ZERO_ADDRESS, treasury): 3 * _fee(PRICE),
        (stablecoin.address, treasury): 3 * _fee(TOKEN_PRICE),
    }
    assert {key: escrow.owedTo(*key) for key in owed} == owed
    assert escrow.balance() == 3 * PRICE and stablecoin.balanceOf(escrow) == 3 * TOKEN_PRICE
    assert escrow.owedTo(ZERO_ADDRESS, renter) == escrow.owedTo(ZERO_ADDRESS, stranger) == 0


def test_a_bad_id_reverts_the_whole_commit_batch(escrow, staking, fund, active_provider, renter, custom_error):
    first, second = fund(active_provider, renter), fund(active_provider, renter)
    unknown = second + 1
    with brownie.reverts(custom_error("JobEscrowUnknownJob", unknown)):
        _commit_all(escrow, [first, (unknown, *job_of(escrow, second)[1:]), second], active_provider)
    assert job_view(escrow, first)["status"] == JobStatus.FUNDED and staking.openWorkOf(active_provider) == 0


def test_a_commit_batch_cannot_carry_another_providers_job(
    escrow, fund, register_provider, active_provider, provider2, renter, custom_error
):
    """Attack: a provider slips a job it was not hired for into its own batch."""
    register_provider(provider2)
    ids = [fund(active_provider, renter), fund(provider2, renter)]
    with brownie.reverts(custom_error("JobEscrowNotProvider", active_provider)):
        _commit_all(escrow, ids, active_provider)


def test_a_job_in_its_window_or_repeated_reverts_the_whole_finalize_batch(
    escrow, fund, active_provider, renter, stranger, custom_error
):
    early = fund(active_provider, renter)
    _commit_all(escrow, [early], active_provider)
    chain.sleep(CHALLENGE_WINDOW)
    late = fund(active_provider, renter)
    tx = _commit_all(escrow, [late], active_provider)
    window_end = tx.events["ResultCommitted"]["challengeWindowEnd"]
    with brownie.reverts(custom_error("JobEscrowWindowOpen", late, window_end)):
        escrow.finalizeJobs([job_of(escrow, early), job_of(escrow, late)], {"from": stranger})
    with brownie.reverts(custom_error("JobEscrowWrongStatus", early, JobStatus.FINALIZED)):
        escrow.finalizeJobs([job_of(escrow, early), job_of(escrow, early)], {"from": stranger})  # a job is never paid twice
    assert job_view(escrow, early)["status"] == JobStatus.COMMITTED
    escrow.finalizeJobs([job_of(escrow, early)], {"from": stranger})
    assert escrow.owedTo(ZERO_ADDRESS, active_provider) == PRICE - _fee(PRICE)


def test_finalize_batch_reverts_on_a_frozen_job(escrow, fund, active_provider, renter, disputer, custom_error):
    ids = [fund(active_provider, renter), fund(active_provider, renter)]
    _commit_all(escrow, ids, active_provider)
    escrow.freeze(job_of(escrow, ids[1]), {"from": disputer})
    chain.sleep(CHALLENGE_WINDOW)
    with brownie.reverts(custom_error("JobEscrowFrozen", ids[1])):
        escrow.finalizeJobs([job_of(escrow, i) for i in ids], {"from": renter})


@pytest.mark.parametrize("length", [0, 65])
def test_batches_outside_the_bound_are_refused(escrow, active_provider, length, custom_error):
    assert escrow.MAX_BATCH_SIZE() == 64
    jobs = [(i, active_provider, active_provider, ZERO_ADDRESS, 1, ROOT, 1, ROOT, 1, DIGEST) for i in range(length)]
    with brownie.reverts(custom_error("JobEscrowBadBatchSize", length, 64)):
        escrow.finalizeJobs(jobs, {"from": active_provider})
    with brownie.reverts(custom_error("JobEscrowBadBatchSize", length, 64)):
        _commit_all(escrow, jobs, active_provider)


def test_commit_batch_with_unequal_lengths_is_refused(escrow, fund, active_provider, renter, custom_error):
    ids = [fund(active_provider, renter), fund(active_provider, renter)]
    with brownie.reverts(custom_error("JobEscrowBatchLengthMismatch")):
        escrow.commitResults([job_of(escrow, i) for i in ids], [ROOT], [ITEMS, ITEMS], [DIGEST, DIGEST], {"from": active_provider})


def test_batched_jobs_lock_the_stake_until_the_last_one_settles(
    escrow, staking, fund, active_provider, renter, disputer, custom_error
):
    """Attack: commit a batch (one count write for all), then unbond before the jobs settle. Every
    job of the batch is a piece of open work: any unbond is refused until the last one is paid or
    refunded, a frozen one included."""
    jobs = [fund(active_provider, renter) for _ in range(3)]
    _commit_all(escrow, jobs, active_provider)
    assert escrow.lockedWorkOf(active_provider) == 3 and staking.openWorkOf(active_provider) == 3
    with brownie.reverts(custom_error("StakingWorkOpen", active_provider, 3)):
        staking.requestUnbond(1, {"from": active_provider})
    escrow.freeze(job_of(escrow, jobs[2]), {"from": disputer})
    chain.sleep(CHALLENGE_WINDOW)
    escrow.finalizeJobs([job_of(escrow, i) for i in jobs[:2]], {"from": renter})
    assert staking.openWorkOf(active_provider) == 1  # the frozen job still holds the stake
    with brownie.reverts(custom_error("StakingWorkOpen", active_provider, 1)):
        staking.requestUnbond(1, {"from": active_provider})
    escrow.resolveFreeze(jobs[2], True, {"from": disputer})
    assert escrow.lockedWorkOf(active_provider) == 0 and staking.openWorkOf(active_provider) == 0
    staking.requestUnbond(1, {"from": active_provider})


def test_a_batch_commit_below_the_minimum_stake_reverts_whole(
    escrow, staking, fund, active_provider, renter, slasher, custom_error
):
    jobs = [fund(active_provider, renter) for _ in range(2)]
    staking.slash(active_provider, 1, ZERO_ADDRESS, {"from": slasher})
    with brownie.reverts(custom_error("StakingBelowMinimum", active_provider, ETHER - 1, ETHER)):
        _commit_all(escrow, jobs, active_provider)
    assert escrow.lockedWorkOf(active_provider) == 0
    assert all(job_view(escrow, i)["status"] == JobStatus.FUNDED for i in jobs)


def test_finalize_and_withdraw_pays_the_provider_everything_it_is_owed_in_the_same_transaction(
    escrow, staking, stablecoin, fund, active_provider, renter, treasury
):
    earlier = fund(active_provider, renter)
    _commit_all(escrow, [earlier], active_provider)
    chain.sleep(CHALLENGE_WINDOW)
    escrow.finalize(job_of(escrow, earlier), {"from": renter})  # credited, not withdrawn
    jobs = [fund(active_provider, renter), fund(active_provider, renter, token=True), fund(active_provider, renter)]
    _commit_all(escrow, jobs, active_provider)
    chain.sleep(CHALLENGE_WINDOW)
    before = active_provider.balance()

    tx = escrow.finalizeJobsAndWithdraw([job_of(escrow, i) for i in jobs], {"from": active_provider})

    assert [e["jobId"] for e in tx.events["JobFinalized"]] == jobs
    paid = 3 * (PRICE - _fee(PRICE))  # the earlier job's pay with this batch's ETH jobs
    assert dict(tx.events["Withdrawn"]) == {"token": ZERO_ADDRESS, "account": active_provider, "amount": paid}
    assert active_provider.balance() == before + paid  # zero gas price on the test chain
    assert escrow.owedTo(ZERO_ADDRESS, active_provider) == 0
    # The token job's pay stays a pull balance; every job's stake lock is released.
    assert escrow.owedTo(stablecoin, active_provider) == TOKEN_PRICE - _fee(TOKEN_PRICE)
    assert staking.openWorkOf(active_provider) == 0
    assert escrow.owedTo(ZERO_ADDRESS, treasury) == 3 * _fee(PRICE)
    assert escrow.balance() == 3 * _fee(PRICE)


def test_finalize_and_withdraw_by_someone_owed_nothing_finalizes_and_pays_nobody(
    escrow, fund, active_provider, renter, stranger
):
    jobs = [fund(active_provider, renter), fund(active_provider, renter)]
    _commit_all(escrow, jobs, active_provider)
    chain.sleep(CHALLENGE_WINDOW)
    before = stranger.balance()

    tx = escrow.finalizeJobsAndWithdraw([job_of(escrow, i) for i in jobs], {"from": stranger})

    assert len(tx.events["JobFinalized"]) == 2 and "Withdrawn" not in tx.events
    assert stranger.balance() == before
    assert escrow.owedTo(ZERO_ADDRESS, active_provider) == 2 * (PRICE - _fee(PRICE))


def test_finalize_and_withdraw_reverts_whole_when_a_job_cannot_be_finalized(
    escrow, fund, active_provider, renter, custom_error
):
    done, early = fund(active_provider, renter), fund(active_provider, renter)
    _commit_all(escrow, [done], active_provider)
    chain.sleep(CHALLENGE_WINDOW)
    _commit_all(escrow, [early], active_provider)
    escrow.finalize(job_of(escrow, done), {"from": renter})
    owed = escrow.owedTo(ZERO_ADDRESS, active_provider)
    window_end = job_view(escrow, early)["challengeWindowEnd"]

    with brownie.reverts(custom_error("JobEscrowWindowOpen", early, window_end)):
        escrow.finalizeJobsAndWithdraw([job_of(escrow, early)], {"from": active_provider})

    assert escrow.owedTo(ZERO_ADDRESS, active_provider) == owed  # nothing paid out
