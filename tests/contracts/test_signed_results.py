"""Slashing with a signed result: a provider that signs a job's result (protocol/job_result.py,
EIP-712 in JobEscrow's domain) and commits something else, or never commits before the
deadline, loses the minimum provider stake; the digest the contract checks is the one Python
computes, and nothing else is slashable."""

import brownie
import pytest
from eth_account import Account as EthAccount
from eth_account.messages import encode_typed_data

from conftest import (CHALLENGE_WINDOW, ETHER, JOB_PRICE, MAX_JOB_DURATION, MIN_PROVIDER_STAKE, SLASH_REWARD_BPS,
                      UNBONDING_DELAY, cancel_job, job_of, job_view)
from protocol.enums import JobStatus
from protocol.job_result import EscrowDomain, JobResult

ZERO = brownie.ZERO_ADDRESS

ROOT = "0x" + "ab" * 32
DIGEST = "0x" + "cd" * 32


@pytest.fixture(scope="module")
def signer(accounts, admin, register_provider):
    """A registered provider whose private key the test holds (brownie's dev accounts have none)."""
    account = accounts.add()
    admin.transfer(account, 5 * ETHER)
    register_provider(account)
    return account


@pytest.fixture(scope="module")
def domain(escrow) -> EscrowDomain:
    return EscrowDomain(brownie.chain.id, escrow.address)


def _sign(account, result: JobResult, domain: EscrowDomain) -> str:
    message = encode_typed_data(full_message=result.typed_data(domain))
    return "0x" + EthAccount.sign_message(message, account.private_key).signature.hex().removeprefix("0x")


def _fields(result: JobResult) -> tuple:
    return (result.job_id, result.output_root, result.item_count, result.result_digest, result.commit_by)


def _job(escrow, provider, renter) -> int:
    tx = escrow.createJob(provider, brownie.web3.keccak(text="spec"), JOB_PRICE, brownie.chain.time() + 3600,
                          {"from": renter, "value": JOB_PRICE})
    return tx.events["JobCreated"]["jobId"]


def _promise(escrow, job_id: int) -> int:
    """A commitBy with a margin: a minute before the job's deadline (binding)."""
    return job_view(escrow, job_id)["deadline"] - 60


def test_the_contract_digest_is_the_python_digest(escrow, domain):
    for result in (JobResult(1, ROOT, 1, DIGEST, 0),
                   JobResult(2**200, "0x" + "01" * 32, 2**32 - 1, "0x" + "00" * 32, 2**64 - 1)):
        assert bytes(escrow.jobResultDigest(_fields(result))) == result.digest(domain)
    assert escrow.eip712Domain()["name"] == "Unchained JobEscrow"


def test_a_commit_that_differs_from_the_signed_result_is_slashed_once(escrow, staking, signer, renter, domain,
                                                                       custom_error):
    job_id = _job(escrow, signer, renter)
    signed = JobResult(job_id, ROOT, 10, DIGEST, _promise(escrow, job_id))
    signature = _sign(signer, signed, domain)
    escrow.commitResult(job_of(escrow, job_id), ROOT, 11, DIGEST, {"from": signer})  # one item more than it signed
    before = staking.stakeOf(signer)
    tx = escrow.slashSignedResult(job_of(escrow, job_id), _fields(signed), signature, {"from": renter})
    assert tx.events["SignedResultSlashed"]["slashed"] == MIN_PROVIDER_STAKE
    assert tx.events["SignedResultSlashed"]["by"] == renter
    assert staking.stakeOf(signer) == before - MIN_PROVIDER_STAKE
    assert staking.owedTo(renter) == MIN_PROVIDER_STAKE * SLASH_REWARD_BPS // 10_000
    with brownie.reverts(custom_error("JobEscrowResultAlreadySlashed", job_id)):
        escrow.slashSignedResult(job_of(escrow, job_id), _fields(signed), signature, {"from": renter})


def test_a_matching_commit_is_not_slashable_even_after_finalize(escrow, signer, renter, domain, custom_error):
    job_id = _job(escrow, signer, renter)
    signed = JobResult(job_id, ROOT, 10, DIGEST, _promise(escrow, job_id))
    signature = _sign(signer, signed, domain)
    escrow.commitResult(job_of(escrow, job_id), ROOT, 10, DIGEST, {"from": signer})
    with brownie.reverts(custom_error("JobEscrowResultMatchesCommit", job_id)):
        escrow.slashSignedResult(job_of(escrow, job_id), _fields(signed), signature, {"from": renter})
    brownie.chain.sleep(CHALLENGE_WINDOW + 1)
    escrow.finalize(job_of(escrow, job_id), {"from": renter})
    with brownie.reverts(custom_error("JobEscrowResultMatchesCommit", job_id)):
        escrow.slashSignedResult(job_of(escrow, job_id), _fields(signed), signature, {"from": renter})


