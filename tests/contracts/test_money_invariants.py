"""Stateful invariant tests (brownie-style state machines over hypothesis) of the money contracts.

Each machine drives a contract through random sequences of its public functions and keeps an
independent model of who is owed what. Every action whose outcome the model cannot predict is
skipped (only actions within a few seconds of a deadline), every other action must succeed
exactly when the model says it may. After every step:
- JobEscrow: its ETH balance == what the model says is owed + the price of every open job; each
  provider's open work in Staking == its accepted or committed jobs, and it can start unbonding
  exactly when that is zero (the lock that keeps stake slashable until the work settles);
- Staking: balance == bonded + unbonding + owed in the contract's totals, which match the model,
  no slash ever took more than the offender held, and unbonding is refused while work is open;
- LeaseManager: balance == owed + what active leases prepaid; no provider ever has more GPUs
  leased than it registered; a provider never earns more than a lease paid, and nothing for a
  lease it did not offer within the delivery window or whose offer the renter disputed (stopped)
  inside its confirm window without confirming.
Every withdrawal must pay exactly the modelled balance, and at the end of each example every
account's balances must match the model (so no job is ever paid twice).
"""

from dataclasses import dataclass

import brownie
from brownie import ZERO_ADDRESS, chain
from brownie.test import strategy

from protocol.enums import JobStatus
from conftest import (
    CANCEL_GRACE,
    CHALLENGE_WINDOW,
    DAY,
    ETHER,
    MIN_PROVIDER_STAKE,
    PRICE_PER_GPU_HOUR,
    PROTOCOL_FEE_BPS,
    SLASH_REWARD_BPS,
    UNBONDING_DELAY,
    job_of,
)

SETTINGS = {"max_examples": 20, "stateful_step_count": 12, "deadline": None}
LEASE_DELIVERY_WINDOW = 5 * 60
LEASE_CONFIRM_WINDOW = 5 * 60
MARGIN = 30  # seconds around a time boundary where the block time cannot be predicted
ROOT = b"\x22" * 32


def _near(boundary: int) -> bool:
    return abs(chain.time() - boundary) < MARGIN


def _attempt(allowed: bool, fn, *args):
    """Calls `fn`; it must succeed exactly when the model says it is `allowed`."""
    if allowed:
        return fn(*args)
    with brownie.reverts():
        fn(*args)
    return None


@dataclass
class JobModel:
    renter: object
    provider: object
    price: int
    deadline: int
    status: int = JobStatus.FUNDED
    frozen: bool = False
    window_end: int = 0
    cancellable_at: int = 0  # requestCancel's time; a commit voids it


