"""JobEscrow.failJob: a provider that cannot run a job says so on-chain and the renter is
refunded in full in the same transaction; nobody else can fail a job, and a job that is
committed, settled or frozen cannot be failed (that would take back a delivered result)."""

import brownie
import pytest
from brownie import ZERO_ADDRESS, chain

from protocol.enums import JobStatus
from conftest import DAY, ETHER, cancel_job, job_of, job_view
from test_money_invariants import SETTINGS, EscrowMachine, _attempt

PRICE = ETHER // 10
SPEC = b"\x11" * 32
ROOT = b"\x22" * 32
DIGEST = b"\x33" * 32
REASON = "bad-input: model 0x12 is not a TorchScript archive"


@pytest.fixture
def job_id(escrow, active_provider, renter) -> int:
    tx = escrow.createJob(active_provider, SPEC, PRICE, chain.time() + DAY, {"from": renter, "value": PRICE})
    return tx.return_value


@pytest.fixture
def accepted(job_id) -> int:
    """A funded job its provider has started on (there is no on-chain accept: the commit accepts)."""
    return job_id


def test_fail_job_refunds_the_renter_in_the_same_transaction(escrow, job_id, active_provider, renter):
    held = escrow.balance()
    tx = escrow.failJob(job_of(escrow, job_id), REASON, {"from": active_provider})
    assert tx.events["JobFailed"] == {"jobId": job_id, "provider": active_provider, "reason": REASON, "refund": PRICE}
    assert len(tx.events) == 1  # no stake lock to release: only a commit locks
    assert job_view(escrow, job_id)["status"] == JobStatus.REFUNDED
    assert escrow.owedTo(ZERO_ADDRESS, renter) == PRICE
    assert escrow.owedTo(ZERO_ADDRESS, active_provider) == 0
    assert escrow.balance() == held  # credited, not sent: the renter pulls it with withdraw
    before = renter.balance()
    escrow.withdraw(ZERO_ADDRESS, {"from": renter, "gas_price": 0})
    assert renter.balance() - before == PRICE


def test_fail_job_works_past_the_deadline_too(escrow, accepted, active_provider, renter):
    chain.sleep(2 * DAY)
    escrow.failJob(job_of(escrow, accepted), "timeout: ran past its budget", {"from": active_provider})
    assert escrow.owedTo(ZERO_ADDRESS, renter) == PRICE


@pytest.mark.parametrize("who", ["renter", "stranger", "provider2"])
def test_only_the_jobs_provider_can_fail_it(escrow, job_id, renter, stranger, provider2, custom_error, who):
    """Attack: someone else fails a job to grief the provider (or the renter to get its money
    back after the provider accepted)."""
    caller = {"renter": renter, "stranger": stranger, "provider2": provider2}[who]
    with brownie.reverts(custom_error("JobEscrowNotProvider", caller)):
        escrow.failJob(job_of(escrow, job_id), REASON, {"from": caller})
    assert job_view(escrow, job_id)["status"] == JobStatus.FUNDED


def test_a_committed_job_cannot_be_failed(escrow, accepted, active_provider, renter, custom_error):
    """Attack: a provider that committed a result (and a renter that would like its money back)
    cannot turn a delivered job into a refund."""
    escrow.commitResult(job_of(escrow, accepted), ROOT, 8, DIGEST, {"from": active_provider})
    with brownie.reverts(custom_error("JobEscrowWrongStatus", accepted, JobStatus.COMMITTED)):
        escrow.failJob(job_of(escrow, accepted), REASON, {"from": active_provider})
    assert escrow.owedTo(ZERO_ADDRESS, renter) == 0


def test_a_frozen_job_cannot_be_failed(escrow, accepted, active_provider, disputer, custom_error):
    """A job under challenge is frozen: failing it would bypass the dispute's verdict."""
    escrow.commitResult(job_of(escrow, accepted), ROOT, 8, DIGEST, {"from": active_provider})
    escrow.freeze(job_of(escrow, accepted), {"from": disputer})
    with brownie.reverts(custom_error("JobEscrowWrongStatus", accepted, JobStatus.COMMITTED)):
        escrow.failJob(job_of(escrow, accepted), REASON, {"from": active_provider})
    assert job_view(escrow, accepted)["frozen"] is True


