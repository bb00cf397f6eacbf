"""What a renter does to buy a job, in the renter's own process: upload the inputs, pick an
eligible provider from the backend's quotes, store the spec, and fund the escrow from the
renter's wallet. `unchained job submit`, the demo and the load benchmark all go through here."""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from dataclasses import dataclass
from typing import Any

from eth_typing import HexStr
from web3 import Web3

from client.backend_http import ApiError
from renter.client import BackendClient
from renter.errors import RenterError
from renter.wallet import Wallet
from client import blocks
from client.chain import ChainContext
from client.contracts import emitted
from protocol.enums import LeaseStatus
from protocol.escrow_job import EscrowJob
from protocol.execution import DEFAULT_TOLERANCE_PPM
from protocol.job_result import JobResultError, SignedJobResult
from protocol.lease_access import (NO_IMAGE, LeaseAccess, LeaseDomain, LeaseKey, LeaseMessageError, normalize_ssh_key,
                                   sign, typed_hash, verify)
from protocol.merkle import keccak256


@dataclass(frozen=True)
class FundedJob:
    """What `submit_job` paid for: the job as its JobCreated announced it, and the funding
    transaction. A receipt beside the job, not another shape of it."""

    job: EscrowJob
    tx_hash: bytes


MAX_DRY_RUN_ITEMS = 16  # the backend's bound (POST /models/{hash}/check)
MAX_DRY_RUN_SIGNATURES = 4


ITEM_FORMAT = ('an item file is one JSON header line such as {"dtype":"float32","shape":[3,224,224]}, a newline, '
               'then the raw little-endian values (README, "Item files")')


def check_inputs(inputs: Sequence[bytes], batch_size: int,
                 names: Sequence[str] | None = None) -> dict[tuple[tuple[int, ...], str], list[int]]:
    """Every item decodes as an item file (protocol.jobs.encode_output) and the items of each
    batch share one shape and dtype (the provider stacks them); returns the item indices per
    (shape, dtype). Raises RenterError naming the first item at fault (and its file, from
    `names`) and the format expected. Local and free: nothing is uploaded yet."""
    from protocol.jobs import JobSpecError, decode_output  # numpy: `lease status` imports this module too

    signatures: dict[tuple[tuple[int, ...], str], list[int]] = {}
    batch_signature: tuple[tuple[int, ...], str] = ((), "")  # set by item 0, the first batch's start
    for index, data in enumerate(inputs):
        try:
            array = decode_output(data, "the file")
        except JobSpecError as exc:
            named = f" ({names[index]})" if names is not None else ""
            raise RenterError(f"input item {index}{named} is not an item file: {exc}; {ITEM_FORMAT}") from exc
        signature = (tuple(array.shape), str(array.dtype))
        if index % batch_size == 0:
            batch_signature = signature
        elif signature != batch_signature:
            raise RenterError(f"input item {index} has shape {list(signature[0])} {signature[1]}, but its batch "
                               f"(batch size {batch_size}) started with {list(batch_signature[0])} "
                               f"{batch_signature[1]}: items of one batch must match")
        signatures.setdefault(signature, []).append(index)
    return signatures


def dry_run(client: BackendClient, model_hash: str, hashes: Sequence[str],
            signatures: dict[tuple[tuple[int, ...], str], list[int]], batch_size: int) -> None:
    """Runs the first items of each input signature (up to the backend's bound) through the
    model on the backend; raises RenterError with the model's own error when it refuses them."""
    for (shape, dtype), indices in list(signatures.items())[:MAX_DRY_RUN_SIGNATURES]:
        sample = indices[:min(batch_size, MAX_DRY_RUN_ITEMS)]
        verdict = client.check_model(model_hash, [hashes[i] for i in sample])
        if verdict["ok"]:
            continue
        error = _last_line(verdict["error"])
        if verdict["stage"] == "limits":
            raise RenterError(f"the dry run of model {model_hash} did not finish on the backend "
                               f"({error}); nothing was paid (--no-check pays without it)")
        where = f"items {sample[0]}..{sample[-1]}" if len(sample) > 1 else f"item {sample[0]}"
        raise RenterError(f"model {model_hash} cannot run your input {where} (shape {list(shape)} {dtype}): "
                           f"{verdict['stage']} failed: {error}; nothing was paid")


