"""What a renter does to buy a job, in the renter's own process: upload the inputs, pick an
eligible provider from the backend's quotes, store the spec, and fund the escrow from the
renter's wallet. `unchained job submit`, the demo and the load benchmark all go through here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from web3 import Web3

from backend.client import BackendClient
from backend.errors import BackendError
from backend.wallet import Wallet
from protocol.jobs import JobSpec


@dataclass(frozen=True)
class FundedJob:
    job_id: int
    provider: str  # lower-case address
    price_wei: int
    spec_hash: bytes
    tx_hash: bytes


def submit_job(client: BackendClient, wallet: Wallet, model_hash: str, inputs: Sequence[bytes], max_price_wei: int, *,
               provider: str | None = None, fmt: str = "torchscript", private: bool = False,
               gpu_classes: Sequence[str] | None = None, batch_size: int = 8, tolerance_ppm: int = 0,
               deadline_s: int = 3600, on_upload: Callable[[int], object] = lambda _: None) -> FundedJob:
    """Funds one job over `inputs` (one item each); `provider` None takes the best quote.
    Raises BackendError (no eligible provider, refused upload, failed transaction)."""
    if not inputs:
        raise BackendError("a job needs at least one input item")
    hashes = []
    for data in inputs:
        hashes.append(client.upload_input(data))
        on_upload(len(data))
    quotes = client.quotes(model=model_hash, items=len(inputs), private=private, max_price_wei=str(max_price_wei),
                           gpu_classes=list(gpu_classes) if gpu_classes else None)
    if provider is None:
        if not quotes:
            raise BackendError(f"no verified provider runs {len(inputs)} items within "
                               f"{Web3.from_wei(max_price_wei, 'ether')} ETH")
        chosen, price = quotes[0]["provider"], int(quotes[0]["price_wei"])
    else:
        match = [q for q in quotes if q["provider"] == provider.lower()]
        if not match:
            raise BackendError(f"provider {provider} is not eligible for this job within "
                               f"{Web3.from_wei(max_price_wei, 'ether')} ETH")
        chosen, price = provider.lower(), int(match[0]["price_wei"])
    deadline = wallet.web3.eth.get_block("latest")["timestamp"] + deadline_s
    spec = JobSpec(model=model_hash, model_format=fmt, inputs=tuple(hashes), batch_size=batch_size,
                   tolerance_ppm=tolerance_ppm, deadline=deadline, price_wei=price, provider=chosen)
    client.store_spec(spec.canonical())
    escrow = wallet.contract("JobEscrow")
    receipt = wallet.send(escrow.functions.createJob(Web3.to_checksum_address(chosen), spec.spec_hash, price, deadline),
                          value=price)
    job_id = escrow.events.JobCreated().process_receipt(receipt)[0]["args"]["jobId"]
    return FundedJob(job_id, chosen, price, spec.spec_hash, bytes(receipt["transactionHash"]))


def start_lease(wallet: Wallet, provider: str, gpus: int, seconds: int) -> tuple[int, int, bytes]:
    """Pays up front for `gpus` GPUs of `provider` for `seconds`; returns (lease id, cost, tx hash)."""
    leases = wallet.contract("LeaseManager")
    address = Web3.to_checksum_address(provider)
    cost = leases.functions.leaseCost(address, gpus, seconds).call()
    receipt = wallet.send(leases.functions.startLease(address, gpus, seconds), value=cost)
    return leases.events.LeaseStarted().process_receipt(receipt)[0]["args"]["leaseId"], cost, bytes(receipt["transactionHash"])


def end_lease(wallet: Wallet, lease_id: int) -> tuple[int, int, bytes]:
    """Ends a lease now; returns (provider earned, renter refund, tx hash) in wei."""
    leases = wallet.contract("LeaseManager")
    receipt = wallet.send(leases.functions.endLease(lease_id))
    ended = leases.events.LeaseEnded().process_receipt(receipt)[0]["args"]
    return ended["providerEarned"], ended["renterRefund"], bytes(receipt["transactionHash"])


class LeaseRefused(BackendError):
    """A lease the chain would refuse or the renter cannot pay: the message says what to change."""


def check_lease(wallet: Wallet, provider: str, gpus: int, seconds: int) -> int:
    """The lease's cost in wei, after checking (with views, before anything is signed) what
    startLease would refuse: an unknown address, too many GPUs, too long, more than the balance."""
    if not Web3.is_address(provider):
        raise LeaseRefused(f"--provider: {provider!r} is not an address (0x and 40 hex digits)")
    leases = wallet.contract("LeaseManager")
    address = Web3.to_checksum_address(provider)
    most = leases.functions.MAX_DURATION().call()
    if seconds > most:
        raise LeaseRefused(f"--hours: at most {most / 3600:g} hours per lease")
    free = leases.functions.availableGpusOf(address).call()
    if gpus > free:
        raise LeaseRefused(f"--gpus: provider {address} has {free} GPU(s) free now, not {gpus}")
    cost = leases.functions.leaseCost(address, gpus, seconds).call()
    balance = wallet.web3.eth.get_balance(wallet.account.address)
    if cost >= balance:
        raise LeaseRefused(f"insufficient funds: the lease costs {Web3.from_wei(cost, 'ether')} ETH plus gas, "
                           f"{wallet.account.address} holds {Web3.from_wei(balance, 'ether')} ETH; "
                           "lower --gpus or --hours, or fund the account")
    return cost