def test_a_signed_result_never_committed_is_slashable_once_the_deadline_passed(escrow, staking, signer, renter,
                                                                             domain, custom_error):
    job_id = _job(escrow, signer, renter)
    signed = JobResult(job_id, ROOT, 10, DIGEST, _promise(escrow, job_id))
    signature = _sign(signer, signed, domain)
    deadline = job_view(escrow, job_id)["deadline"]
    with brownie.reverts(custom_error("JobEscrowDeadlineNotPassed", job_id, deadline)):
        escrow.slashSignedResult(job_of(escrow, job_id), _fields(signed), signature, {"from": renter})
    brownie.chain.sleep(deadline - brownie.chain.time() + 1)
    escrow.refundExpired(job_of(escrow, job_id), {"from": renter})  # refunded first: still slashable
    before = staking.stakeOf(signer)
    escrow.slashSignedResult(job_of(escrow, job_id), _fields(signed), signature, {"from": renter})
    assert staking.stakeOf(signer) == before - MIN_PROVIDER_STAKE
    assert job_view(escrow, job_id)["status"] == 5  # the escrow's money did not move again


def test_a_cancelled_job_is_not_slashable(escrow, signer, renter, domain, custom_error):
    job_id = _job(escrow, signer, renter)
    signed = JobResult(job_id, ROOT, 10, DIGEST, _promise(escrow, job_id))
    signature = _sign(signer, signed, domain)
    cancel_job(escrow, job_id, renter)
    brownie.chain.sleep(job_view(escrow, job_id)["deadline"] - brownie.chain.time() + 1)
    with brownie.reverts(custom_error("JobEscrowJobCancelled", job_id)):
        escrow.slashSignedResult(job_of(escrow, job_id), _fields(signed), signature, {"from": renter})


def test_only_the_job_providers_signature_slashes(accounts, escrow, signer, renter, domain, custom_error):
    job_id = _job(escrow, signer, renter)
    escrow.commitResult(job_of(escrow, job_id), ROOT, 11, DIGEST, {"from": signer})
    signed = JobResult(job_id, ROOT, 10, DIGEST, _promise(escrow, job_id))
    impostor = accounts.add()
    with brownie.reverts(custom_error("JobEscrowNotProviderSignature", job_id, impostor)):
        escrow.slashSignedResult(job_of(escrow, job_id), _fields(signed), _sign(impostor, signed, domain), {"from": renter})
    # A signature over another job's result does not recover the provider for this one.
    other = _sign(signer, JobResult(job_id + 1, ROOT, 10, DIGEST, 0), domain)
    with brownie.reverts():
        escrow.slashSignedResult(job_of(escrow, job_id), _fields(signed), other, {"from": renter})
    with brownie.reverts(custom_error("JobEscrowJobMismatch", job_id + 1)):  # the result of another job
        escrow.slashSignedResult(job_of(escrow, job_id), _fields(JobResult(job_id + 1, ROOT, 10, DIGEST, 0)), other,
                                 {"from": renter})


# --- Honest parties never lose (issue 32): the signed result binds only what the provider promised ---


def _create(escrow, provider, renter, deadline: int) -> int:
    tx = escrow.createJob(provider, brownie.web3.keccak(text="spec"), JOB_PRICE, deadline,
                          {"from": renter, "value": JOB_PRICE})
    return tx.events["JobCreated"]["jobId"]


def test_a_result_signed_without_a_commit_margin_cannot_slash_a_missing_commit(escrow, staking, signer, renter,
                                                                               domain, custom_error):
    """Attack: the renter funds a job due moments after its funding block; the provider signs and
    delivers, its commit cannot land before the deadline (JobEscrowDeadlinePassed), it refunds the
    renter, and the renter slashed it with its own signature. A result whose commitBy is not before
    the deadline promised no commit: the renter's slash is refused, the stake stays."""
    # Due seconds after a block mined now: a node's clock can run ahead of brownie's (Hardhat keeps
    # the time moved by earlier modules across snapshot reverts), so only a fresh block tells it.
    brownie.chain.mine()
    job_id = _create(escrow, signer, renter, brownie.chain[-1].timestamp + 5)
    deadline = job_view(escrow, job_id)["deadline"]
    signed = JobResult(job_id, ROOT, 10, DIGEST, deadline)  # the provider could not promise a commit in time
    signature = _sign(signer, signed, domain)
    brownie.chain.sleep(deadline - brownie.chain.time() + 1)
    with brownie.reverts(custom_error("JobEscrowDeadlinePassed", job_id, deadline)):
        escrow.commitResult(job_of(escrow, job_id), ROOT, 10, DIGEST, {"from": signer})
    escrow.refundExpired(job_of(escrow, job_id), {"from": signer})
    before = staking.stakeOf(signer)
    with brownie.reverts(custom_error("JobEscrowResultNotBinding", job_id, deadline, deadline)):
        escrow.slashSignedResult(job_of(escrow, job_id), _fields(signed), signature, {"from": renter})
    assert staking.stakeOf(signer) == before == MIN_PROVIDER_STAKE
    # The same result with a one-second margin was a promise: its missing commit is slashable.
    promised = JobResult(job_id, ROOT, 10, DIGEST, deadline - 1)
    escrow.slashSignedResult(job_of(escrow, job_id), _fields(promised), _sign(signer, promised, domain),
                             {"from": renter})
    assert staking.stakeOf(signer) == 0


