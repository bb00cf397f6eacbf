"""Slashing with a signed result: a provider that signs a job's result (protocol/job_result.py,
EIP-712 in JobEscrow's domain) and commits something else, or never commits before the
deadline, loses the minimum provider stake; the digest the contract checks is the one Python
computes, and nothing else is slashable."""

import brownie
import pytest
from eth_account import Account as EthAccount
from eth_account.messages import encode_typed_data

from conftest import (CHALLENGE_WINDOW, ETHER, JOB_PRICE, MIN_PROVIDER_STAKE, SLASH_REWARD_BPS, cancel_job, job_of,
                      job_view)
from protocol.job_result import EscrowDomain, JobResult

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
    return (result.job_id, result.output_root, result.item_count, result.result_digest)


def _job(escrow, provider, renter) -> int:
    tx = escrow.createJob(provider, brownie.web3.keccak(text="spec"), JOB_PRICE, brownie.chain.time() + 3600,
                          {"from": renter, "value": JOB_PRICE})
    return tx.events["JobCreated"]["jobId"]


def test_the_contract_digest_is_the_python_digest(escrow, domain):
    for result in (JobResult(1, ROOT, 1, DIGEST), JobResult(2**200, "0x" + "01" * 32, 2**32 - 1, "0x" + "00" * 32)):
        assert bytes(escrow.jobResultDigest(_fields(result))) == result.digest(domain)
    assert escrow.eip712Domain()["name"] == "Unchained JobEscrow"


def test_a_commit_that_differs_from_the_signed_result_is_slashed_once(escrow, staking, signer, renter, domain,
                                                                       custom_error):
    job_id = _job(escrow, signer, renter)
    signed = JobResult(job_id, ROOT, 10, DIGEST)
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
    signed = JobResult(job_id, ROOT, 10, DIGEST)
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
    signed = JobResult(job_id, ROOT, 10, DIGEST)
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
    signed = JobResult(job_id, ROOT, 10, DIGEST)
    signature = _sign(signer, signed, domain)
    cancel_job(escrow, job_id, renter)
    brownie.chain.sleep(job_view(escrow, job_id)["deadline"] - brownie.chain.time() + 1)
    with brownie.reverts(custom_error("JobEscrowJobCancelled", job_id)):
        escrow.slashSignedResult(job_of(escrow, job_id), _fields(signed), signature, {"from": renter})


def test_only_the_job_providers_signature_slashes(accounts, escrow, signer, renter, domain, custom_error):
    job_id = _job(escrow, signer, renter)
    escrow.commitResult(job_of(escrow, job_id), ROOT, 11, DIGEST, {"from": signer})
    signed = JobResult(job_id, ROOT, 10, DIGEST)
    impostor = accounts.add()
    with brownie.reverts(custom_error("JobEscrowNotProviderSignature", job_id, impostor)):
        escrow.slashSignedResult(job_of(escrow, job_id), _fields(signed), _sign(impostor, signed, domain), {"from": renter})
    # A signature over another job's result does not recover the provider for this one.
    other = _sign(signer, JobResult(job_id + 1, ROOT, 10, DIGEST), domain)
    with brownie.reverts():
        escrow.slashSignedResult(job_of(escrow, job_id), _fields(signed), other, {"from": renter})
    with brownie.reverts(custom_error("JobEscrowJobMismatch", job_id + 1)):  # the result of another job
        escrow.slashSignedResult(job_of(escrow, job_id), _fields(JobResult(job_id + 1, ROOT, 10, DIGEST)), other,
                                 {"from": renter})