def _last_line(error: str) -> str:
    """A model's error in one line: the exception itself, which ends a (TorchScript) traceback."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def no_provider_message(client: BackendClient, request: dict[str, object], max_price_wei: int) -> str:
    """Why no provider fits, as the backend explains it (POST /quotes/explain)."""
    try:
        why = client.explain_quotes(**request)
    except ApiError:  # an older backend: say what we know
        why = {"fits": False, "message": None}
    if why.get("fits"):  # a provider fits now (state moved between the two calls)
        return "no provider took the quote; try again"
    return str(why.get("message") or f"no verified provider runs the job within {Web3.from_wei(max_price_wei, 'ether')} ETH")


def provider_unfit(client: BackendClient, provider: str) -> str:
    """Why one named provider is not quoted, from its public record."""
    try:
        p = client.get(f"/providers/{provider.lower()}")
    except ApiError as exc:
        return "it is not registered" if exc.status == 404 else str(exc)
    if p.get("why_not"):  # the availability rule's words (protocol.availability)
        return "; ".join(p["why_not"])
    return (f"its price is {Web3.from_wei(int(p['price_per_job_unit']), 'ether')} ETH per item"
            f"{'' if p.get('private_ok') else ', and it does not take private jobs'}")


def submit_job(client: BackendClient, wallet: Wallet, model_hash: str, inputs: Sequence[bytes], max_price_wei: int, *,
               provider: str | None = None, fmt: str | None = None, private: bool = False,
               gpu_classes: Sequence[str] | None = None, batch_size: int = 8, tolerance_ppm: int = DEFAULT_TOLERANCE_PPM,
               deadline_s: int = 3600, on_upload: Callable[[int], object] = lambda _: None,
               check: bool = True, on_sent: Callable[[bytes], object] = lambda _: None,
               names: Sequence[str] | None = None) -> FundedJob:
    """Funds one job over `inputs` (one item each); `provider` None takes the best quote.

    Before any money moves: the model must be in the hub (its format is taken from there), every
    item must decode and match its batch, and, with `check`, the backend dry-runs the first items
    of each input shape through the model. Raises RenterError (unknown model, inputs the model
    refuses, no eligible provider and why, failed transaction) or ApiError (a refused upload).
    `on_sent` gets the funding tx's hash once it is sent; Ctrl-C raises SubmitInterrupted, which
    says whether the job was funded."""
    from protocol.jobs import JobSpec

    if not inputs:
        raise RenterError("a job needs at least one input item")
    try:
        entry = client.model(model_hash)
    except ApiError as exc:
        if exc.status == 404:
            raise RenterError(f"model {model_hash} is not in the hub (or is someone else's private model): "
                               "push it first with `unchained model push FILE`") from exc
        raise
    if fmt is not None and fmt != entry["format"]:
        raise RenterError(f"model {model_hash} is {entry['format']} in the hub, not {fmt}")
    fmt = entry["format"]
    signatures = check_inputs(inputs, batch_size, names)
    hashes = client.upload_inputs(inputs, on_upload)
    if check:
        dry_run(client, model_hash, hashes, signatures, batch_size)
    request = dict(model=model_hash, items=len(inputs), private=private, max_price_wei=str(max_price_wei),
                   gpu_classes=list(gpu_classes) if gpu_classes else None)
    quotes = client.quotes(**request)
    if provider is None:
        if not quotes:
            raise RenterError(f"no provider fits this job: {no_provider_message(client, request, max_price_wei)}")
        chosen = quotes[0]["provider"]
    else:
        match = [q for q in quotes if q["provider"] == provider.lower()]
        if not match:
            raise RenterError(f"provider {provider} is not eligible for this job within "
                               f"{Web3.from_wei(max_price_wei, 'ether')} ETH: {provider_unfit(client, provider)}")
        chosen = provider.lower()
    # The price paid is the provider's on-chain price per item times the items, never the
    # backend's number alone: a backend quoting more (for a provider it sides with) would be paid
    # that much out of the renter's balance, up to --max-price or past it.
    price = wallet.contract("ProviderRegistry").functions.pricePerJobUnitOf(
        Web3.to_checksum_address(chosen)).call() * len(inputs)
    if price > max_price_wei:
        raise RenterError(f"provider {chosen} charges {Web3.from_wei(price, 'ether')} ETH for {len(inputs)} items "
                          f"on-chain, above your maximum {Web3.from_wei(max_price_wei, 'ether')} ETH; nothing was paid")
    deadline = blocks.timestamp(wallet.web3) + deadline_s
    spec = JobSpec(model=model_hash, model_format=fmt, inputs=tuple(hashes), batch_size=batch_size,
                   tolerance_ppm=tolerance_ppm, deadline=deadline, price_wei=price, provider=chosen)
    client.store_spec(spec.canonical())
    escrow = wallet.contract("JobEscrow")
    call = escrow.functions.createJob(Web3.to_checksum_address(chosen), spec.spec_hash, price, deadline)
    tx_hash = None
    try:
        tx_hash = wallet.sender.broadcast(call, price, "createJob")
        on_sent(bytes(tx_hash))
        receipt = wallet.sender.mined(tx_hash, "createJob")
    except KeyboardInterrupt as exc:
        # Ctrl-C must never leave money unaccounted for: say whether anything was paid.
        raise SubmitInterrupted(wallet, tx_hash) from exc
    job = EscrowJob.from_created(emitted(escrow, "JobCreated", receipt)[0]["args"])
    return FundedJob(job, bytes(receipt["transactionHash"]))


class SubmitInterrupted(RenterError):
    """Ctrl-C during `job submit`: the message says whether the job was funded, and how to follow it."""

    exit_code = 130

    def __init__(self, wallet: Wallet, tx_hash: bytes | None) -> None:
        if tx_hash is None:
            super().__init__("interrupted before the funding transaction was sent: nothing was paid")
            return
        shown = "0x" + bytes(tx_hash).hex()
        try:
            receipt = wallet.web3.eth.get_transaction_receipt(HexStr(shown))
        except Exception:  # web3 raises TransactionNotFound while it is pending; any failure: not known yet
            receipt = None
        if receipt is not None and receipt["status"] == 1:
            job_id = emitted(wallet.contract("JobEscrow"), "JobCreated", receipt)[0]["args"]["jobId"]
            super().__init__(f"interrupted, but job {job_id} was funded (tx {shown}): it runs; follow it with "
                             f"`unchained job status {job_id}`")
        elif receipt is not None:
            super().__init__(f"interrupted; the funding tx {shown} reverted: nothing was paid but gas")
        else:
            super().__init__(f"interrupted after the funding tx {shown} was sent: it may still be mined and fund "
                             "the job; `unchained job list` shows the job once it is")


def trusted_root(job: EscrowJob, signed: SignedJobResult | None) -> tuple[bytes, int]:
    """The output root and item count a job's outputs are checked against: the chain's once the
    job is committed, before that the one its provider signed (checked against the chain's
    provider: renter.client.BackendClient.verified_signed_result). Never the backend's word alone:
    a backend that forges a self-consistent result must not get it called verified."""
    if job.is_committed:
        return job.output_root, job.item_count
    if signed is None:
        raise JobResultError(f"job {job.id}: no result yet, neither committed on-chain nor signed by its provider")
    return bytes.fromhex(signed.result.output_root[2:]), signed.result.item_count


def start_lease(wallet: Wallet, provider: str, gpus: int, seconds: int) -> tuple[int, int, bytes]:
    """Pays up front for `gpus` GPUs of `provider` for `seconds`; returns (lease id, cost, tx hash)."""
    leases = wallet.contract("LeaseManager")
    address = Web3.to_checksum_address(provider)
    cost = leases.functions.leaseCost(address, gpus, seconds).call()
    receipt = wallet.send(leases.functions.startLease(address, gpus, seconds), value=cost)
    lease_id = emitted(leases, "LeaseStarted", receipt)[0]["args"]["leaseId"]
    return lease_id, cost, bytes(receipt["transactionHash"])


def lease_domain(chain: ChainContext) -> LeaseDomain:
    return LeaseDomain(chain.deployment.chain_id, chain.contract("LeaseManager").address)


def upload_lease_image(client: BackendClient, image: Path) -> str:
    """Uploads a root file system tarball (POST /lease-images, before anything is paid) and
    returns its content hash, computed here: the hash the renter signs is that of its own bytes,
    whatever the backend answers."""
    data = image.read_bytes()
    digest = "0x" + keccak256(data).hex()
    stored = client.upload_lease_image(data)
    if stored != digest:
        raise RenterError(f"the backend stored {image} as {stored}, but its bytes hash to {digest}")
    return digest


def bind_ssh_key(client: BackendClient, wallet: Wallet, lease_id: int, public_key: str, timeout_s: float = 60,
                 image: str = NO_IMAGE) -> None:
    """Signs (EIP-712 LeaseKey) and hands the lease's SSH public key and image to the backend,
    waiting up to `timeout_s` for the backend to have indexed the lease."""
    key = LeaseKey(lease_id, normalize_ssh_key(public_key), image)
    signature = "0x" + sign(lease_domain(wallet), key, wallet.account.key).hex()
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            client.put(f"/leases/{lease_id}/key", {"sshPublicKey": key.ssh_public_key, "image": key.image,
                                                   "signature": signature})
            return
        except ApiError as exc:
            if exc.status != 404 or time.monotonic() > deadline:
                raise
        time.sleep(0.5)


class LeaseNotDelivered(RenterError):
    """The provider has not handed the lease's machine over (no signed, confirmed connection details)."""