def test_a_result_without_margin_still_slashes_a_different_commit(escrow, staking, signer, renter, domain):
    job_id = _job(escrow, signer, renter)
    signed = JobResult(job_id, ROOT, 10, DIGEST, 2**64 - 1)
    escrow.commitResult(job_of(escrow, job_id), ROOT, 11, DIGEST, {"from": signer})
    escrow.slashSignedResult(job_of(escrow, job_id), _fields(signed), _sign(signer, signed, domain), {"from": renter})
    assert staking.stakeOf(signer) == 0


def test_a_provider_slashed_for_committing_another_result_is_not_paid(escrow, signer, renter, domain,
                                                                      custom_error):
    """Attack: the provider signs root A, commits root B, is slashed, then finalizes the job and
    is paid anyway. The slash refunds the renter and releases the job's stake lock."""
    job_id = _job(escrow, signer, renter)
    signed = JobResult(job_id, ROOT, 10, DIGEST, _promise(escrow, job_id))
    escrow.commitResult(job_of(escrow, job_id), "0x" + "ee" * 32, 10, DIGEST, {"from": signer})
    owed = escrow.owedTo(ZERO, renter)
    tx = escrow.slashSignedResult(job_of(escrow, job_id), _fields(signed), _sign(signer, signed, domain),
                                  {"from": renter})
    assert tx.events["SignedResultSlashed"]["renterRefund"] == JOB_PRICE
    assert escrow.owedTo(ZERO, renter) == owed + JOB_PRICE
    assert job_view(escrow, job_id)["status"] == JobStatus.REFUNDED
    assert escrow.lockedWorkOf(signer) == 0
    brownie.chain.sleep(CHALLENGE_WINDOW + 1)
    with brownie.reverts(custom_error("JobEscrowWrongStatus", job_id, int(JobStatus.REFUNDED))):
        escrow.finalize(job_of(escrow, job_id), {"from": signer})
    assert escrow.owedTo(ZERO, signer) == 0


@pytest.mark.parametrize("at_fault", [True, False])
def test_a_slash_during_a_challenge_refunds_the_renter_once(escrow, signer, renter, disputer, domain, custom_error,
                                                            at_fault):
    """The job is frozen by a challenge when the renter slashes: refunded then, and the challenge's
    verdict moves no money again (at fault: no second refund; not at fault: still no pay)."""
    job_id = _job(escrow, signer, renter)
    signed = JobResult(job_id, ROOT, 10, DIGEST, _promise(escrow, job_id))
    escrow.commitResult(job_of(escrow, job_id), "0x" + "ee" * 32, 10, DIGEST, {"from": signer})
    escrow.freeze(job_of(escrow, job_id), {"from": disputer})
    owed = escrow.owedTo(ZERO, renter)
    escrow.slashSignedResult(job_of(escrow, job_id), _fields(signed), _sign(signer, signed, domain), {"from": renter})
    tx = escrow.resolveFreeze(job_id, at_fault, {"from": disputer})
    assert tx.events["JobUnfrozen"]["renterRefund"] == 0
    assert escrow.owedTo(ZERO, renter) == owed + JOB_PRICE
    assert escrow.lockedWorkOf(signer) == 0
    brownie.chain.sleep(CHALLENGE_WINDOW + 1)
    with brownie.reverts(custom_error("JobEscrowWrongStatus", job_id, int(JobStatus.REFUNDED))):
        escrow.finalize(job_of(escrow, job_id), {"from": signer})


