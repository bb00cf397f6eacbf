"""The provider's chain client: every transaction is signed here with the provider's own key.

The key comes from an eth-account JSON keystore and stays in this process; transactions go
through the account's one `client.tx.TxSender` (signed here, nonce, fees, bounded receipts). A
revert is raised as the client's `TransactionReverted` carrying the custom error's name and
arguments, so logs say `JobEscrowWrongStatus(3, 3)` instead of raw bytes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from eth_account.signers.local import LocalAccount
from web3 import Web3
from web3.exceptions import BlockNotFound
from web3.types import TxReceipt

from client import blocks, contracts
from client.chain import ChainContext, open_chain
from client.contracts import Struct
from client.errors import ClientError
from client.escrow_jobs import JobNotFound, JobView, read_job, read_job_and_state, view_of
from client.tx import TxSender
from protocol.deployments import Deployment
from protocol.enums import ChallengeKind, ChallengeStatus, LeaseStatus
from protocol.escrow_job import EscrowJob
from protocol.ids import ChallengeId, JobId, LeaseId, RoundId
from protocol.job_result import JobResult
from protocol.lease_access import LeaseDomain
from protocol.pog.challenge import challenge_indices
from protocol.ids import Wei
from provider_agent import ProviderAgentError

logger = logging.getLogger(__name__)

ZERO_ADDRESS = "0x" + "00" * 20


class ChainError(ProviderAgentError):
    """Our node does not know a block the protocol needs (it lags the verifier's)."""


class ProviderChain(ChainContext):
    """The provider's view of and actions on the contracts, as one signing account."""

    def __init__(self, web3: Web3, account: LocalAccount, deployment: Deployment) -> None:
        super().__init__(web3, deployment)
        self.account = account
        self._job_state: contracts.ViewCall | None = None
        self._bonded_for: contracts.ViewCall | None = None
        self._min_stake: int | None = None
        self._challenge_window: int | None = None
        # The heartbeat thread and the Celery task both send: through this one sender, which owns the nonce.
        self.sender = TxSender(web3, account, deployment)

    @classmethod
    def connect(cls, rpc_url: str, account: LocalAccount, deployments_dir: Path,
                deployment_file: Path | None = None) -> "ProviderChain":
        web3, deployment = open_chain(rpc_url, deployment_file=deployment_file, deployments_dir=deployments_dir)
        return cls(web3, account, deployment)

    @property
    def address(self) -> str:
        return self.account.address

    # -- sending ---------------------------------------------------------------------------

    def send(self, fn: Any, what: str, value: int = 0) -> TxReceipt:
        """Sends `fn` from the provider's account and waits for it to be mined (client.tx)."""
        return self.sender.send(fn, value, what)

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
        return {"gpu_model": p.gpuModel.rstrip(b"\0").decode(errors="replace"),
                "price_per_gpu_hour": p.pricePerGpuHour, "price_per_job_unit": p.pricePerJobUnit,
                "metadata_uri": p.metadataURI, "gpu_count": len(p.uuidHashes),
                "registered_at": p.registeredAt, "deactivated": p.deactivated,
                "pog_class": pog.gpuClass.rstrip(b"\0").decode(errors="replace"), "pog_passed": pog.passed}

    def leave(self) -> TxReceipt:
        """Leaves the market cleanly: deactivates, then starts unbonding the whole stake."""
        if self.is_active():
            self.send(self.contract("ProviderRegistry").functions.deactivate(), "deactivate")
        return self.send(self.contract("Staking").functions.requestUnbond(self.stake_of()), "requestUnbond")

    def withdraw_unbonded(self) -> TxReceipt:
        return self.send(self.contract("Staking").functions.withdrawUnbonded(), "withdrawUnbonded")

    # -- jobs ------------------------------------------------------------------------------

    def job(self, job_id: JobId) -> JobView:
        """The job from its events (client.escrow_jobs) and the escrow's slot (status, freeze)."""
        return self._view(*read_job_and_state(self.contract("JobEscrow"), job_id, self._escrow_block))

    def _view(self, job: EscrowJob, state: Struct) -> JobView:
        """The Job with its slot's state; a committed one dated by the escrow's challenge window
        (immutable: read once, at the first committed job, so a dispatch's read stays one trip)."""
        if job.is_committed and self._challenge_window is None:
            self._challenge_window = int(self.contract("JobEscrow").functions.challengeWindow().call())
        return view_of(job, state, self._challenge_window or 0)

    def dispatched_job(self, job: EscrowJob) -> tuple[JobView | None, int, bool]:
        """The job as dispatched, if the escrow's slot vouches for it, the chain's time, and
        whether our stake can back a signed result (Staking.isBondedFor: the minimum bonded,
        nothing unbonding): the slot, the latest block and the stake in one round trip when the
        slot holds this Job's hash (funded, not yet committed: the dispatch's case), else the job
        rebuilt from its events (committed, or not what was dispatched). None: no such job. This
        read runs beside every job's work, so it skips web3's per-call work (ViewCall)."""
        if self._job_state is None:
            self._job_state = contracts.ViewCall(self.contract("JobEscrow"), "jobState")
        if self._bonded_for is None:
            self._bonded_for = contracts.ViewCall(self.contract("Staking"), "isBondedFor")
            self._min_stake = self.contract("JobEscrow").functions.minProviderStake().call()
        state, now, bonded = contracts.read_with(
            self.web3, [self._job_state.request(job.id), ("eth_getBlockByNumber", ["latest", False]),
                        self._bonded_for.request(self.address, self._min_stake)],
            [self._job_state.decode, lambda block: int(block["timestamp"], 16), self._bonded_for.decode])
        if bytes(state.jobHash) == job.job_hash():
            return self._view(job, state), now, bool(bonded)
        try:
            return self.job(JobId(job.id)), now, bool(bonded)
        except JobNotFound:
            return None, now, bool(bonded)

    @property
    def _escrow_block(self) -> int:
        """Where the escrow's events start: no node is asked to scan the blocks before it (many
        refuse ranges that long)."""
        return self.deployment.contract("JobEscrow").block

    def jobs_as_held(self, jobs: Sequence[EscrowJob]) -> list[JobView]:
        """Each job of `jobs` (as this agent holds it: dispatched, and committed with its result)
        with its slot's state: the slots in as few round trips as the node takes, and only a job whose
        slot does not hold its hash (settled otherwise, or not what we hold) rebuilt from its
        events. The committer's check of the jobs it finalizes, which read each job's events."""
        if self._job_state is None:
            self._job_state = contracts.ViewCall(self.contract("JobEscrow"), "jobState")
        states = contracts.read_batched(self.web3, [self._job_state.request(j.id) for j in jobs],
                                        [self._job_state.decode] * len(jobs))
        return [self._view(j, state) if bytes(state.jobHash) == j.job_hash() else self.job(JobId(j.id))
                for j, state in zip(jobs, states)]

    # The batch calls take the jobs as dispatched: JobEscrow keeps only a hash per job and takes
    # its terms back in calldata, so no chain read precedes a commit; a dispatch that differs from
    # JobCreated reverts as a mismatch.
    def commit_results(self, jobs: Sequence[EscrowJob], results: Sequence[JobResult]) -> TxReceipt:
        """One `commitResults` for the batch (all or nothing on-chain; commit accepts the job)."""
        escrow = self.contract("JobEscrow")
        if len(jobs) == 1:  # a lone job: commitResult, without the arrays' encoding (about 2,500 gas less)
            [job], [result] = jobs, results
            return self.send(escrow.functions.commitResult(job.as_tuple(), _raw32(result.output_root),
                                                           result.item_count, _raw32(result.result_digest)),
                             f"commitResult job {job.id}")
        fn = escrow.functions.commitResults([j.as_tuple() for j in jobs],
                                            [_raw32(r.output_root) for r in results],
                                            [r.item_count for r in results],
                                            [_raw32(r.result_digest) for r in results])
        return self.send(fn, f"commitResults {_ids(jobs)}")

    def window_ends(self, receipt: TxReceipt) -> dict[int, int]:
        """Job id -> challenge window end of every ResultCommitted in a mined commit."""
        events = contracts.emitted(self.contract("JobEscrow"), "ResultCommitted", receipt)
        return {e["args"]["jobId"]: e["args"]["challengeWindowEnd"] for e in events}

    def finalize_jobs(self, jobs: Sequence[EscrowJob]) -> TxReceipt:
        """One `finalizeJobsAndWithdraw` for the batch (all or nothing on-chain), each job with
        its result (as `job()` reads it back): the jobs' pay, with anything else the escrow owes
        the provider in ETH, lands in its wallet in the same transaction."""
        return self.send(self.contract("JobEscrow").functions.finalizeJobsAndWithdraw([j.as_tuple() for j in jobs]),
                         "finalizeJobsAndWithdraw jobs " + ",".join(str(j.id) for j in jobs))

    def refund_expired(self, job_id: JobId) -> TxReceipt:
        job = read_job(self.contract("JobEscrow"), job_id, self._escrow_block)
        return self.send(self.contract("JobEscrow").functions.refundExpired(job.as_tuple()), f"refundExpired {job_id}")

    # -- challenges and PoG ----------------------------------------------------------------

    def challenge(self, challenge_id: ChallengeId) -> Struct:
        """The IChallengeManager.Challenge struct, fields by their Solidity names."""
        return self.contract("ChallengeManager").functions.challenge(challenge_id).call()

    def open_challenges(self, ids: Iterable[ChallengeId]) -> list[ChallengeId]:
        """Those of `ids` (challenges of our roots: PoG rounds and jobs) that still wait for an
        answer (their indices are derivable as soon as the challenge is mined: see challenge_indices)."""
        return sorted(cid for cid in ids if self.challenge(cid).status == ChallengeStatus.OPEN)

    def settle_answered(self, ids: Iterable[ChallengeId]) -> list[ChallengeId]:
        """Settles those of `ids` that we answered and whose escalation (job) or fraud (PoG)
        window has passed: settle is permissionless, and until somebody calls it the job's
        escrow stays frozen, so the party that is owed the payment (and the bond) calls it."""
        manager = self.contract("ChallengeManager")
        now = self.now()
        windows = {ChallengeKind.POG: manager.functions.fraudWindow().call(),
                   ChallengeKind.JOB: manager.functions.escalationWindow().call()}
        settled = []
        for cid in ids:
            c = manager.functions.challenge(cid).call()
            if c.status == ChallengeStatus.ANSWERED and now > c.answeredAt + windows.get(c.kind, 0):
                try:
                    self.send(manager.functions.settle(cid), f"settle challenge {cid}")
                    settled.append(cid)
                except ClientError as exc:  # the challenger settled it first: nothing lost
                    logger.info("challenge %s: not settled by us: %s", cid, exc)
        return settled

    def challenge_indices(self, challenge_id: ChallengeId) -> list[int]:
        """The challenged leaf indices, derived here from the challenge's randomness R, stored
        when it was opened (it never changes)."""
        c = self.challenge(challenge_id)
        return challenge_indices(c.randomness, c.root, c.leafCount, c.k)

    def respond(self, challenge_id: ChallengeId, leaves: list[bytes], proofs: list[list[bytes]]) -> TxReceipt:
        return self.send(self.contract("ChallengeManager").functions.respond(challenge_id, leaves, proofs),
                         f"respond to challenge {challenge_id}")

    def pog_round(self, round_id: RoundId) -> Struct:
        """The IProofOfGpu.Round struct, fields by their Solidity names."""
        return self.contract("ProofOfGpu").functions.round(round_id).call()

    def block_hash(self, number: int, wait_s: float = 10.0) -> bytes:
        """Hash of a mined block (the node serves every block's, not only the last 256). Our node
        may be a moment behind the verifier's: polled for up to wait_s."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                return blocks.block_hash(self.web3, number)
            except BlockNotFound:
                if time.monotonic() > deadline:
                    raise ChainError(f"block {number} not known to our node after {wait_s:.0f} s") from None
                time.sleep(0.2)

    def commit_pog_roots(self, round_id: int, roots: list[bytes]) -> TxReceipt:
        return self.send(self.contract("ProofOfGpu").functions.commitRoots(round_id, roots),
                         f"commitRoots round {round_id}")

    def lease(self, lease_id: LeaseId) -> dict[str, Any]:
        """A lease of this provider's GPUs as the chain has it now: `active` while it holds them
        (not ended on-chain, not run out), `ended` once endLease ran, `due` when it should be
        ended now (run out, or never offered by its delivery deadline: LeaseManager lets anyone
        end it then), `offered` once we offered access (the renter's confirmation is the chain's
        business: ILeaseManager.isDelivered)."""
        manager = self.contract("LeaseManager").functions
        lease = manager.getLease(lease_id).call()
        now = self.now()
        known = lease.status != LeaseStatus.NONE
        offered = bytes(manager.deliveryOf(lease_id).call()) != bytes(32)
        deadline = manager.deliveryDeadline(lease_id).call() if known else 0
        open_ = lease.status == LeaseStatus.ACTIVE
        return {"renter": lease.renter, "started_at": lease.startedAt, "ends_at": lease.endsAt,
                "provider": lease.provider, "gpu_count": lease.gpuCount, "now": now,
                "active": open_ and lease.endsAt > now, "ended": lease.status == LeaseStatus.ENDED,
                "due": open_ and (now >= lease.endsAt or (not offered and now >= deadline)),
                "offered": offered, "delivery_deadline": deadline}

    def lease_domain(self) -> LeaseDomain:
        return LeaseDomain(self.deployment.chain_id, self.contract("LeaseManager").address)

    def offer_access(self, lease_id: LeaseId, access_hash: bytes) -> TxReceipt:
        """Binds the signed LeaseAccess digest to the lease on-chain; the renter confirms it."""
        return self.send(self.contract("LeaseManager").functions.offerAccess(lease_id, access_hash),
                         f"offerAccess lease {lease_id}")

    def end_lease(self, lease_id: LeaseId) -> TxReceipt:
        """Ends a lease that ran out (or was never offered by its deadline): frees our GPUs and
        credits our pay and the renter's refund."""
        return self.send(self.contract("LeaseManager").functions.endLease(lease_id), f"endLease lease {lease_id}")

    def is_leased(self) -> bool:
        return bool(self.contract("LeaseManager").functions.isLeased(self.address).call())

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


def _raw32(hex32: str) -> bytes:
    return bytes.fromhex(hex32[2:])


def _ids(jobs: Sequence[EscrowJob]) -> str:
    return "jobs " + ",".join(str(j.id) for j in jobs)


def _bytes32(text: str) -> bytes:
    return text.encode()[:32].ljust(32, b"\0")