class EscrowMachine:
    st_pick = strategy("uint256", max_value=2**16)
    st_price = strategy("uint256", min_value=1, max_value=ETHER)
    st_hours = strategy("uint8", min_value=1, max_value=48)
    st_flag = strategy("bool")

    def __init__(cls, escrow, staking, registry, providers, renters, disputer, treasury):
        cls.escrow = escrow
        cls.staking = staking
        cls.registry = registry
        cls.providers = providers
        cls.renters = renters
        cls.disputer = disputer
        cls.treasury = treasury
        cls.accounts = [*providers, *renters, treasury]

    def setup(self):
        self.jobs: dict[int, JobModel] = {}
        self.owed = {a.address: 0 for a in self.accounts}
        self.bonded = {p.address: MIN_PROVIDER_STAKE for p in self.providers}  # register_provider's stake
        self.active = {p.address: True for p in self.providers}  # registered, not deactivated
        self.unbonding = {p.address: False for p in self.providers}  # asked to unbond (never withdrawn here)
        # Short examples need jobs at every stage: one funded, one committed, one past its commit.
        for pick in range(3):
            self.rule_create(pick * 8, (pick + 1) * ETHER // 10)
            for _ in range(pick):
                self.rule_advance(pick)

    def _job(self, pick: int) -> tuple[int, JobModel] | None:
        if not self.jobs:
            return None
        job_id = sorted(self.jobs)[pick % len(self.jobs)]
        return job_id, self.jobs[job_id]

    def rule_create(self, st_pick, st_price):
        renter = self.renters[st_pick % len(self.renters)]
        provider = self.providers[(st_pick // 7) % len(self.providers)]
        deadline = chain.time() + 2 * DAY
        # Funding checks that the provider is registered and not deactivated, with the minimum
        # stake bonded and nothing unbonding; its stake is checked again (and locked) at commit.
        fundable = (self.active[provider.address] and self.bonded[provider.address] >= MIN_PROVIDER_STAKE
                    and not self.unbonding[provider.address])
        tx = _attempt(fundable, self.escrow.createJob, provider, ROOT, st_price, deadline,
                      {"from": renter, "value": st_price})
        if tx:
            self.jobs[tx.return_value] = JobModel(renter, provider, st_price, deadline)

    def _open_work(self, provider) -> int:
        return sum(1 for j in self.jobs.values()
                   if j.provider == provider and j.status == JobStatus.COMMITTED)

    def rule_unbond(self, st_pick):
        """Attack: a provider tries to unbond all its stake, which only works with no open work."""
        provider = self.providers[st_pick % len(self.providers)]
        amount = self.bonded[provider.address]
        allowed = amount > 0 and self._open_work(provider) == 0
        if _attempt(allowed, self.staking.requestUnbond, amount, {"from": provider}):
            self.bonded[provider.address] = 0
            self.unbonding[provider.address] = True

    def rule_toggle_activity(self, st_pick):
        """The provider deactivates, or reactivates, in the registry, which tells the escrow."""
        provider = self.providers[st_pick % len(self.providers)]
        toggle = self.registry.deactivate if self.active[provider.address] else self.registry.reactivate
        toggle({"from": provider})
        self.active[provider.address] = not self.active[provider.address]

    def rule_restake(self, st_pick):
        provider = self.providers[st_pick % len(self.providers)]
        self.staking.stake({"from": provider, "value": MIN_PROVIDER_STAKE})
        self.bonded[provider.address] += MIN_PROVIDER_STAKE

    def rule_advance(self, st_pick):
        """Moves a job one step along the honest path (commit, which accepts, then finalize)."""
        if (picked := self._job(st_pick)) is None:
            return
        rules = {JobStatus.FUNDED: self.rule_commit, JobStatus.COMMITTED: self.rule_finalize}
        rules.get(picked[1].status, lambda _: None)(st_pick)

    def rule_commit(self, st_pick):
        if (picked := self._job(st_pick)) is None or _near(picked[1].deadline):
            return
        job_id, job = picked
        staked = self.bonded[job.provider.address] >= MIN_PROVIDER_STAKE
        # The commit accepts the job: it needs the minimum stake, and locks it.
        allowed = job.status == JobStatus.FUNDED and chain.time() < job.deadline and staked
        tx = _attempt(allowed, self.escrow.commitResult, job_of(self.escrow, job_id), ROOT, 4, ROOT, {"from": job.provider})
        if tx:
            job.status = JobStatus.COMMITTED
            job.window_end = tx.timestamp + CHALLENGE_WINDOW

    def rule_finalize(self, st_pick):
        if (picked := self._job(st_pick)) is None or _near(picked[1].window_end):
            return
        job_id, job = picked
        allowed = job.status == JobStatus.COMMITTED and not job.frozen and chain.time() >= job.window_end
        if _attempt(allowed, self.escrow.finalize, job_of(self.escrow, job_id), {"from": job.renter}):
            fee = job.price * PROTOCOL_FEE_BPS // 10_000
            self.owed[job.provider.address] += job.price - fee
            self.owed[self.treasury.address] += fee
            job.status = JobStatus.FINALIZED

    def rule_finalize_batch(self, st_pick, st_flag):
        """finalizeJobs over every third job from the pick (all or nothing), sent by the treasury;
        with the flag, finalizeJobsAndWithdraw sent by the first job's provider, which is then
        paid everything it is owed in ETH."""
        if not self.jobs:
            return
        ids = sorted(self.jobs)[st_pick % len(self.jobs)::3][:8]
        jobs = [self.jobs[i] for i in ids]
        if any(_near(j.window_end) for j in jobs):
            return
        allowed = all(j.status == JobStatus.COMMITTED and not j.frozen and chain.time() >= j.window_end for j in jobs)
        sender = jobs[0].provider if st_flag else self.treasury
        finalize = self.escrow.finalizeJobsAndWithdraw if st_flag else self.escrow.finalizeJobs
        before = sender.balance()
        if _attempt(allowed, finalize, [job_of(self.escrow, i) for i in ids], {"from": sender}):
            for job in jobs:
                fee = job.price * PROTOCOL_FEE_BPS // 10_000
                self.owed[job.provider.address] += job.price - fee
                self.owed[self.treasury.address] += fee
                job.status = JobStatus.FINALIZED
            if st_flag:
                assert sender.balance() == before + self.owed[sender.address]  # zero gas price here
                self.owed[sender.address] = 0

    def rule_refund_expired(self, st_pick):
        if (picked := self._job(st_pick)) is None or _near(picked[1].deadline):
            return
        job_id, job = picked
        allowed = job.status == JobStatus.FUNDED and chain.time() >= job.deadline
        if _attempt(allowed, self.escrow.refundExpired, job_of(self.escrow, job_id), {"from": job.provider}):
            self._refund(job)

    def rule_request_cancel(self, st_pick):
        if (picked := self._job(st_pick)) is None or _near(picked[1].deadline):
            return
        job_id, job = picked
        allowed = job.status == JobStatus.FUNDED and not job.cancellable_at and chain.time() < job.deadline
        tx = _attempt(allowed, self.escrow.requestCancel, job_of(self.escrow, job_id), {"from": job.renter})
        if tx:
            job.cancellable_at = tx.timestamp + CANCEL_GRACE

    def rule_cancel(self, st_pick):
        if (picked := self._job(st_pick)) is None or _near(picked[1].cancellable_at):
            return
        job_id, job = picked
        allowed = job.status == JobStatus.FUNDED and job.cancellable_at and chain.time() >= job.cancellable_at
        if _attempt(allowed, self.escrow.cancel, job_of(self.escrow, job_id), {"from": job.renter}):
            self._refund(job)

    def rule_freeze(self, st_pick):
        if (picked := self._job(st_pick)) is None or _near(picked[1].window_end):
            return
        job_id, job = picked
        allowed = job.status == JobStatus.COMMITTED and not job.frozen and chain.time() < job.window_end
        if _attempt(allowed, self.escrow.freeze, job_of(self.escrow, job_id), {"from": self.disputer}):
            job.frozen = True

    def rule_resolve(self, st_pick, st_flag):
        if (picked := self._job(st_pick)) is None:
            return
        job_id, job = picked
        if _attempt(job.frozen, self.escrow.resolveFreeze, job_id, st_flag, {"from": self.disputer}):
            job.frozen = False
            if st_flag:
                self._refund(job)

    def rule_withdraw(self, st_pick):
        account = self.accounts[st_pick % len(self.accounts)]
        owed = self.owed[account.address]
        before = account.balance()
        if _attempt(owed > 0, self.escrow.withdraw, ZERO_ADDRESS, {"from": account}):
            assert account.balance() == before + owed  # zero gas price on the test chain
            self.owed[account.address] = 0

    def rule_sleep(self, st_hours):
        chain.sleep(st_hours * 3600)
        chain.mine()

    def _refund(self, job: JobModel) -> None:
        self.owed[job.renter.address] += job.price
        job.status = JobStatus.REFUNDED

    def invariant_balance_is_owed_plus_locked(self):
        locked = sum(j.price for j in self.jobs.values()
                     if j.status in (JobStatus.FUNDED, JobStatus.COMMITTED))
        assert self.escrow.balance() == sum(self.owed.values()) + locked

    def invariant_open_work_locks_stake(self):
        for provider in self.providers:
            assert self.staking.openWorkOf(provider) == self._open_work(provider)

    def teardown(self):
        """Per-account pull balances, checked once per example (each read costs an RPC call)."""
        for account in self.accounts:
            assert self.escrow.owedTo(ZERO_ADDRESS, account) == self.owed[account.address]
        for provider in self.providers:
            assert self.staking.stakeOf(provider) == self.bonded[provider.address]


def test_escrow_holds_exactly_what_it_owes(
    chain_state_machine, escrow, staking, registry, register_provider, provider, provider2, renter, stranger,
    disputer, treasury,
):
    register_provider(provider)
    register_provider(provider2)
    chain_state_machine(
        EscrowMachine, escrow, staking, registry, [provider, provider2], [renter, stranger], disputer, treasury,
        settings=SETTINGS,
    )


class StakingMachine:
    st_pick = strategy("uint256", max_value=2**16)
    st_tenths = strategy("uint8", min_value=1, max_value=30)  # amounts of 0.1 .. 3 ether
    st_hours = strategy("uint8", min_value=1, max_value=96)

    def __init__(cls, staking, stakers, slasher, locker, treasury):
        cls.staking = staking
        cls.stakers = stakers
        cls.slasher = slasher
        cls.locker = locker
        cls.treasury = treasury
        cls.accounts = [*stakers, treasury]

    def setup(self):
        self.bonded = {a.address: 0 for a in self.stakers}
        self.unbonding = {a.address: [0, 0] for a in self.stakers}  # amount, releaseAt
        self.open_work = {a.address: 0 for a in self.stakers}
        self.owed = {a.address: 0 for a in self.accounts}
        # Short examples need bonded and unbonding stake to act on.
        for pick in range(len(self.stakers)):
            self.rule_stake(pick, 10)
            if pick:
                self.rule_request_unbond(pick, 3)

    def _staker(self, pick: int):
        return self.stakers[pick % len(self.stakers)]

    def rule_stake(self, st_pick, st_tenths):
        account = self._staker(st_pick)
        amount = st_tenths * ETHER // 10
        self.staking.stake({"from": account, "value": amount})
        self.bonded[account.address] += amount

    def rule_request_unbond(self, st_pick, st_tenths):
        account = self._staker(st_pick)
        amount = st_tenths * ETHER // 10
        amount = min(amount, self.bonded[account.address]) if st_pick % 3 else amount
        allowed = 0 < amount <= self.bonded[account.address] and self.open_work[account.address] == 0
        tx = _attempt(allowed, self.staking.requestUnbond, amount, {"from": account})
        if tx:
            self.bonded[account.address] -= amount
            unbonding = self.unbonding[account.address][0] + amount
            self.unbonding[account.address] = [unbonding, tx.timestamp + UNBONDING_DELAY]

    def rule_withdraw_unbonded(self, st_pick):
        account = self._staker(st_pick)
        amount, release = self.unbonding[account.address]
        if _near(release):
            return
        if _attempt(amount > 0 and chain.time() >= release, self.staking.withdrawUnbonded, {"from": account}):
            self.unbonding[account.address] = [0, 0]

    def rule_lock(self, st_pick, st_tenths):
        """A locker (the escrow at accept, the lease contract at start) locks open work."""
        account = self._staker(st_pick)
        min_stake = st_tenths * ETHER // 10
        allowed = self.bonded[account.address] >= min_stake
        if _attempt(allowed, self.staking.lockStake, account, min_stake, {"from": self.locker}):
            self.open_work[account.address] += 1

    def rule_unlock(self, st_pick):
        account = self._staker(st_pick)
        allowed = self.open_work[account.address] > 0
        if _attempt(allowed, self.staking.unlockStake, account, {"from": self.locker}):
            self.open_work[account.address] -= 1

    def rule_slash(self, st_pick, st_tenths):
        amount = st_tenths * ETHER // 10
        offender = self._staker(st_pick)
        recipient = self._staker(st_pick // 5)
        held = self.bonded[offender.address] + self.unbonding[offender.address][0]
        tx = self.staking.slash(offender, amount, recipient, {"from": self.slasher})
        slashed = tx.events["Slashed"]["slashed"]
        assert slashed == min(amount, held) <= held  # no slash exceeds the stake
        from_bonded = min(slashed, self.bonded[offender.address])
        self.bonded[offender.address] -= from_bonded
        self.unbonding[offender.address][0] -= slashed - from_bonded
        reward = 0 if recipient == offender else slashed * SLASH_REWARD_BPS // 10_000
        self.owed[recipient.address] += reward
        self.owed[self.treasury.address] += slashed - reward

    def rule_withdraw(self, st_pick):
        account = self.accounts[st_pick % len(self.accounts)]
        owed = self.owed[account.address]
        before = account.balance()
        if _attempt(owed > 0, self.staking.withdraw, {"from": account}):
            assert account.balance() == before + owed
            self.owed[account.address] = 0

    def rule_sleep(self, st_hours):
        chain.sleep(st_hours * 3600)
        chain.mine()

    def invariant_balance_is_bonded_plus_unbonding_plus_owed(self):
        s = self.staking
        assert s.balance() == s.totalBonded() + s.totalUnbonding() + s.totalOwed()
        assert s.totalBonded() == sum(self.bonded.values())
        assert s.totalUnbonding() == sum(u[0] for u in self.unbonding.values())
        assert s.totalOwed() == sum(self.owed.values())

    def teardown(self):
        """Per-account state, checked once per example (each read costs an RPC call)."""
        for account in self.stakers:
            assert self.staking.stakeOf(account) == self.bonded[account.address]
            assert self.staking.unbondingOf(account)["amount"] == self.unbonding[account.address][0]
            assert self.staking.openWorkOf(account) == self.open_work[account.address]
        for account in self.accounts:
            assert self.staking.owedTo(account) == self.owed[account.address]


def test_staking_holds_exactly_stake_plus_owed(
    chain_state_machine, staking, provider, provider2, verifier, slasher, locker, treasury
):
    chain_state_machine(
        StakingMachine, staking, [provider, provider2, verifier], slasher, locker, treasury, settings=SETTINGS
    )


@dataclass
class LeaseModel:
    renter: object
    provider: object
    gpus: int
    paid: int
    started: int
    ends: int
    active: bool = True
    offered_at: int | None = None
    confirmed: bool = False

    @property
    def deadline(self) -> int:
        return min(self.started + LEASE_DELIVERY_WINDOW, self.ends)

    @property
    def confirm_deadline(self) -> int:
        assert self.offered_at is not None
        return min(self.offered_at + LEASE_CONFIRM_WINDOW, self.ends)

    def earned(self, at: int) -> int:
        """The provider's pay if the lease ends at `at`: the seconds since the offer, once delivered."""
        if self.offered_at is None or not (self.confirmed or at >= self.confirm_deadline):
            return 0
        return self.paid * (min(at, self.ends) - self.offered_at) // (self.ends - self.started)


class LeaseMachine:
    st_pick = strategy("uint256", max_value=2**16)
    st_gpus = strategy("uint256", min_value=1, max_value=5)
    st_seconds = strategy("uint256", min_value=60, max_value=3 * 3600)

    def __init__(cls, leases, staking, providers, renters, gpu_counts, price_per_gpu_hour):
        cls.leases = leases
        cls.staking = staking
        cls.providers = providers
        cls.renters = renters
        cls.gpu_counts = gpu_counts
        cls.price = price_per_gpu_hour
        cls.accounts = [*providers, *renters]

    def setup(self):
        self.items: dict[int, LeaseModel] = {}
        self.owed = {a.address: 0 for a in self.accounts}
        self.rule_start(0, 2, 3600)  # so that short examples have a lease to act on

    def _leased(self, provider) -> int:
        return sum(x.gpus for x in self.items.values() if x.active and x.provider == provider)

    def rule_start(self, st_pick, st_gpus, st_seconds):
        renter = self.renters[st_pick % len(self.renters)]
        index = (st_pick // 3) % len(self.providers)
        provider = self.providers[index]
        cost = self.price * st_gpus * st_seconds // 3600
        allowed = self._leased(provider) + st_gpus <= self.gpu_counts[index]
        tx = _attempt(allowed, self.leases.startLease, provider, st_gpus, st_seconds, {"from": renter, "value": cost})
        if tx:
            self.items[tx.return_value] = LeaseModel(
                renter, provider, st_gpus, cost, tx.timestamp, tx.timestamp + st_seconds
            )

    def rule_offer(self, st_pick):
        if not self.items:
            return
        lease_id = sorted(self.items)[st_pick % len(self.items)]
        lease = self.items[lease_id]
        if _near(lease.deadline):
            return
        allowed = lease.active and lease.offered_at is None and chain.time() < lease.deadline
        tx = _attempt(allowed, self.leases.offerAccess, lease_id, "0x" + "ab" * 32, {"from": lease.provider})
        if tx:
            lease.offered_at = tx.timestamp

    def rule_confirm(self, st_pick):
        if not self.items:
            return
        lease_id = sorted(self.items)[st_pick % len(self.items)]
        lease = self.items[lease_id]
        allowed = lease.active and lease.offered_at is not None and not lease.confirmed
        if _attempt(allowed, self.leases.confirmDelivery, lease_id, "0x" + "ab" * 32, {"from": lease.renter}):
            lease.confirmed = True

    def rule_end(self, st_pick):
        if not self.items:
            return
        lease_id = sorted(self.items)[st_pick % len(self.items)]
        lease = self.items[lease_id]
        caller = lease.renter if st_pick % 2 else self.renters[(st_pick // 2) % len(self.renters)]
        if _near(lease.ends) or _near(lease.deadline) or lease.offered_at is not None and _near(lease.confirm_deadline):
            return
        now = chain.time()
        never_offered = lease.offered_at is None and now >= lease.deadline
        allowed = lease.active and (caller == lease.renter or now >= lease.ends or never_offered)
        tx = _attempt(allowed, self.leases.endLease, lease_id, {"from": caller})
        if tx:
            earned = lease.earned(tx.timestamp)
            assert tx.events["LeaseEnded"]["providerEarned"] == earned <= lease.paid
            self.owed[lease.provider.address] += earned
            self.owed[lease.renter.address] += lease.paid - earned
            lease.active = False

    def rule_withdraw(self, st_pick):
        account = self.accounts[st_pick % len(self.accounts)]
        owed = self.owed[account.address]
        before = account.balance()
        if _attempt(owed > 0, self.leases.withdraw, {"from": account}):
            assert account.balance() == before + owed
            self.owed[account.address] = 0

    def rule_sleep(self, st_seconds):
        chain.sleep(st_seconds)
        chain.mine()

    def invariant_balance_is_owed_plus_prepaid(self):
        prepaid = sum(x.paid for x in self.items.values() if x.active)
        assert self.leases.balance() == sum(self.owed.values()) + prepaid

    def teardown(self):
        """Per-provider GPU counts and pull balances, checked once per example."""
        for index, provider in enumerate(self.providers):
            leased = self.leases.leasedGpusOf(provider)
            assert leased == self._leased(provider) <= self.gpu_counts[index]
            active = sum(1 for x in self.items.values() if x.active and x.provider == provider)
            assert self.staking.openWorkOf(provider) == active  # each active lease locks the stake
        for account in self.accounts:
            assert self.leases.owedTo(account) == self.owed[account.address]


def test_leases_hold_exactly_prepaid_plus_owed(
    chain_state_machine, leases, staking, register_provider, provider, provider2, renter, stranger
):
    register_provider(provider, gpus=4)
    register_provider(provider2, gpus=2)
    chain_state_machine(
        LeaseMachine, leases, staking, [provider, provider2], [renter, stranger], [4, 2], PRICE_PER_GPU_HOUR, settings=SETTINGS
    )