def test_a_slash_for_a_missing_commit_refunds_the_renter(escrow, signer, renter, domain, custom_error):
    job_id = _job(escrow, signer, renter)
    signed = JobResult(job_id, ROOT, 10, DIGEST, _promise(escrow, job_id))
    brownie.chain.sleep(job_view(escrow, job_id)["deadline"] - brownie.chain.time() + 1)
    owed = escrow.owedTo(ZERO, renter)
    escrow.slashSignedResult(job_of(escrow, job_id), _fields(signed), _sign(signer, signed, domain), {"from": renter})
    assert escrow.owedTo(ZERO, renter) == owed + JOB_PRICE
    with brownie.reverts(custom_error("JobEscrowWrongStatus", job_id, int(JobStatus.REFUNDED))):
        escrow.refundExpired(job_of(escrow, job_id), {"from": renter})


def test_unbonding_after_signing_cannot_escape_the_slash_of_a_missing_commit(escrow, staking, signer, renter, domain,
                                                                             custom_error):
    """Attack: the provider signs with a margin, never commits, and unbonds its whole stake before
    the deadline (no commit, so no stake lock): with a 2-day delay and 7-day jobs it withdrew before
    the deadline and the slash took 0. The unbonding delay covers the longest job plus a challenge
    window (checked at deployment), so the stake is still there for a challenge window after the
    latest deadline."""
    job_id = _create(escrow, signer, renter, brownie.chain.time() + MAX_JOB_DURATION - 60)
    deadline = job_view(escrow, job_id)["deadline"]
    signed = JobResult(job_id, ROOT, 10, DIGEST, deadline - 60)
    signature = _sign(signer, signed, domain)
    staking.requestUnbond(MIN_PROVIDER_STAKE, {"from": signer})
    brownie.chain.sleep(deadline + CHALLENGE_WINDOW - 120 - brownie.chain.time())
    with brownie.reverts(revert_pattern="StakingStillUnbonding: .*"):
        staking.withdrawUnbonded({"from": signer})
    tx = escrow.slashSignedResult(job_of(escrow, job_id), _fields(signed), signature, {"from": renter})
    assert tx.events["SignedResultSlashed"]["slashed"] == MIN_PROVIDER_STAKE
    assert staking.unbondingOf(signer)["amount"] == 0


def test_jobs_are_refused_for_a_provider_that_is_unbonding_or_below_the_minimum(escrow, staking, signer, renter,
                                                                               slasher, custom_error):
    """Attack: a drained provider (stake below the minimum) or one leaving (unbonding) was still
    funded; its commit was refused, its failJob refunded the renter, who kept a result it never
    paid for. Such a provider is refused at funding."""
    _job(escrow, signer, renter)  # bonded, nothing unbonding: funded
    staking.requestUnbond(1, {"from": signer})
    assert escrow.isProviderActive(signer) and not staking.isBondedFor(signer, MIN_PROVIDER_STAKE)
    with brownie.reverts(custom_error("JobEscrowProviderNotBonded", signer)):
        _job(escrow, signer, renter)
    brownie.chain.sleep(UNBONDING_DELAY)
    staking.withdrawUnbonded({"from": signer})  # no longer unbonding, but one wei under the minimum
    with brownie.reverts(custom_error("JobEscrowProviderNotBonded", signer)):
        _job(escrow, signer, renter)
    staking.stake({"from": signer, "value": 1})
    _job(escrow, signer, renter)
    staking.slash(signer, 1, ZERO, {"from": slasher})  # drained by a slash elsewhere
    with brownie.reverts(custom_error("JobEscrowProviderNotBonded", signer)):
        _job(escrow, signer, renter)


def test_the_escrow_refuses_an_unbonding_delay_shorter_than_a_job_and_its_slash_window(
        JobEscrow, registry, admin, treasury, custom_error, deploy_revert):
    longest = UNBONDING_DELAY - CHALLENGE_WINDOW
    assert deploy_revert(JobEscrow, registry, treasury, CHALLENGE_WINDOW, 0, longest, 60, sender=admin) == ""
    assert deploy_revert(JobEscrow, registry, treasury, CHALLENGE_WINDOW, 0, longest + 1, 60, sender=admin) == (
        custom_error("JobEscrowUnbondingTooShort", UNBONDING_DELAY, UNBONDING_DELAY + 1))


def test_only_staking_tells_the_escrow_a_stake_and_an_inactive_provider_is_read_again_on_activation(
        escrow, staking, registry, signer, renter, stranger, custom_error):
    with brownie.reverts(custom_error("JobEscrowNotStaking", stranger)):
        escrow.stakeChanged(signer, 10 * ETHER, False, {"from": stranger})
    registry.deactivate({"from": signer})
    staking.requestUnbond(1, {"from": signer})  # while inactive: not recorded here, read again below
    registry.reactivate({"from": signer})
    with brownie.reverts(custom_error("JobEscrowProviderNotBonded", signer)):
        _job(escrow, signer, renter)