def lease_access(client: BackendClient, chain: ChainContext, lease_id: int) -> LeaseAccess | None:
    """The lease's connection details once the provider signed them (checked against the lease's
    provider on-chain) and offered their hash on-chain; None before that."""
    row = client.get(f"/leases/{lease_id}")
    if not row.get("access") or not row.get("access_signature"):
        return None
    domain = lease_domain(chain)
    leases = chain.contract("LeaseManager")
    provider = leases.functions.getLease(lease_id).call().provider
    try:
        access = LeaseAccess.from_json(row["access"])
        verify(domain, access, bytes.fromhex(row["access_signature"][2:]), provider)
    except (LeaseMessageError, ValueError) as exc:  # ValueError: a signature that is not hex
        raise LeaseNotDelivered(f"lease {lease_id}: the backend relays connection details the provider did not sign "
                                f"({exc})") from exc
    if bytes(leases.functions.deliveryOf(lease_id).call()) != typed_hash(domain, access):
        return None  # signed but not confirmed on-chain (yet): not delivered
    return access


def wait_for_access(client: BackendClient, wallet: Wallet, lease_id: int, timeout_s: float) -> LeaseAccess:
    deadline = time.monotonic() + timeout_s
    while (access := lease_access(client, wallet, lease_id)) is None:
        if time.monotonic() > deadline:
            # The provider may still offer until its delivery deadline; an offer nobody disputes
            # within LeaseManager.CONFIRM_WINDOW counts as delivered, so the renter is told both ways out.
            raise LeaseNotDelivered(f"lease {lease_id}: no connection details from the provider within "
                                    f"{timeout_s:.0f} s; `unchained lease stop {lease_id}` refunds the whole lease "
                                    f"now; if the provider offers later, log in with `unchained lease ssh {lease_id}` "
                                    "(it confirms the delivery) or stop within 5 minutes of the offer "
                                    f"(`unchained lease status {lease_id}` says until when)")
        time.sleep(0.5)
    return access


