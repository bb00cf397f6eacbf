"""The provider's chain client: every transaction is signed here with the provider's own key.

The key comes from an eth-account JSON keystore and stays in this process; transactions are
built, signed locally and sent raw, so the node never needs an unlocked account. A revert is
raised as `ChainRevert` carrying the custom error's name and arguments (decoded with every ABI
of the deployment), so logs say `JobEscrowWrongStatus(3, 3)` instead of raw bytes.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any, NewType

from eth_account.signers.local import LocalAccount
from web3 import Web3
from web3.contract import Contract
from web3.exceptions import BlockNotFound, ContractCustomError, ContractLogicError, TimeExhausted
from web3.types import TxReceipt

from protocol.deployments import Deployment, DeploymentFormatError, describe_revert
from protocol.pog.challenge import challenge_indices
from provider_agent import ProviderAgentError

logger = logging.getLogger(__name__)

Wei = NewType("Wei", int)
JobId = NewType("JobId", int)
ChallengeId = NewType("ChallengeId", int)
ZERO_ADDRESS = "0x" + "00" * 20
# Blocks after which a challenge's unstored randomness is stored (or re-anchored) before
# answering: the EVM serves 256 block hashes, and the answer must land while R is readable.
ANCHOR_SAFE_AGE = 128
RECEIPT_TIMEOUT_S = 120.0  # many blocks on any chain; a transaction not mined by then is reported


class ChainError(ProviderAgentError):
    """The chain could not be reached or a deployment is missing or malformed."""


class ChainRevert(ChainError):
    """A transaction (or its gas estimate) reverted; `reason` is the decoded custom error."""

    def __init__(self, what: str, reason: str, tx_hash: str | None = None) -> None:
        super().__init__(f"{what} reverted: {reason}" + (f" (tx {tx_hash})" if tx_hash else ""))
        self.what = what
        self.reason = reason
        self.tx_hash = tx_hash


class ChainTimeout(ChainError):
    """A sent transaction was not mined within the bound; it may still be mined later."""

    def __init__(self, what: str, tx_hash: str, timeout_s: float) -> None:
        super().__init__(f"{what}: tx {tx_hash} not mined within {timeout_s:.0f}s (is the chain producing blocks?)")
        self.what = what
        self.tx_hash = tx_hash


class JobStatus(IntEnum):
    """IJobEscrow.JobStatus, in declaration order."""

    NONE = 0
    FUNDED = 1
    ACCEPTED = 2
    COMMITTED = 3
    FINALIZED = 4
    REFUNDED = 5


@dataclass(frozen=True)
class OnChainJob:
    job_id: JobId
    renter: str
    provider: str
    price: Wei
    spec_hash: bytes
    deadline: int
    challenge_window_end: int
    status: JobStatus
    frozen: bool
    output_root: bytes
    item_count: int


def load_deployment(directory: Path, chain_id: int) -> Deployment:
    """Reads deployments/<chainId>.json (written by `unchained deploy`)."""
    path = directory / f"{chain_id}.json"
    try:
        return Deployment.from_json(json.loads(path.read_text()))
    except OSError as exc:
        raise ChainError(f"no deployment for chain {chain_id}: {path} ({exc.strerror})") from exc
    except (json.JSONDecodeError, DeploymentFormatError) as exc:
        raise ChainError(f"malformed deployment {path}: {exc}") from exc


class ProviderChain:
    """The provider's view of and actions on the contracts, as one signing account."""

    def __init__(self, web3: Web3, account: LocalAccount, deployment: Deployment) -> None:
        self.web3 = web3
        self.account = account
        self.deployment = deployment
        self._contracts: dict[str, Contract] = {}
        # The heartbeat thread and the Celery task both send: a nonce is taken and used under
        # this lock, or both read the same pending count and one replaces the other.
        self._nonce_lock = threading.Lock()

    @classmethod
    def connect(cls, rpc_url: str, account: LocalAccount, deployments_dir: Path) -> "ProviderChain":
        web3 = Web3(Web3.HTTPProvider(rpc_url, request_kwargs={"timeout": 60}))
        try:
            chain_id = web3.eth.chain_id
        except Exception as exc:  # connection refused, DNS, HTTP errors: all mean "no node"
            raise ChainError(f"no JSON-RPC node answers at {rpc_url} ({type(exc).__name__}): "
                             "start one (`unchained up`) or pass --rpc URL") from exc
        return cls(web3, account, load_deployment(deployments_dir, chain_id))

    @property
    def address(self) -> str:
        return self.account.address

    def contract(self, name: str) -> Contract:
        if name not in self._contracts:
            deployed = self.deployment.contract(name)
            self._contracts[name] = self.web3.eth.contract(address=deployed.address, abi=deployed.abi)
        return self._contracts[name]

    # -- sending ---------------------------------------------------------------------------

    def send(self, fn: Any, what: str, value: int = 0) -> TxReceipt:
        """Builds, signs locally and sends `fn`; waits for the receipt and checks its status."""
        with self._nonce_lock:
            try:
                # Estimated on the pending block, where it will run: on the latest block a call
                # reading that block's own hash (a challenge's fresh randomness) would be refused.
                gas = fn.estimate_gas({"from": self.address, "value": value}, block_identifier="pending")
                tx = fn.build_transaction({
                    "from": self.address,
                    "value": value,
                    "gas": gas + gas // 5,
                    "nonce": self.web3.eth.get_transaction_count(self.address, "pending"),
                })
            except ContractCustomError as exc:
                raise ChainRevert(what, describe_revert(self.deployment, exc.data)) from exc
            except ContractLogicError as exc:
                raise ChainRevert(what, str(exc)) from exc
            signed = self.account.sign_transaction(tx)
            tx_hash = self.web3.eth.send_raw_transaction(signed.raw_transaction)
        # Bounded: on a chain with a block time the receipt comes with the next block, not at
        # once, and a node that stopped mining must not hang the job or the heartbeat forever.
        try:
            receipt = self.web3.eth.wait_for_transaction_receipt(tx_hash, timeout=RECEIPT_TIMEOUT_S,
                                                                 poll_latency=0.02)
        except TimeExhausted as exc:
            raise ChainTimeout(what, "0x" + tx_hash.hex().removeprefix("0x"), RECEIPT_TIMEOUT_S) from exc
        if receipt.status != 1:
            raise ChainRevert(what, "status 0", tx_hash.hex())
        logger.info("%s: tx 0x%s in block %s (gas %s) from %s", what, tx_hash.hex().removeprefix("0x"),
                    receipt.blockNumber, receipt.gasUsed, self.address)
        return receipt

    # -- staking and registry --------------------------------------------------------------

    def stake_of(self) -> Wei:
        return Wei(self.contract("Staking").functions.stakeOf(self.address).call())

    def stake(self, amount: Wei) -> TxReceipt:
        return self.send(self.contract("Staking").functions.stake(), f"stake {amount} wei", value=amount)

    def is_registered(self) -> bool:
        return bool(self.contract("ProviderRegistry").functions.isRegistered(self.address).call())

    def is_active(self) -> bool:
        return bool(self.contract("ProviderRegistry").functions.isActive(self.address).call())

    def ensure_registered(self, gpu_model: str, uuid_hashes: list[bytes], price_per_gpu_hour: Wei,
                          price_per_job_unit: Wei, metadata_uri: str, stake: Wei) -> bool:
        """Stakes up to the registry's minimum (or `stake`, whichever is larger) and registers.

        Returns False when already registered (nothing sent), so the agent can call it on
        every start.
        """
        if self.is_registered():
            return False
        registry = self.contract("ProviderRegistry")
        needed = max(stake, registry.functions.minProviderStake().call()) - self.stake_of()
        if needed > 0:
            self.stake(Wei(needed))
        self.send(registry.functions.register(_bytes32(gpu_model), uuid_hashes, price_per_gpu_hour,
                                              price_per_job_unit, metadata_uri), "register")
        return True

    def set_prices(self, price_per_gpu_hour: Wei, price_per_job_unit: Wei) -> TxReceipt:
        return self.send(self.contract("ProviderRegistry").functions.setPrices(
            price_per_gpu_hour, price_per_job_unit), "setPrices")

    def set_metadata_uri(self, uri: str) -> TxReceipt:
        return self.send(self.contract("ProviderRegistry").functions.setMetadataURI(uri), "setMetadataURI")

    def provider_info(self) -> dict[str, Any]:
        p = self.contract("ProviderRegistry").functions.providerOf(self.address).call()
        pog = self.contract("ProviderRegistry").functions.pogStatusOf(self.address).call()
        return {"gpu_model": p[0].rstrip(b"\0").decode(errors="replace"), "price_per_gpu_hour": p[1],
                "price_per_job_unit": p[2], "metadata_uri": p[3], "gpu_count": len(p[4]),
                "registered_at": p[5], "deactivated": p[6],
                "pog_class": pog[1].rstrip(b"\0").decode(errors="replace"), "pog_passed": pog[3]}

    def leave(self) -> TxReceipt:
        """Leaves the market cleanly: deactivates, then starts unbonding the whole stake."""
        if self.is_active():
            self.send(self.contract("ProviderRegistry").functions.deactivate(), "deactivate")
        return self.send(self.contract("Staking").functions.requestUnbond(self.stake_of()), "requestUnbond")

    def withdraw_unbonded(self) -> TxReceipt:
        return self.send(self.contract("Staking").functions.withdrawUnbonded(), "withdrawUnbonded")

    # -- jobs ------------------------------------------------------------------------------

    def job(self, job_id: JobId) -> OnChainJob:
        j = self.contract("JobEscrow").functions.getJob(job_id).call()
        return OnChainJob(job_id=job_id, renter=j[0], provider=j[1], price=Wei(j[3]), spec_hash=j[4],
                          deadline=j[5], challenge_window_end=j[7], status=JobStatus(j[8]), frozen=j[9], output_root=j[10],
                          item_count=j[11])

    def accept_job(self, job_id: JobId) -> TxReceipt:
        return self.send(self.contract("JobEscrow").functions.acceptJob(job_id), f"acceptJob {job_id}")

    def commit_result(self, job_id: JobId, root: bytes, item_count: int, result_digest: bytes) -> TxReceipt:
        return self.send(self.contract("JobEscrow").functions.commitResult(job_id, root, item_count, result_digest),
                         f"commitResult {job_id}")

    def refund_expired(self, job_id: JobId) -> TxReceipt:
        return self.send(self.contract("JobEscrow").functions.refundExpired(job_id), f"refundExpired {job_id}")

    def finalize(self, job_id: JobId) -> TxReceipt:
        return self.send(self.contract("JobEscrow").functions.finalize(job_id), f"finalize {job_id}")

    def now(self) -> int:
        return int(self.web3.eth.get_block("latest")["timestamp"])

    # -- challenges and PoG ----------------------------------------------------------------

    def challenge(self, challenge_id: ChallengeId) -> dict[str, Any]:
        c = self.contract("ChallengeManager").functions.challenge(challenge_id).call()
        return {"anchor_block": c[1], "kind": c[2], "status": c[3], "k": c[4], "provider": c[5], "response_deadline": c[6],
                "gpu_index": c[8], "subject": c[9], "root": c[10], "leaf_count": c[11], "randomness": c[12]}

    def open_challenges(self) -> list[ChallengeId]:
        """Challenges of our roots (PoG rounds and jobs) that still wait for an answer (their
        indices are derivable as soon as the challenge is mined: see challenge_indices)."""
        manager = self.contract("ChallengeManager")
        since = self.deployment.contract("ChallengeManager").block
        found = []
        for event in (manager.events.PogChallenged, manager.events.JobChallenged):
            for log in event.get_logs(from_block=since):
                if log.args.provider.lower() != self.address.lower():
                    continue
                cid = ChallengeId(log.args.challengeId)
                if self.challenge(cid)["status"] == 1:  # Open
                    found.append(cid)
        return sorted(found)

    def settle_answered(self) -> list[ChallengeId]:
        """Settles every challenge of ours that we answered and whose escalation (job) or fraud
        (PoG) window has passed: settle is permissionless, and until somebody calls it the job's
        escrow stays frozen, so the party that is owed the payment (and the bond) calls it."""
        manager = self.contract("ChallengeManager")
        since = self.deployment.contract("ChallengeManager").block
        now = self.now()
        windows = {1: manager.functions.fraudWindow().call(), 2: manager.functions.escalationWindow().call()}
        settled = []
        for event in (manager.events.PogChallenged, manager.events.JobChallenged):
            for log in event.get_logs(from_block=since):
                if log.args.provider.lower() != self.address.lower():
                    continue
                cid = ChallengeId(log.args.challengeId)
                c = manager.functions.challenge(cid).call()
                kind, status, answered_at = c[2], c[3], c[7]
                if status == 2 and now > answered_at + windows.get(kind, 0):  # Answered, window over
                    try:
                        self.send(manager.functions.settle(cid), f"settle challenge {cid}")
                        settled.append(cid)
                    except ProviderAgentError as exc:  # the challenger settled it first: nothing lost
                        logger.info("challenge %s: not settled by us: %s", cid, exc)
        return settled

    def challenge_indices(self, challenge_id: ChallengeId) -> list[int]:
        """The challenged leaf indices, derived here from R = blockhash(anchorBlock), which the
        node serves as soon as the challenge is mined (a view call at the latest block could not
        read it yet). R is stored first (fixRandomness) when its anchor is close to the EVM's
        256-block horizon, and re-anchored by the same call once past it, so that the answer
        sent next is always judged against the indices computed here."""
        c = self.challenge(challenge_id)
        if c["randomness"] == bytes(32) and self.web3.eth.block_number - c["anchor_block"] > ANCHOR_SAFE_AGE:
            self.send(self.contract("ChallengeManager").functions.fixRandomness(challenge_id),
                      f"fixRandomness challenge {challenge_id}")
            c = self.challenge(challenge_id)
        randomness = c["randomness"]
        if randomness == bytes(32):
            randomness = bytes(self.web3.eth.get_block(c["anchor_block"])["hash"])
        return challenge_indices(randomness, c["root"], c["leaf_count"], c["k"])

    def respond(self, challenge_id: ChallengeId, leaves: list[bytes], proofs: list[list[bytes]]) -> TxReceipt:
        return self.send(self.contract("ChallengeManager").functions.respond(challenge_id, leaves, proofs),
                         f"respond to challenge {challenge_id}")

    def pog_round(self, round_id: int) -> dict[str, Any]:
        r = self.contract("ProofOfGpu").functions.round(round_id).call()
        return {"provider": r[0], "request_block": r[1], "n": r[2], "commit_deadline": r[4], "gpu_count": r[6],
                "status": r[7], "seed": r[8], "secret_hash": r[9]}

    def block_hash(self, number: int, wait_s: float = 10.0) -> bytes:
        """Hash of a mined block (the node serves every block's, not only the last 256). Our node
        may be a moment behind the verifier's: polled for up to wait_s."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                return bytes(self.web3.eth.get_block(number)["hash"])
            except BlockNotFound:
                if time.monotonic() > deadline:
                    raise ChainError(f"block {number} not known to our node after {wait_s:.0f} s") from None
                time.sleep(0.2)

    def commit_pog_roots(self, round_id: int, roots: list[bytes]) -> TxReceipt:
        return self.send(self.contract("ProofOfGpu").functions.commitRoots(round_id, roots),
                         f"commitRoots round {round_id}")

    def lease(self, lease_id: int) -> dict[str, Any]:
        """A lease of this provider's GPUs: whether it holds them now, and until when."""
        lease = self.contract("LeaseManager").functions.getLease(lease_id).call()
        return {"renter": lease[0], "ends_at": lease[2], "provider": lease[3], "gpu_count": lease[4],
                "active": lease[5] == 0 and lease[2] > self.now()}

    # -- money -----------------------------------------------------------------------------

    def owed(self) -> dict[str, Wei]:
        """Pull balances waiting for this account, per contract (ETH)."""
        return {
            "JobEscrow": Wei(self.contract("JobEscrow").functions.owedTo(ZERO_ADDRESS, self.address).call()),
            "ChallengeManager": Wei(self.contract("ChallengeManager").functions.owedTo(self.address).call()),
            "LeaseManager": Wei(self.contract("LeaseManager").functions.owedTo(self.address).call()),
            "Staking": Wei(self.contract("Staking").functions.owedTo(self.address).call()),
        }

    def withdraw_all(self) -> Wei:
        """Withdraws every non-zero pull balance; returns the total withdrawn."""
        total = 0
        for name, amount in self.owed().items():
            if not amount:
                continue
            c = self.contract(name)
            fn = c.functions.withdraw(ZERO_ADDRESS) if name == "JobEscrow" else c.functions.withdraw()
            self.send(fn, f"withdraw {amount} wei from {name}")
            total += amount
        return Wei(total)


def _bytes32(text: str) -> bytes:
    return text.encode()[:32].ljust(32, b"\0")