@pytest.mark.parametrize("end", ["cancelled", "failed", "expired"])
def test_a_refunded_job_cannot_be_failed_again(escrow, job_id, active_provider, renter, stranger, custom_error, end):
    """Attack: failing a job twice would credit the renter twice from other jobs' escrow."""
    if end == "cancelled":
        cancel_job(escrow, job_id, renter)
    elif end == "failed":
        escrow.failJob(job_of(escrow, job_id), REASON, {"from": active_provider})
    else:
        chain.sleep(2 * DAY)
        escrow.refundExpired(job_of(escrow, job_id), {"from": stranger})
    with brownie.reverts(custom_error("JobEscrowWrongStatus", job_id, JobStatus.REFUNDED)):
        escrow.failJob(job_of(escrow, job_id), REASON, {"from": active_provider})
    assert escrow.owedTo(ZERO_ADDRESS, renter) == PRICE


def test_a_failed_job_cannot_expire_or_be_cancelled_afterwards(escrow, job_id, active_provider, renter, stranger,
                                                               custom_error):
    escrow.failJob(job_of(escrow, job_id), REASON, {"from": active_provider})
    with brownie.reverts(custom_error("JobEscrowWrongStatus", job_id, JobStatus.REFUNDED)):
        cancel_job(escrow, job_id, renter)
    chain.sleep(2 * DAY)
    with brownie.reverts(custom_error("JobEscrowWrongStatus", job_id, JobStatus.REFUNDED)):
        escrow.refundExpired(job_of(escrow, job_id), {"from": stranger})
    assert escrow.owedTo(ZERO_ADDRESS, renter) == PRICE


def test_unknown_or_altered_job_cannot_be_failed(escrow, job_id, active_provider, custom_error):
    job = job_of(escrow, job_id)
    with brownie.reverts(custom_error("JobEscrowUnknownJob", 77)):
        escrow.failJob((77, *job[1:]), REASON, {"from": active_provider})
    with brownie.reverts(custom_error("JobEscrowJobMismatch", job_id)):  # terms other than the funded ones
        escrow.failJob((*job[:4], PRICE // 2, *job[5:]), REASON, {"from": active_provider})


def test_reason_is_bounded_to_256_bytes(escrow, job_id, active_provider, custom_error):
    """Attack: a provider stuffs the event log with an unbounded reason."""
    escrow.failJob.call(job_of(escrow, job_id), "x" * 256, {"from": active_provider})  # the bound itself passes
    with brownie.reverts(custom_error("JobEscrowReasonTooLong", 257, 256)):
        escrow.failJob(job_of(escrow, job_id), "x" * 257, {"from": active_provider})
    # Bytes, not characters: 86 three-byte characters are 258 bytes.
    with brownie.reverts(custom_error("JobEscrowReasonTooLong", 258, 256)):
        escrow.failJob(job_of(escrow, job_id), "€" * 86, {"from": active_provider})


def test_token_job_failure_refunds_in_the_token(escrow, stablecoin, active_provider, renter, admin):
    stablecoin.mint(renter, PRICE, {"from": admin})
    stablecoin.approve(escrow, PRICE, {"from": renter})
    job = escrow.createJobWithToken(active_provider, stablecoin, SPEC, PRICE, chain.time() + DAY,
                                    {"from": renter}).return_value
    tx = escrow.failJob(job_of(escrow, job), "", {"from": active_provider})
    assert tx.events["JobFailed"]["refund"] == PRICE
    assert escrow.owedTo(stablecoin, renter) == PRICE and escrow.owedTo(ZERO_ADDRESS, renter) == 0


class FailingEscrowMachine(EscrowMachine):
    """The escrow's money invariant (balance == owed + locked, every pull balance as modelled)
    with failJob among the random actions, called by the job's provider or, as an attack, by
    its renter."""

    def rule_fail_job(self, st_pick, st_flag):
        if (picked := self._job(st_pick)) is None:
            return
        job_id, job = picked
        caller = job.provider if st_flag else job.renter
        allowed = job.status == JobStatus.FUNDED and not job.frozen and caller == job.provider
        if _attempt(allowed, self.escrow.failJob, job_of(self.escrow, job_id), "cannot run it", {"from": caller}):
            self._refund(job)


def test_escrow_holds_exactly_what_it_owes_with_failures(
    chain_state_machine, escrow, staking, registry, register_provider, active_provider, provider2, renter, stranger,
    disputer, treasury,
):
    register_provider(provider2)
    chain_state_machine(FailingEscrowMachine, escrow, staking, registry, [active_provider, provider2], [renter, stranger],
                        disputer, treasury, settings=SETTINGS)