@dataclass(frozen=True)
class LeaseQuote:
    """A lease as the contract would settle it if ended at `now`."""
    lease_id: int
    active: bool
    offered: bool  # the provider bound its signed connection details' hash on-chain
    confirmed: bool  # the renter confirmed it logged in
    delivered: bool  # it pays the provider: confirmed, or offered and past the confirm window
    seconds_left: int
    earned_if_stopped: int
    refund_if_stopped: int
    full_refund_until: int  # stopping before this (unix time) refunds everything; 0 once delivered

    def delivery_words(self) -> str:
        if self.confirmed:
            return "delivered (you confirmed your login)"
        if self.delivered:
            return "delivered (offered, not disputed within the confirm window)"
        if self.offered:
            return "offered, NOT confirmed"
        return "NOT delivered"


def quote_lease(leases: Any, lease_id: int, now: int) -> LeaseQuote:
    """Mirrors LeaseManager.endLease: the seconds from the provider's offer at the per-second
    rate once delivered (confirmed by the renter, or offered and past its confirm window);
    everything back otherwise."""
    lease = leases.functions.getLease(lease_id).call()
    started, ends, paid = lease.startedAt, lease.endsAt, lease.paid
    if lease.status == LeaseStatus.NONE:
        raise LeaseRefused(f"lease {lease_id} does not exist")
    delivery = leases.functions.getDelivery(lease_id).call()
    offered, confirmed = delivery.accessHash != bytes(32), delivery.confirmedAt != 0
    confirm_deadline = leases.functions.confirmDeadline(lease_id).call() if offered else 0
    delivered = confirmed or (offered and now >= confirm_deadline)
    if lease.status != LeaseStatus.ACTIVE:
        return LeaseQuote(lease_id, False, offered, confirmed, delivered, 0, 0, 0, 0)
    earned = paid * (min(now, ends) - delivery.offeredAt) // (ends - started) if delivered else 0
    full_refund_until = 0 if delivered else confirm_deadline if offered else ends
    return LeaseQuote(lease_id, True, offered, confirmed, delivered, max(0, ends - now), earned, paid - earned,
                      full_refund_until)


