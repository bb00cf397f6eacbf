"""`unchained job slash ID`: the renter's remedy with the result its provider signed.

The provider hands the renter an EIP-712 signed result (protocol/job_result.py) before its batched
commit. If its commit then differs from it, or it promised the commit before the deadline
(commitBy) and never made it, JobEscrow.slashSignedResult takes the registry's minimum provider
stake: the caller is credited Staking's reward share, and the job's price goes back to the renter
unless the job was already paid (slash inside the challenge window to prevent that). The signed
result comes from the backend (GET /jobs/{id}/result) and is checked here (it must recover to the
job's provider); whether it slashes is decided from the chain (protocol.job_result.slash_ground)
before anything is sent. Runs in the renter's process with its own key."""

from __future__ import annotations

from web3 import Web3

from renter.client import BackendClient
from renter.errors import RenterError
from renter.wallet import Wallet
from client import blocks
from client.contracts import emitted
from client.escrow_jobs import read_job
from protocol.enums import JobStatus
from protocol.job_result import NotSlashable, slash_ground

__all__ = ["NoSignedResult", "NotSlashable", "slash_job"]


class NoSignedResult(RenterError):
    """The backend holds no signed result of the job: there is nothing to slash with."""


def slash_job(wallet: Wallet, client: BackendClient, job_id: int) -> str:
    """Slashes job `job_id`'s provider with the result it signed, if the escrow allows it now;
    returns what happened. Raises NoSignedResult, NotSlashable (why not, and when it will be),
    JobResultError (a signature that is not the provider's) or a client error."""
    escrow = wallet.contract("JobEscrow")
    state = escrow.functions.jobState(job_id).call()
    if state.status == JobStatus.NONE:
        raise NotSlashable(job_id, "no such job on this chain")
    job = read_job(escrow, job_id, wallet.deployment.contract("JobEscrow").block)
    signed = client.verified_signed_result(job, wallet.escrow_domain(), client.get(f"/jobs/{job_id}/result"))
    if signed is None:
        raise NoSignedResult(f"job {job_id}: its provider delivered no signed result; nothing to slash with "
                             f"(`unchained job refund {job_id}` takes back an unpaid job)")
    committed = (("0x" + job.output_root.hex(), job.item_count, "0x" + job.result_digest.hex())
                 if job.is_committed else None)
    ground = slash_ground(signed.result, deadline=job.deadline, committed=committed, cancelled=state.cancelled,
                          already_slashed=state.resultSlashed, now=blocks.timestamp(wallet.web3))
    receipt = wallet.send(escrow.functions.slashSignedResult(job.as_tuple(), signed.result.as_tuple(),
                                                            bytes.fromhex(signed.signature[2:])))
    event = emitted(escrow, "SignedResultSlashed", receipt)[0]["args"]
    staking = wallet.contract("Staking")
    reward = event["slashed"] * staking.functions.slashRewardBps().call() // 10_000
    refund = event["renterRefund"]
    paid = (f"; the job's price ({Web3.from_wei(refund, 'ether')} ETH) is credited back to its renter in JobEscrow"
            if refund else "; the job's payment had already settled, so no price comes back")
    return (f"job {job_id}: provider {job.provider} slashed {Web3.from_wei(event['slashed'], 'ether')} ETH "
            f"({ground}); your reward {Web3.from_wei(reward, 'ether')} ETH is credited in Staking{paid} "
            f"(tx 0x{bytes(receipt['transactionHash']).hex()}); `unchained withdraw` pays it out")
