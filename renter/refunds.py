"""`unchained job refund ID`: what the escrow owes a renter for one job, taken with the call the
contract allows now (before the provider commits: a cancel request, then the cancel once its grace
has passed; refundExpired after the deadline), or an exact account of why not yet and from when.
Runs in the renter's process with its own key;
the refund is credited to the renter's pull balance (`unchained withdraw` pays it out)."""

from __future__ import annotations

from datetime import UTC, datetime

from web3 import Web3

from renter.errors import RenterError
from renter.wallet import Wallet
from client import blocks
from client.contracts import emitted
from client.escrow_jobs import read_job
from protocol.enums import JobStatus

ZERO = "0x" + "00" * 20
WITHDRAW_HINT = "`unchained withdraw` pays it out"


class NotRefundable(RenterError):
    """The job owes the caller nothing now; the message says why and, if it will, from when."""


def _amount(wei: int, token: str) -> str:
    return f"{Web3.from_wei(wei, 'ether')} ETH" if int(token, 16) == 0 else f"{wei} units of token {token}"


def _date(unix: int) -> str:
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration(seconds: int) -> str:
    seconds = max(0, seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min {secs} s" if minutes else f"{secs} s"


def refund_job(wallet: Wallet, job_id: int) -> str:
    """Refunds job `job_id` if the escrow allows it now; returns what happened. Raises
    NotRefundable (why not, and when it will be) or a client error (the transaction failed)."""
    escrow = wallet.contract("JobEscrow")
    state = escrow.functions.jobState(job_id).call()
    # endsAt: the challenge window end once committed, when a requested cancel refunds before
    ends_at, status, frozen = state.endsAt, state.status, state.frozen
    if status == JobStatus.NONE:
        raise NotRefundable(f"job {job_id} does not exist on this chain (last job: "
                            f"{escrow.functions.jobCount().call()})")
    job = read_job(escrow, job_id, wallet.deployment.contract("JobEscrow").block)
    renter, provider, token, price, deadline = job.renter, job.provider, job.token, job.price, job.deadline
    me = wallet.account.address
    mine = renter.lower() == me.lower()
    now = blocks.timestamp(wallet.web3)
    if status == JobStatus.REFUNDED:
        owed = escrow.functions.owedTo(token, renter).call()
        where = f"{WITHDRAW_HINT}" if owed else "it has been withdrawn already"
        raise NotRefundable(f"job {job_id} is already refunded: {_amount(price, token)} went to renter {renter}; "
                            f"{where}")
    if status == JobStatus.FINALIZED:
        raise NotRefundable(f"job {job_id} was delivered and paid to provider {provider}: nothing to refund")
    if status == JobStatus.COMMITTED:
        if frozen:
            raise NotRefundable(f"job {job_id} is held by a challenge: it is refunded only if the challenge or "
                                "dispute finds the provider at fault")
        window_end = ends_at
        if now < window_end:
            raise NotRefundable(f"provider {provider} committed a result for job {job_id}: not refundable unless a "
                                f"challenge finds it wrong; challenge it with `unchained job challenge {job_id}` "
                                f"before {_date(window_end)} (in {_duration(window_end - now)})")
        raise NotRefundable(f"provider {provider} committed a result for job {job_id} and its challenge window "
                            f"closed at {_date(window_end)}: it pays the provider, nothing to refund")
    if now >= deadline:
        receipt = wallet.send(escrow.functions.refundExpired(job.as_tuple()))
        refund = emitted(escrow, "JobExpired", receipt)[0]["args"]["refund"]
        to = "you" if mine else f"renter {renter}"
        return (f"job {job_id} passed its deadline {_date(deadline)} without a result: {_amount(refund, token)} "
                f"credited to {to} in JobEscrow (tx 0x{bytes(receipt['transactionHash']).hex()}); {WITHDRAW_HINT}")
    if not mine:
        raise NotRefundable(f"not your job: job {job_id} belongs to renter {renter}, not {me}; only its renter can cancel it, and "
                            f"anyone can refund it to the renter after its deadline {_date(deadline)}")
    # Funded, ours, before the deadline: no result is committed yet. Cancelling takes two steps
    # (the provider may have handed out a signed result it has not committed yet): a request,
    # then, once the grace has passed with no commit, the cancel that refunds.
    if ends_at == 0:
        receipt = wallet.send(escrow.functions.requestCancel(job.as_tuple()))
        at = emitted(escrow, "JobCancelRequested", receipt)[0]["args"]["cancellableAt"]
        return (f"job {job_id}: cancel requested (tx 0x{bytes(receipt['transactionHash']).hex()}); provider "
                f"{provider} may still commit a result until {_date(at)} (in {_duration(at - now)}), which voids "
                f"the request; run `unchained job refund {job_id}` again after that to be refunded")
    if now < ends_at:
        raise NotRefundable(f"job {job_id}: cancel already requested; it can be cancelled from {_date(ends_at)} "
                            f"(in {_duration(ends_at - now)}) unless provider {provider} commits a result first")
    receipt = wallet.send(escrow.functions.cancel(job.as_tuple()))
    refund = emitted(escrow, "JobCancelled", receipt)[0]["args"]["refund"]
    return (f"job {job_id} cancelled before the provider committed a result: {_amount(refund, token)} credited to "
            f"you in JobEscrow (tx 0x{bytes(receipt['transactionHash']).hex()}); {WITHDRAW_HINT}")