class LoginFailed(RenterError):
    """The lease's machine did not let the renter in (host key or SSH key refused, nothing there)."""


def pinned_known_hosts(access: LeaseAccess) -> Path:
    """A known_hosts file holding the host key the lease's machine shows, or LoginFailed when its
    fingerprint is not the one the provider signed (and bound on-chain)."""
    try:
        scanned = subprocess.run(["ssh-keyscan", "-t", "ed25519", "-p", str(access.port), access.host],
                                 capture_output=True, text=True, timeout=30).stdout
    except subprocess.TimeoutExpired:
        scanned = ""
    known = Path(tempfile.mkdtemp()) / "known_hosts"
    known.write_text(scanned)
    printed = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", str(known)], capture_output=True, text=True)
    if access.host_key_fingerprint not in printed.stdout.split():
        raise LoginFailed(f"lease {access.lease_id}: {access.host}:{access.port} shows host key "
                          f"{printed.stdout.strip() or 'none'}, the provider signed {access.host_key_fingerprint}")
    return known


def ssh_argv(access: LeaseAccess, identity: Path, known_hosts: Path, *options: str) -> list[str]:
    """ssh to the lease with `identity`, the host key pinned to `known_hosts`."""
    return ["ssh", *options, "-i", str(identity), "-o", "IdentitiesOnly=yes", "-o", f"UserKnownHostsFile={known_hosts}",
            "-o", "StrictHostKeyChecking=yes", *access.ssh_command()[1:]]


