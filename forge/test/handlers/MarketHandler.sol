// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {Cheats} from "../Cheats.sol";
import {Deployment} from "../Deployment.sol";
import {IChallengeManager} from "../../../contracts/interfaces/IChallengeManager.sol";
import {IDisputeCommittee} from "../../../contracts/interfaces/IDisputeCommittee.sol";
import {IJobEscrow} from "../../../contracts/interfaces/IJobEscrow.sol";
import {ILeaseManager} from "../../../contracts/interfaces/ILeaseManager.sol";
import {Staking} from "../../../contracts/Staking.sol";
import {ProviderRegistry} from "../../../contracts/ProviderRegistry.sol";
import {JobEscrow} from "../../../contracts/JobEscrow.sol";
import {LeaseManager} from "../../../contracts/LeaseManager.sol";
import {DisputeCommittee} from "../../../contracts/DisputeCommittee.sol";
import {ChallengeManager} from "../../../contracts/ChallengeManager.sol";

/// @notice The parties of the market, driven by forge's invariant fuzzer. Every public function
/// without a leading underscore is one action of one party at the current time; `warp` and
/// `warpToBoundary` move the clock (arbitrarily, or to a deadline or window end of a live object
/// +-1 s). Parties:
/// - honest: provider P0 (computes every job right, signs only what it commits, answers every
///   challenge, confirms every lease it is paid for), renter R0 (challenges a wrong result on its
///   jobs), verifier V0 (challenges wrong results on others' jobs, votes truthfully), voter V1
///   (votes truthfully); honest parties never unbond their voting stake, and together hold the
///   committee majority (the trust assumption of DisputeCommittee);
/// - attacker: provider P1 (commits right, wrong or unopenable results, answers or not, never
///   confirms or confirms late), and A (renter, staked verifier, challenger and voter), who act
///   at any time, against anyone, and may collude.
/// Honest parties do their duties (`_duties`) either at once, before anything else happens, or
/// at the last second their window allows (`eager` false), whichever the fuzzer picks.
/// Everything an invariant needs is kept as ghost state; a check that can only be made inside an
/// action (what one call paid) records `failure`, which an invariant reports.
/// To adapt to a changed contract, change the one small function of that action.
contract MarketHandler is Cheats {
    uint256 internal constant P0_KEY = 0xA11CE;
    uint256 internal constant BPS = 10_000;
    uint256 internal constant GPUS = 4;
    uint256 public constant ATTACKER_STAKE_CAP = 2 ether;
    /// @notice Open finding (docs/THREATS.md O1, ScenariosOpenTest): a challenger colluding with
    /// the provider takes the only challenge slot of a wrong result, never escalates, and settles
    /// after the job's window, so the honest renter pays for it. While that stands the attacker
    /// here does not challenge a wrong result of the honest renter's jobs; set true once
    /// ChallengeManager/JobEscrow defend it. (Set true, the fuzzer finds the attack by itself:
    /// createJob, commit with the colluding challenge, respond at the last second, warp; 35,200
    /// calls in one try.)
    bool public constant SHIELD_ATTACK = false;
    uint256 public constant ATTACKER_PROVIDER_STAKE_CAP = 4 ether;

    Deployment public immutable d;
    // The contracts, read once: a call to read one between vm.prank and the action would take
    // the prank.
    Staking internal immutable staking;
    ProviderRegistry internal immutable registry;
    JobEscrow internal immutable escrow;
    LeaseManager internal immutable leases;
    DisputeCommittee internal immutable committee;
    ChallengeManager internal immutable challenges;
    address public immutable P0;
    address public constant P1 = address(0xBAD1);
    address public constant R0 = address(0x4E47);
    address public constant A = address(0xBAD2);
    address public constant V0 = address(0x7E41);
    address public constant V1 = address(0x7E42);
    address public immutable treasury;

    address[] internal _accounts;

    // Jobs as the escrow's events describe them (index = id - 1), and what their result was.
    IJobEscrow.Job[] internal _jobs;
    mapping(uint256 jobId => bool) public resultBad; // committed a wrong or unopenable result
    mapping(uint256 jobId => bytes32) internal _leaf; // the provider's committed leaf (zero: none it can open)
    mapping(uint256 jobId => bytes) internal _p0Signature;

    // Ghost balances: what each account put in and took out of each contract.
    mapping(address account => uint256) public staked;
    mapping(address account => uint256) public unbondWithdrawn;
    mapping(address account => uint256) public escrowWithdrawn;
    mapping(address account => uint256) public challengeWithdrawn;
    mapping(address account => uint256) public leaseWithdrawn;
    mapping(address account => uint256) public bondsPosted;

    bool public eager = true;
    string public failure;
    uint256 public honestDutiesDone;
    uint256 public boundaryWarps;

    constructor(Deployment deployment) {
        d = deployment;
        staking = deployment.staking();
        registry = deployment.registry();
        escrow = deployment.escrow();
        leases = deployment.leases();
        committee = deployment.committee();
        challenges = deployment.challenges();
        P0 = vm.addr(P0_KEY);
        treasury = deployment.staking().treasury();
        _accounts = [P0, P1, R0, A, V0, V1, treasury];
        vm.label(P0, "P0-honest-provider");
        vm.label(P1, "P1-attacker-provider");
        vm.label(R0, "R0-honest-renter");
        vm.label(A, "A-attacker");
        vm.label(V0, "V0-honest-verifier");
        vm.label(V1, "V1-honest-voter");
        _stakeAs(P0, d.MIN_PROVIDER_STAKE());
        _stakeAs(P1, d.MIN_PROVIDER_STAKE());
        _stakeAs(A, d.MIN_VERIFIER_STAKE());
        _stakeAs(V0, 3 ether);
        _stakeAs(V1, 5 ether);
        _register(P0);
        _register(P1);
    }

    // ------------------------------------------------------------------ views for invariants

    function accounts() external view returns (address[] memory) {
        return _accounts;
    }

    function jobCount() external view returns (uint256) {
        return _jobs.length;
    }

    function job(uint256 index) external view returns (IJobEscrow.Job memory) {
        return _jobs[index];
    }

    function isHonestChallenger(address account) public pure returns (bool) {
        return account == R0 || account == V0;
    }

    // ------------------------------------------------------------------ time

    modifier step() {
        vm.roll(block.number + 1);
        if (eager) _duties();
        _;
    }

    /// Honest parties act at once, or at the last second their windows allow.
    function setHonestPace(bool eager_) external step {
        eager = eager_;
    }

    /// Moves the clock by up to a minute, an hour, a day or 9 days (past the unbonding delay),
    /// each scale as likely; a block every 12 s.
    function warp(uint256 seconds_) external step {
        uint256 scale = seconds_ % 4;
        uint256 most = scale == 0 ? 1 minutes : (scale == 1 ? 1 hours : (scale == 2 ? 1 days : 9 days));
        _advanceTo(block.timestamp + _bound(seconds_ / 4, 0, most));
    }

    /// Moves the clock by exactly `seconds_` (the scenario tests; not a fuzzed action).
    function warpExactly(uint256 seconds_) external step {
        _advanceTo(block.timestamp + seconds_);
    }

    /// Moves the clock to a deadline or window end of a live object, -1, +0 or +1 s.
    function warpToBoundary(uint256 kind, uint256 pick, uint256 offset) external step {
        uint256 boundary = _boundary(kind, pick);
        if (boundary == 0) return;
        uint256 target = boundary + (offset % 3) - 1;
        if (target <= block.timestamp) return;
        ++boundaryWarps;
        _advanceTo(target);
    }

    /// Mines up to 300 blocks (a challenge's anchor block can fall out of the 256-block horizon).
    function mineBlocks(uint256 count) external step {
        count = _bound(count, 1, 300);
        _advanceTo(block.timestamp + count * 12);
        vm.roll(block.number + count);
    }

    // ------------------------------------------------------------------ jobs

    function createJob(uint256 renterPick, uint256 providerPick, uint256 price, uint256 duration) external step {
        address renter = renterPick % 2 == 0 ? R0 : A;
        address provider = providerPick % 2 == 0 ? P0 : P1;
        price = _bound(price, 1, 1 ether);
        uint64 deadline = uint64(block.timestamp + _bound(duration, 1, d.MAX_JOB_DURATION()));
        bytes32 specHash = keccak256(abi.encode("spec", _jobs.length));
        vm.deal(renter, renter.balance + price);
        vm.prank(renter);
        try escrow.createJob{value: price}(provider, specHash, price, deadline) returns (uint256 id) {
            _jobs.push(IJobEscrow.Job(id, renter, provider, address(0), price, specHash, deadline, 0, 0, 0));
        } catch {}
    }

    /// The provider commits its result: P0 always the right one (and signs it); P1 the right one,
    /// a wrong one, a root it cannot open, or a wrong one that A challenges in the same block
    /// (collusion: before any honest party could).
    function commit(uint256 pick, uint256 mode) external step {
        IJobEscrow.Job memory j = _pickJob(pick);
        if (j.id == 0) return;
        bool honest = j.provider == P0;
        mode = honest ? 0 : mode % 4;
        bool shield = mode == 3 && (SHIELD_ATTACK || j.renter != R0);
        if (shield) mode = 1;
        bytes32 leaf = mode == 0 ? _rightLeaf(j) : keccak256(abi.encode("wrong", j.specHash));
        bytes32 root = mode == 2 ? keccak256(abi.encode("opaque", j.specHash)) : _leafHash(leaf);
        bytes32 digest = keccak256(abi.encode(leaf));
        vm.prank(j.provider);
        try escrow.commitResult(j, root, 1, digest) {
            IJobEscrow.Job storage stored = _jobs[j.id - 1];
            (stored.outputRoot, stored.itemCount, stored.resultDigest) = (root, 1, digest);
            resultBad[j.id] = mode != 0;
            _leaf[j.id] = mode == 2 ? bytes32(0) : leaf;
            if (honest) _p0Signature[j.id] = _signResult(j.id, root, 1, digest, j.deadline - 1);
            if (shield) _challengeJob(_jobs[j.id - 1], A, 1, d.MIN_BOND());
        } catch {}
    }

    function finalize(uint256 pick, uint256 callerPick) external step {
        IJobEscrow.Job memory j = _pickJob(pick);
        if (j.id == 0) return;
        vm.prank(_anyone(callerPick));
        try escrow.finalize(j) {} catch {}
    }

    function refundExpired(uint256 pick, uint256 callerPick) external step {
        IJobEscrow.Job memory j = _pickJob(pick);
        if (j.id == 0) return;
        vm.prank(_anyone(callerPick));
        try escrow.refundExpired(j) {} catch {}
    }

    function failJob(uint256 pick) external step {
        IJobEscrow.Job memory j = _pickJob(pick);
        if (j.id == 0) return;
        vm.prank(j.provider);
        try escrow.failJob(j, "cannot run it") {} catch {}
    }

    function requestCancel(uint256 pick) external step {
        IJobEscrow.Job memory j = _pickJob(pick);
        if (j.id == 0) return;
        vm.prank(j.renter);
        try escrow.requestCancel(j) {} catch {}
    }

    function cancel(uint256 pick) external step {
        IJobEscrow.Job memory j = _pickJob(pick);
        if (j.id == 0) return;
        vm.prank(j.renter);
        try escrow.cancel(j) {} catch {}
    }

    /// The attacker tries to slash P0 with a result P0 signed (as signed, or altered).
    function slashSignedResult(uint256 pick, bool alter) external step {
        IJobEscrow.Job memory j = _pickJob(pick);
        if (j.id == 0 || j.provider != P0 || _p0Signature[j.id].length == 0) return;
        IJobEscrow.JobResult memory result = _result(j.id, j.outputRoot, j.itemCount, j.resultDigest, j.deadline - 1);
        if (alter) result.itemCount = 2;
        vm.prank(A);
        try escrow.slashSignedResult(j, result, _p0Signature[j.id]) {} catch {}
    }

    // ------------------------------------------------------------------ challenges and disputes

    /// A challenges any committed job; R0 (its own jobs) and V0 (others') only wrong results.
    function challengeJob(uint256 pick, uint256 challengerPick, uint256 k, uint256 extraBond) external step {
        IJobEscrow.Job memory j = _pickJob(pick);
        if (j.id == 0) return;
        uint256 who = challengerPick % 3;
        address challenger = who == 0 ? A : (who == 1 ? R0 : V0);
        if (challenger != A && (!resultBad[j.id] || (challenger == R0) != (j.renter == R0))) return;
        if (challenger == A && !SHIELD_ATTACK && resultBad[j.id] && j.renter == R0) return;
        uint256 bond = d.MIN_BOND() + (challenger == A ? _bound(extraBond, 0, 0.1 ether) : 0);
        _challengeJob(j, challenger, _bound(k, 1, 3), bond);
    }

    /// The challenged provider answers: P0 always can; P1 when it committed a leaf it can open,
    /// now or at the last second of its response window.
    function respond(uint256 pick, bool lastSecond) external step {
        (uint256 id, IChallengeManager.Challenge memory c) = _pickChallengeIn(pick, IChallengeManager.Status.Open);
        if (id == 0) return;
        if (c.provider == P0) {
            _respond(id, c);
        } else if (_leaf[c.subject] != bytes32(0)) {
            if (lastSecond && c.responseDeadline > block.timestamp) _advanceTo(c.responseDeadline);
            vm.prank(c.provider);
            try challenges.respond(id, _leaves(_leaf[c.subject], c.k), new bytes32[][](c.k)) {} catch {}
        }
    }

    /// A escalates whatever it challenged (honest challengers escalate in their duties).
    function escalate(uint256 pick) external step {
        (uint256 id, IChallengeManager.Challenge memory c) = _pickChallengeIn(pick, IChallengeManager.Status.Answered);
        if (id == 0 || c.challenger != A) return;
        vm.prank(A);
        try challenges.escalate(id) {} catch {}
    }

    /// The attacker's stake votes as it likes (honest voters vote in their duties).
    function vote(uint256 pick, bool voterIsProvider, bool providerAtFault) external step {
        uint256 count = committee.disputeCount();
        if (count == 0) return;
        vm.prank(voterIsProvider ? P1 : A);
        try committee.vote(1 + pick % count, providerAtFault) {} catch {}
    }

    function resolve(uint256 pick, uint256 callerPick) external step {
        uint256 count = committee.disputeCount();
        if (count == 0) return;
        vm.prank(_anyone(callerPick));
        try committee.resolve(1 + pick % count) {} catch {}
    }

    function settle(uint256 pick, uint256 callerPick) external step {
        (uint256 id,) = _pickChallengeIn(pick, IChallengeManager.Status.Answered);
        if (id == 0) return;
        vm.prank(_anyone(callerPick));
        try challenges.settle(id) {} catch {}
    }

    function claimTimeout(uint256 pick, uint256 callerPick) external step {
        (uint256 id,) = _pickChallengeIn(pick, IChallengeManager.Status.Open);
        if (id == 0) return;
        vm.prank(_anyone(callerPick));
        try challenges.claimTimeout(id) {} catch {}
    }

    // ------------------------------------------------------------------ stake

    /// P0, P1 and A add stake (the attacker's within the caps that keep the honest majority).
    function stake(uint256 who, uint256 amount) external step {
        address account = _staker(who);
        amount = _bound(amount, 1, 2 ether);
        uint256 cap = account == A ? ATTACKER_STAKE_CAP : (account == P1 ? ATTACKER_PROVIDER_STAKE_CAP : type(uint256).max);
        if (staking.stakeOf(account) + amount > cap) return;
        _stakeAs(account, amount);
    }

    /// P0, P1 and A start unbonding any amount (refused while their work is open).
    function requestUnbond(uint256 who, uint256 amount) external step {
        address account = _staker(who);
        uint256 bonded = staking.stakeOf(account);
        if (bonded == 0) return;
        vm.prank(account);
        try staking.requestUnbond(_bound(amount, 1, bonded)) {} catch {}
    }

    function withdrawUnbonded(uint256 who) external step {
        address account = _staker(who);
        uint256 before = account.balance;
        vm.prank(account);
        try staking.withdrawUnbonded() {
            unbondWithdrawn[account] += account.balance - before;
        } catch {}
    }

    /// Any account takes what Staking owes it (slash rewards, the treasury's share).
    function withdrawSlashRewards(uint256 who) external step {
        address account = _anyone(who);
        vm.prank(account);
        try staking.withdraw() {} catch {}
    }

    // ------------------------------------------------------------------ pull balances

    function withdrawEscrow(uint256 who) external step {
        address account = _anyone(who);
        uint256 before = account.balance;
        vm.prank(account);
        try escrow.withdraw(address(0)) {
            escrowWithdrawn[account] += account.balance - before;
        } catch {}
    }

    function withdrawChallenges(uint256 who) external step {
        address account = _anyone(who);
        uint256 before = account.balance;
        vm.prank(account);
        try challenges.withdraw() {
            challengeWithdrawn[account] += account.balance - before;
        } catch {}
    }

    function withdrawLeases(uint256 who) external step {
        address account = _anyone(who);
        uint256 before = account.balance;
        vm.prank(account);
        try leases.withdraw() {
            leaseWithdrawn[account] += account.balance - before;
        } catch {}
    }

    // ------------------------------------------------------------------ leases and the registry

    function startLease(uint256 renterPick, uint256 providerPick, uint256 gpus, uint256 duration) external step {
        address renter = renterPick % 2 == 0 ? R0 : A;
        address provider = providerPick % 2 == 0 ? P0 : P1;
        gpus = _bound(gpus, 1, GPUS);
        duration = _bound(duration, 1, 3 days);
        uint256 cost = leases.leaseCost(provider, gpus, duration);
        vm.deal(renter, renter.balance + cost);
        vm.prank(renter);
        try leases.startLease{value: cost}(provider, gpus, duration) {} catch {}
    }

    /// P1 offers a machine (one that refuses the renter) when it likes, or never; P0 offers in
    /// its duties. (LeaseManager: the provider offers, the renter confirms after logging in.)
    function confirmDelivery(uint256 pick) external step {
        uint256 count = leases.leaseCount();
        if (count == 0) return;
        uint256 id = 1 + pick % count;
        vm.prank(P1);
        try leases.offerAccess(id, keccak256(abi.encode("access", id))) {} catch {}
    }

    /// Anyone ends a lease (its renter at any time, others once it ran out); checks what the
    /// honest party got from it.
    function endLease(uint256 pick, uint256 callerPick) external step {
        uint256 count = leases.leaseCount();
        if (count == 0) return;
        uint256 id = 1 + pick % count;
        ILeaseManager.Lease memory lease = leases.getLease(id);
        bool delivered = leases.isDelivered(id);
        uint256 offeredAt = leases.getDelivery(id).offeredAt;
        uint256 providerBefore = leases.owedTo(lease.provider);
        uint256 renterBefore = leases.owedTo(lease.renter);
        vm.prank(_anyone(callerPick));
        try leases.endLease(id) {
            uint256 earned = leases.owedTo(lease.provider) - providerBefore;
            uint256 refund = leases.owedTo(lease.renter) - renterBefore;
            if (earned + refund != lease.paid) _fail("a lease's payout and refund differ from what it paid");
            uint256 until = block.timestamp >= lease.endsAt ? lease.endsAt : block.timestamp;
            uint256 fair = offeredAt == 0 ? 0 : lease.paid * (until - offeredAt) / (lease.endsAt - lease.startedAt);
            if (lease.provider == P0 && delivered && earned < fair) _fail("honest provider paid less than the time it leased");
            if (lease.renter == R0 && !delivered && refund != lease.paid) {
                _fail("honest renter not refunded in full for an undelivered lease");
            }
            if (lease.renter == R0 && earned > fair) _fail("honest renter paid for time it did not lease");
        } catch {}
    }

    function toggleActive(uint256 providerPick) external step {
        address provider = providerPick % 2 == 0 ? P0 : P1;
        vm.prank(provider);
        if (registry.providerOf(provider).deactivated) {
            try registry.reactivate() {} catch {}
        } else {
            try registry.deactivate() {} catch {}
        }
    }

    // ------------------------------------------------------------------ honest duties

    /// Everything an honest party must do by some deadline, done now.
    function _duties() internal {
        _challengeWrongResults();
        uint256 count = challenges.challengeCount();
        for (uint256 id = 1; id <= count; ++id) {
            IChallengeManager.Challenge memory c = challenges.challenge(id);
            if (c.status == IChallengeManager.Status.Open && c.provider == P0) {
                _respond(id, c);
            } else if (
                c.status == IChallengeManager.Status.Answered && isHonestChallenger(c.challenger)
                    && c.kind == IChallengeManager.Kind.Job
            ) {
                vm.prank(c.challenger);
                try challenges.escalate(id) {} catch (bytes memory reason) {
                    _failWith("honest challenger could not escalate", reason);
                }
            }
        }
        _voteHonestly();
        _confirmDeliveries();
        _collect();
    }

    /// What honest parties do in their own interest once it is possible (no deadline: they may be
    /// late, so the fuzzer's own calls of these actions, by anyone, still come first at times):
    /// P0 finalizes its jobs, R0 takes back its expired jobs, honest challengers claim timeouts
    /// and resolve their disputes, P0 settles the challenges it answered.
    function _collect() internal {
        for (uint256 i; i < _jobs.length; ++i) {
            IJobEscrow.Job memory j = _jobs[i];
            IJobEscrow.JobState memory s = escrow.jobState(j.id);
            if (j.provider == P0 && s.status == IJobEscrow.JobStatus.Committed && !s.frozen && block.timestamp >= s.endsAt) {
                vm.prank(P0);
                try escrow.finalize(j) {} catch (bytes memory reason) {
                    _failWith("honest provider could not finalize", reason);
                }
            } else if (j.renter == R0 && s.status == IJobEscrow.JobStatus.Funded && block.timestamp >= j.deadline) {
                vm.prank(R0);
                try escrow.refundExpired(j) {} catch (bytes memory reason) {
                    _failWith("honest renter could not take back an expired job", reason);
                }
            }
        }
        _collectForTheAttacker();
        uint256 count = challenges.challengeCount();
        for (uint256 id = 1; id <= count; ++id) {
            IChallengeManager.Challenge memory c = challenges.challenge(id);
            if (c.status == IChallengeManager.Status.Open && isHonestChallenger(c.challenger) && block.timestamp > c.responseDeadline) {
                vm.prank(c.challenger);
                try challenges.claimTimeout(id) {} catch (bytes memory reason) {
                    _failWith("honest challenger could not claim a timeout", reason);
                }
            } else if (
                c.status == IChallengeManager.Status.Answered && c.provider == P0
                    && block.timestamp > uint256(c.answeredAt) + d.ESCALATION_WINDOW()
            ) {
                vm.prank(P0);
                try challenges.settle(id) {} catch (bytes memory reason) {
                    _failWith("honest provider could not settle", reason);
                }
            }
        }
        count = committee.disputeCount();
        for (uint256 id = 1; id <= count; ++id) {
            IDisputeCommittee.Dispute memory dispute = committee.dispute(id);
            if (dispute.resolved || block.timestamp <= dispute.voteEnd) continue;
            vm.prank(V1);
            try committee.resolve(id) {} catch (bytes memory reason) {
                _failWith("honest voter could not resolve a dispute", reason);
            }
        }
    }

    function _challengeWrongResults() internal {
        for (uint256 i; i < _jobs.length; ++i) {
            IJobEscrow.Job memory j = _jobs[i];
            if (!resultBad[j.id]) continue;
            IJobEscrow.JobState memory s = escrow.jobState(j.id);
            if (s.status != IJobEscrow.JobStatus.Committed || s.frozen || block.timestamp >= s.endsAt) continue;
            _challengeJob(j, j.renter == R0 ? R0 : V0, 1, d.MIN_BOND());
        }
    }

    function _voteHonestly() internal {
        uint256 count = committee.disputeCount();
        for (uint256 id = 1; id <= count; ++id) {
            IDisputeCommittee.Dispute memory dispute = committee.dispute(id);
            if (dispute.resolved || block.timestamp > dispute.voteEnd) continue;
            bool atFault = resultBad[challenges.challenge(dispute.ref).subject];
            _voteAs(V0, id, dispute, atFault);
            _voteAs(V1, id, dispute, atFault);
        }
    }

    function _voteAs(address voter, uint256 id, IDisputeCommittee.Dispute memory dispute, bool atFault) internal {
        if (voter == dispute.challenger || voter == dispute.provider || committee.hasVoted(id, voter)) return;
        vm.prank(voter);
        try committee.vote(id, atFault) {
            ++honestDutiesDone;
        } catch (bytes memory reason) {
            _failWith("honest voter could not vote", reason);
        }
    }

    /// P0 offers every lease it is paid for; R0 confirms P0's machine once offered and ends a
    /// lease whose offered machine refuses it (P1's) before its confirm window closes.
    function _confirmDeliveries() internal {
        uint256 count = leases.leaseCount();
        for (uint256 id = 1; id <= count; ++id) {
            ILeaseManager.Lease memory lease = leases.getLease(id);
            if (lease.status != ILeaseManager.LeaseStatus.Active) continue;
            ILeaseManager.Delivery memory delivery = leases.getDelivery(id);
            if (lease.provider == P0 && delivery.accessHash == 0 && block.timestamp < leases.deliveryDeadline(id)) {
                vm.prank(P0);
                try leases.offerAccess(id, keccak256(abi.encode("access", id))) {
                    ++honestDutiesDone;
                } catch (bytes memory reason) {
                    _failWith("honest provider could not offer a lease's machine", reason);
                }
                delivery = leases.getDelivery(id);
            }
            if (lease.renter != R0 || delivery.accessHash == 0 || delivery.confirmedAt != 0) continue;
            if (block.timestamp >= leases.confirmDeadline(id)) continue;
            vm.prank(R0);
            if (lease.provider == P0) {
                try leases.confirmDelivery(id, delivery.accessHash) {} catch (bytes memory reason) {
                    _failWith("honest renter could not confirm a delivery", reason);
                }
            } else {
                try leases.endLease(id) {} catch (bytes memory reason) {
                    _failWith("honest renter could not end an undelivered lease", reason);
                }
            }
        }
    }

    /// The earliest last moment, at `from` or later, of an honest duty still pending; zero if none.
    function _nextDutyDeadline(uint256 from) internal view returns (uint256 next) {
        for (uint256 i; i < _jobs.length; ++i) {
            uint256 id = _jobs[i].id;
            if (!resultBad[id]) continue;
            IJobEscrow.JobState memory s = escrow.jobState(id);
            if (s.status == IJobEscrow.JobStatus.Committed && !s.frozen) next = _earliest(next, uint256(s.endsAt) - 1, from);
        }
        uint256 count = challenges.challengeCount();
        for (uint256 id = 1; id <= count; ++id) {
            IChallengeManager.Challenge memory c = challenges.challenge(id);
            if (c.status == IChallengeManager.Status.Open && c.provider == P0) {
                next = _earliest(next, c.responseDeadline, from);
            } else if (c.status == IChallengeManager.Status.Answered && isHonestChallenger(c.challenger)) {
                next = _earliest(next, uint256(c.answeredAt) + d.ESCALATION_WINDOW(), from);
            }
        }
        count = committee.disputeCount();
        for (uint256 id = 1; id <= count; ++id) {
            IDisputeCommittee.Dispute memory dispute = committee.dispute(id);
            if (!dispute.resolved) next = _earliest(next, dispute.voteEnd, from);
        }
        count = leases.leaseCount();
        for (uint256 id = 1; id <= count; ++id) {
            ILeaseManager.Lease memory lease = leases.getLease(id);
            if (lease.status != ILeaseManager.LeaseStatus.Active) continue;
            ILeaseManager.Delivery memory delivery = leases.getDelivery(id);
            if (lease.provider == P0 && delivery.accessHash == 0) {
                next = _earliest(next, leases.deliveryDeadline(id) - 1, from);
            }
            if (lease.renter == R0 && delivery.accessHash != 0 && delivery.confirmedAt == 0) {
                next = _earliest(next, leases.confirmDeadline(id) - 1, from);
            }
        }
    }

    /// Moves time to `target`; an honest party that left a duty to the last moment does it then.
    function _advanceTo(uint256 target) internal {
        if (eager) _duties();
        uint256 from = block.timestamp;
        while (true) {
            uint256 next = _nextDutyDeadline(from);
            if (next == 0 || next >= target) break;
            _moveClock(next);
            _duties();
            from = next + 1;
        }
        _moveClock(target);
    }

    function _moveClock(uint256 target) internal {
        if (target <= block.timestamp) return;
        uint256 blocks = (target - block.timestamp) / 12 + 1;
        vm.warp(target);
        vm.roll(block.number + blocks);
    }

    /// The attacker takes its money too once it can: P1 finalizes its jobs and settles the
    /// challenges it answered (so a wrong result that escaped every challenge gets paid).
    function _collectForTheAttacker() internal {
        for (uint256 i; i < _jobs.length; ++i) {
            IJobEscrow.Job memory j = _jobs[i];
            if (j.provider != P1) continue;
            IJobEscrow.JobState memory s = escrow.jobState(j.id);
            if (s.status != IJobEscrow.JobStatus.Committed || s.frozen || block.timestamp < s.endsAt) continue;
            vm.prank(P1);
            try escrow.finalize(j) {} catch {}
        }
        uint256 count = challenges.challengeCount();
        for (uint256 id = 1; id <= count; ++id) {
            IChallengeManager.Challenge memory c = challenges.challenge(id);
            if (c.status != IChallengeManager.Status.Answered || c.provider != P1) continue;
            if (block.timestamp <= uint256(c.answeredAt) + d.ESCALATION_WINDOW()) continue;
            vm.prank(P1);
            try challenges.settle(id) {} catch {}
        }
    }

    // ------------------------------------------------------------------ one call per contract action

    function _challengeJob(IJobEscrow.Job memory j, address challenger, uint256 k, uint256 bond) internal {
        vm.deal(challenger, challenger.balance + bond);
        vm.prank(challenger);
        try challenges.challengeJob{value: bond}(j, k) {
            bondsPosted[challenger] += bond;
            if (isHonestChallenger(challenger)) ++honestDutiesDone;
        } catch (bytes memory reason) {
            // Only an honest challenge of a wrong result that is still challengeable must go through.
            IJobEscrow.JobState memory s = escrow.jobState(j.id);
            if (
                isHonestChallenger(challenger) && s.status == IJobEscrow.JobStatus.Committed && !s.frozen
                    && block.timestamp < s.endsAt
            ) _failWith("honest challenge of a wrong result refused", reason);
        }
    }

    /// P0 answers a challenge with its committed leaf (re-anchoring an expired block first).
    function _respond(uint256 id, IChallengeManager.Challenge memory c) internal {
        if (c.status != IChallengeManager.Status.Open) return;
        vm.prank(P0);
        try challenges.respond(id, _leaves(_leaf[c.subject], c.k), new bytes32[][](c.k)) {
            ++honestDutiesDone;
        } catch (bytes memory reason) {
            if (block.timestamp <= c.responseDeadline) _failWith("honest provider could not answer", reason);
        }
    }

    function _stakeAs(address account, uint256 amount) internal {
        vm.deal(account, account.balance + amount);
        vm.prank(account);
        staking.stake{value: amount}();
        staked[account] += amount;
    }

    function _register(address provider) internal {
        bytes32[] memory uuids = new bytes32[](GPUS);
        for (uint256 g; g < GPUS; ++g) uuids[g] = keccak256(abi.encode(provider, g));
        vm.prank(provider);
        registry.register("H100", uuids, 36e14, 1e12, "ipfs://provider");
    }

    /// The EIP-712 result P0 signs (JobEscrow's JobResult: adapt here when its fields change). P0
    /// commits as it signs, so it promises the latest commit time that still binds it (deadline - 1):
    /// its signature is then evidence against it in every case the escrow knows.
    function _result(uint256 jobId, bytes32 root, uint256 itemCount, bytes32 digest, uint64 commitBy)
        internal
        pure
        returns (IJobEscrow.JobResult memory)
    {
        return IJobEscrow.JobResult(jobId, root, itemCount, digest, commitBy);
    }

    function _signResult(uint256 jobId, bytes32 root, uint256 itemCount, bytes32 digest, uint64 commitBy)
        internal
        view
        returns (bytes memory)
    {
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(P0_KEY, escrow.jobResultDigest(_result(jobId, root, itemCount, digest, commitBy)));
        return abi.encodePacked(r, s, v);
    }

    // ------------------------------------------------------------------ helpers

    function _boundary(uint256 kind, uint256 pick) internal view returns (uint256) {
        kind %= 6;
        if (kind <= 1) {
            if (_jobs.length == 0) return 0;
            IJobEscrow.Job memory j = _jobs[pick % _jobs.length];
            return kind == 0 ? j.deadline : escrow.jobState(j.id).endsAt;
        }
        if (kind == 2) {
            (uint256 id, IChallengeManager.Challenge memory c) = _pickChallenge(pick);
            if (id == 0) return 0;
            if (c.answeredAt == 0) return c.responseDeadline;
            return uint256(c.answeredAt) + (pick % 2 == 0 ? d.ESCALATION_WINDOW() : d.FRAUD_WINDOW());
        }
        if (kind == 3) {
            uint256 count = committee.disputeCount();
            return count == 0 ? 0 : committee.dispute(1 + pick % count).voteEnd;
        }
        if (kind == 4) {
            uint256 count = leases.leaseCount();
            if (count == 0) return 0;
            uint256 id = 1 + pick % count;
            return pick % 2 == 0 ? leases.getLease(id).endsAt : leases.deliveryDeadline(id);
        }
        (, uint64 releaseAt) = staking.unbondingOf(_staker(pick));
        return releaseAt;
    }

    function _pickJob(uint256 pick) internal view returns (IJobEscrow.Job memory j) {
        if (_jobs.length != 0) j = _jobs[pick % _jobs.length];
    }

    /// A challenge in `status` (the fuzzer's pick among those), else any challenge: actions that
    /// only work in one status mostly reach a challenge in it.
    function _pickChallengeIn(uint256 pick, IChallengeManager.Status status)
        internal
        view
        returns (uint256 id, IChallengeManager.Challenge memory c)
    {
        uint256 count = challenges.challengeCount();
        uint256 matching;
        for (uint256 i = 1; i <= count; ++i) {
            if (challenges.challenge(i).status == status) ++matching;
        }
        if (matching == 0 || pick % 4 == 0) return _pickChallenge(pick / 4);
        uint256 wanted = pick % matching;
        for (uint256 i = 1; i <= count; ++i) {
            c = challenges.challenge(i);
            if (c.status != status) continue;
            if (wanted == 0) return (i, c);
            --wanted;
        }
    }

    function _pickChallenge(uint256 pick) internal view returns (uint256 id, IChallengeManager.Challenge memory c) {
        uint256 count = challenges.challengeCount();
        if (count == 0) return (0, c);
        id = 1 + pick % count;
        c = challenges.challenge(id);
    }

    function _anyone(uint256 pick) internal view returns (address) {
        return _accounts[pick % _accounts.length];
    }

    function _staker(uint256 pick) internal view returns (address) {
        uint256 who = pick % 3;
        return who == 0 ? P0 : (who == 1 ? P1 : A);
    }

    function _rightLeaf(IJobEscrow.Job memory j) internal pure returns (bytes32) {
        return keccak256(abi.encode("output", j.specHash));
    }

    function _leafHash(bytes32 leaf) internal pure returns (bytes32) {
        return keccak256(abi.encodePacked(bytes1(0x00), leaf));
    }

    /// k copies of a one-leaf tree's leaf (every index of a one-item result is 0; proofs empty).
    function _leaves(bytes32 leaf, uint256 k) internal pure returns (bytes[] memory leaves) {
        leaves = new bytes[](k);
        for (uint256 t; t < k; ++t) leaves[t] = abi.encodePacked(leaf);
    }

    /// The earlier of a (zero: none) and b, leaving b out when it is before `from`.
    function _earliest(uint256 a, uint256 b, uint256 from) internal pure returns (uint256) {
        if (b < from) return a;
        return a == 0 || b < a ? b : a;
    }

    function _fail(string memory what) internal {
        if (bytes(failure).length == 0) failure = what;
    }

    function _failWith(string memory what, bytes memory reason) internal {
        if (bytes(failure).length == 0) failure = string(abi.encodePacked(what, ": 0x", _hex(reason)));
    }

    function _hex(bytes memory data) internal pure returns (bytes memory out) {
        bytes16 digits = "0123456789abcdef";
        uint256 n = data.length < 68 ? data.length : 68;
        out = new bytes(2 * n);
        for (uint256 i; i < n; ++i) {
            out[2 * i] = digits[uint8(data[i]) >> 4];
            out[2 * i + 1] = digits[uint8(data[i]) & 0x0f];
        }
    }
}