def check_login(access: LeaseAccess, identity: Path, timeout_s: float = 20) -> None:
    """Logs in once (no terminal, no prompt) with the host key pinned; retried for up to
    `timeout_s`; raises LoginFailed with the last reason."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            known = pinned_known_hosts(access)
            done = subprocess.run(ssh_argv(access, identity, known, "-n", "-o", "BatchMode=yes", "-o",
                                           "ConnectTimeout=10") + ["true"],
                                  capture_output=True, text=True, timeout=60)
            if done.returncode != 255:  # 255: ssh itself failed; anything else came from inside
                return
            reason = done.stderr.strip() or "ssh failed"
        except (LoginFailed, subprocess.TimeoutExpired) as exc:
            reason = str(exc)
        if time.monotonic() > deadline:
            raise LoginFailed(f"lease {access.lease_id}: cannot log in to {access.host}:{access.port}: {reason}")
        time.sleep(1)


def confirm_delivery(wallet: Wallet, lease_id: int, access: LeaseAccess) -> bytes | None:
    """Tells the chain the renter logged in to the offered machine (LeaseManager.confirmDelivery,
    the digest of the details it checked); from then on stopping pays the provider the elapsed
    seconds. None when it was confirmed already; else the tx hash."""
    leases = wallet.contract("LeaseManager")
    if leases.functions.getDelivery(lease_id).call().confirmedAt != 0:
        return None
    receipt = wallet.send(leases.functions.confirmDelivery(lease_id, typed_hash(lease_domain(wallet), access)))
    return bytes(receipt["transactionHash"])


def end_lease(wallet: Wallet, lease_id: int) -> tuple[int, int, bytes]:
    """Ends a lease now; returns (provider earned, renter refund, tx hash) in wei."""
    leases = wallet.contract("LeaseManager")
    receipt = wallet.send(leases.functions.endLease(lease_id))
    ended = emitted(leases, "LeaseEnded", receipt)[0]["args"]
    return ended["providerEarned"], ended["renterRefund"], bytes(receipt["transactionHash"])


class LeaseRefused(RenterError):
    """A lease the chain would refuse or the renter cannot pay: the message says what to change."""


def check_lease(wallet: Wallet, provider: str, gpus: int, seconds: int, client: BackendClient | None = None) -> int:
    """The lease's cost in wei, after checking (with views, before anything is signed) what
    startLease would refuse: an unknown address, too many GPUs, too long, more than the balance;
    and with `client`, a provider whose agent stopped sending heartbeats (nobody would hand the
    machine over: job submit refuses such a provider too)."""
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
    cost: int = leases.functions.leaseCost(address, gpus, seconds).call()
    balance = wallet.web3.eth.get_balance(wallet.account.address)
    if cost >= balance:
        raise LeaseRefused(f"insufficient funds: the lease costs {Web3.from_wei(cost, 'ether')} ETH plus gas, "
                           f"{wallet.account.address} holds {Web3.from_wei(balance, 'ether')} ETH; "
                           "lower --gpus or --hours, or fund the account")
    if client is not None:
        try:
            row = client.get(f"/providers/{provider.lower()}")
        except ApiError as exc:
            if exc.status != 404:
                raise
            raise LeaseRefused(f"--provider: {provider} is not a registered provider; nothing was paid") from exc
        # The backend's reasons (a slashed stake, a deactivation, a silent agent); a Proof of GPU
        # is not asked of a lease's provider.
        why = [w for w in row.get("why_not", []) if "Proof of GPU" not in w]
        if why:
            raise LeaseRefused(f"--provider: {provider} is not available: {'; '.join(why)}; nothing was paid, "
                               "pick another provider")
    return cost
