// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {OneTimeWiring} from "./access/OneTimeWiring.sol";
import {IJobEscrow} from "./interfaces/IJobEscrow.sol";
import {IProviderActivity} from "./interfaces/IProviderActivity.sol";
import {IProviderRegistry} from "./interfaces/IProviderRegistry.sol";
import {IStakeLocker} from "./interfaces/IStakeLocker.sol";
import {IStakeWatcher} from "./interfaces/IStakeWatcher.sol";
import {IStaking} from "./interfaces/IStaking.sol";

/// @title JobEscrow
/// @notice Escrow of job payments; see IJobEscrow. For every token, the balance held equals the
/// price of every job still Funded or Committed plus all pull balances. DISPUTE_ROLE is granted
/// once by the deployer (OneTimeWiring); parameters are immutable. The provider's stake is locked
/// from its commit until the job is paid or refunded: this contract counts the provider's open
/// (committed, unsettled) jobs and Staking asks it (IStakeLocker.lockedWorkOf) before any unbond,
/// so the count lives in a slot the commit and the payout write anyway. A provider's EIP-712 signed
/// result (protocol/job_result.py) binds it to its commit: slashSignedResult slashes it through
/// Staking (SLASHER_ROLE) when the commit differs, or never came although the provider promised
/// it before the deadline (JobResult.commitBy), and the renter gets the job's price back. Jobs are
/// funded only for providers with the minimum stake bonded and nothing unbonding, and the
/// unbonding delay covers the longest job plus a challenge window: the stake behind a signed
/// result cannot leave before the renter had a challenge window after the deadline to slash.
/// @dev Gas is the point of the layout: a job keeps one slot (JobState: a 192-bit truncated hash
/// of the Job beside its status, frozen flag and endsAt), written new once at create and
/// rewritten at commit and at settlement; the Job itself comes back in calldata. Finding two Jobs
/// with the same 192-bit hash takes about 2^96 hashes (birthday bound), out of reach. Pull
/// balances share a slot with a flag that stays set once credited (a withdrawal then rewrites a
/// live slot instead of emptying it, so the next credit costs 5,000 gas instead of 22,100), and a
/// provider's open-job count and its activity flag (which the registry sets: IProviderActivity)
/// sit in its ETH balance slot: an ETH payout writes the count with the balance, and funding a
/// job reads one slot of this contract instead of calling the registry and Staking.
contract JobEscrow is IJobEscrow, OneTimeWiring, EIP712 {
    using SafeERC20 for IERC20;

    bytes32 public constant DISPUTE_ROLE = keccak256("DISPUTE_ROLE");
    uint16 public constant MAX_FEE_BPS = 1_000;
    /// @inheritdoc IJobEscrow
    uint64 public constant MAX_CHALLENGE_WINDOW = 7 days;
    /// @inheritdoc IJobEscrow
    uint64 public constant MAX_JOB_DURATION_LIMIT = 30 days;
    /// @inheritdoc IJobEscrow
    uint64 public constant MAX_CANCEL_GRACE = 1 days;
    uint256 public constant MAX_FAILURE_REASON_BYTES = 256;
    /// @inheritdoc IJobEscrow
    uint256 public constant MAX_BATCH_SIZE = 64;
    /// @inheritdoc IJobEscrow
    uint256 public constant MAX_PRICE = type(uint80).max;
    /// @inheritdoc IJobEscrow
    uint256 public constant MAX_ITEM_COUNT = type(uint32).max;
    /// @notice Latest deadline any job may have: a commit just before it still ends its challenge
    /// window inside uint32 (early 2106).
    uint64 public constant MAX_DEADLINE = type(uint32).max - MAX_CHALLENGE_WINDOW;
    uint256 private constant BPS = 10_000;
    /// @dev EIP-712 type of what a provider signs; protocol/job_result.py JOB_RESULT_TYPES.
    bytes32 private constant JOB_RESULT_TYPEHASH =
        keccak256(
        "JobResult(uint256 jobId,bytes32 outputRoot,uint256 itemCount,bytes32 resultDigest,uint64 commitBy)"
    );

    /// @dev What a refund of a frozen job needs, kept by freeze so that resolveFreeze (called by
    /// the ChallengeManager, which keeps only the job id) can refund; deleted when it resolves.
    struct FrozenJob {
        address renter;
        uint80 price;
        address provider;
        address token;
    }

    /// @dev A pull balance of one (token, account). `openJobs`, `active` and `bonded` are used in
    /// the ETH (token zero) entry of a provider only: its committed jobs not yet paid or refunded,
    /// whether it is registered and not deactivated (the registry tells), and whether its stake
    /// can back a job (minimum bonded, nothing unbonding: Staking tells, IStakeWatcher). `used` is
    /// set by the first credit and never cleared. uint176 holds any balance: each job is at most
    /// MAX_PRICE (2^80) and there are fewer than 2^56 jobs.
    struct Balance {
        uint176 owed;
        uint56 openJobs;
        bool used;
        bool active;
        bool bonded;
    }

    IProviderRegistry public immutable registry;
    /// @notice The registry's Staking: a committing provider's stake is checked there; the lock is
    /// this contract's open-job count, which Staking reads before any unbond (lockedWorkOf).
    IStaking public immutable staking;
    /// @notice The registry's minimum provider stake, required and locked at commit.
    uint256 public immutable minProviderStake;
    /// @inheritdoc IJobEscrow
    uint256 public jobCount;
    /// @inheritdoc IJobEscrow
    uint64 public immutable challengeWindow;
    /// @inheritdoc IJobEscrow
    uint64 public immutable maxJobDuration;
    /// @inheritdoc IJobEscrow
    uint64 public immutable cancelGrace;
    /// @inheritdoc IJobEscrow
    uint16 public immutable protocolFeeBps;
    /// @inheritdoc IJobEscrow
    address public immutable treasury;

    mapping(uint256 jobId => JobState) private _jobs;
    mapping(uint256 jobId => FrozenJob) private _frozen;
    mapping(address token => mapping(address account => Balance)) private _balances;

    /// @param challengeWindow_ seconds a commit can be challenged, at most MAX_CHALLENGE_WINDOW
    /// @param protocolFeeBps_ fee on finalized jobs, at most MAX_FEE_BPS
    /// @param maxJobDuration_ longest time from funding to a job's deadline, at most
    /// MAX_JOB_DURATION_LIMIT
    /// @param cancelGrace_ seconds from requestCancel to cancel, 1..MAX_CANCEL_GRACE: longer than
    /// a provider's commit interval, or a renter could cancel a job whose result it already has
    constructor(
        IProviderRegistry registry_,
        address treasury_,
        uint64 challengeWindow_,
        uint16 protocolFeeBps_,
        uint64 maxJobDuration_,
        uint64 cancelGrace_
    ) EIP712("Unchained JobEscrow", "1") {
        if (address(registry_) == address(0) || treasury_ == address(0)) revert JobEscrowZeroAddress();
        if (challengeWindow_ == 0 || challengeWindow_ > MAX_CHALLENGE_WINDOW) {
            revert JobEscrowInvalidWindow(challengeWindow_);
        }
        if (protocolFeeBps_ > MAX_FEE_BPS) revert JobEscrowInvalidFee(protocolFeeBps_);
        if (maxJobDuration_ == 0 || maxJobDuration_ > MAX_JOB_DURATION_LIMIT) {
            revert JobEscrowInvalidMaxDuration(maxJobDuration_);
        }
        if (cancelGrace_ == 0 || cancelGrace_ > MAX_CANCEL_GRACE) revert JobEscrowInvalidCancelGrace(cancelGrace_);
        registry = registry_;
        IStaking staking_ = registry_.staking();
        // Stake bonded when a job is funded stays in Staking (bonded or unbonding, where slashes
        // reach it) until funding + unbondingDelay: that must cover the latest deadline plus a
        // challenge window, the renter's time to slash a signed result that was never committed.
        uint256 needed = uint256(maxJobDuration_) + challengeWindow_;
        uint256 delay = staking_.unbondingDelay();
        if (delay < needed) revert JobEscrowUnbondingTooShort(delay, needed);
        staking = staking_;
        minProviderStake = registry_.minProviderStake();
        treasury = treasury_;
        challengeWindow = challengeWindow_;
        protocolFeeBps = protocolFeeBps_;
        maxJobDuration = maxJobDuration_;
        cancelGrace = cancelGrace_;
        // Every finalization credits the treasury's fee: its ETH slot is made live here, once, at
        // the deployer's cost, instead of by the first job's finalization (22,100 gas, not 5,000).
        _balances[address(0)][treasury_].used = true;
    }

    /// @inheritdoc IJobEscrow
    function wire(address[] calldata disputers) external wiring {
        _grantAll(DISPUTE_ROLE, disputers);
    }

    /// @inheritdoc IJobEscrow
    function createJob(address provider, bytes32 specHash, uint256 price, uint64 deadline)
        external
        payable
        returns (uint256 jobId)
    {
        if (msg.value != price) revert JobEscrowWrongValue(msg.value, price);
        jobId = _create(provider, address(0), specHash, price, deadline);
    }

    /// @inheritdoc IJobEscrow
    function createJobWithToken(address provider, address token, bytes32 specHash, uint256 price, uint64 deadline)
        external
        returns (uint256 jobId)
    {
        if (token == address(0)) revert JobEscrowZeroToken();
        jobId = _create(provider, token, specHash, price, deadline);
        IERC20(token).safeTransferFrom(msg.sender, address(this), price);
    }

    /// @inheritdoc IJobEscrow
    function commitResult(Job calldata job, bytes32 outputRoot, uint256 itemCount, bytes32 resultDigest) external {
        _commit(job, outputRoot, itemCount, resultDigest);
        _lock(msg.sender, 1);
    }

    /// @inheritdoc IJobEscrow
    /// @dev Each entry goes through commitResult's checks and effects; every entry's provider is
    /// the sender (checked), so the stake is checked and the open-job count raised once for all
    /// (each job still counts one piece, released by whatever ends it).
    function commitResults(
        Job[] calldata jobs,
        bytes32[] calldata outputRoots,
        uint256[] calldata itemCounts,
        bytes32[] calldata resultDigests
    ) external {
        uint256 n = jobs.length;
        _checkBatch(n);
        if (outputRoots.length != n || itemCounts.length != n || resultDigests.length != n) {
            revert JobEscrowBatchLengthMismatch();
        }
        for (uint256 i; i < n; ++i) {
            _commit(jobs[i], outputRoots[i], itemCounts[i], resultDigests[i]);
        }
        _lock(msg.sender, n);
    }

    /// @inheritdoc IJobEscrow
    function finalize(Job calldata job) external {
        uint256 fee = _finalize(job);
        _pay(job.token, job.provider, job.price - fee, 1);
        _credit(job.token, treasury, fee);
    }

    /// @inheritdoc IJobEscrow
    function finalizeJobs(Job[] calldata jobs) external {
        _finalizeJobs(jobs);
    }

    /// @inheritdoc IJobEscrow
    /// @dev The payout and the withdrawal write the same slot: the second write costs 100 gas,
    /// against a transaction of its own (21,000 and more) for a separate withdraw.
    function finalizeJobsAndWithdraw(Job[] calldata jobs) external {
        _finalizeJobs(jobs);
        _withdraw(address(0));
    }

    /// @inheritdoc IProviderActivity
    /// @dev An inactive provider's `bonded` is not kept up to date (stakeChanged skips it, so
    /// that verifiers' stakes write nothing here): it is read from Staking when it becomes active.
    function setProviderActive(address provider, bool active) external {
        if (msg.sender != address(registry)) revert JobEscrowNotRegistry(msg.sender);
        Balance storage standing = _balances[address(0)][provider];
        if (active) {
            (standing.active, standing.bonded) = (true, staking.isBondedFor(provider, minProviderStake));
        } else {
            standing.active = false;
        }
    }

    /// @inheritdoc IStakeWatcher
    function stakeChanged(address account, uint256 bonded, bool unbonding) external {
        if (msg.sender != address(staking)) revert JobEscrowNotStaking(msg.sender);
        Balance storage standing = _balances[address(0)][account];
        if (!standing.active) return;
        bool backed = bonded >= minProviderStake && !unbonding;
        if (standing.bonded != backed) standing.bonded = backed;
    }

    /// @dev finalizeJobs: credits (and the provider's released jobs) accumulate in memory while
    /// the provider and token (for fees: the token) stay the same, and are written when they
    /// change and at the end: one balance write per run instead of one per job.
    function _finalizeJobs(Job[] calldata jobs) private {
        uint256 n = jobs.length;
        _checkBatch(n);
        address token = jobs[0].token;
        address provider = jobs[0].provider;
        address feeToken = token;
        uint256 payout;
        uint256 released;
        uint256 fees;
        for (uint256 i; i < n; ++i) {
            Job calldata job = jobs[i];
            uint256 fee = _finalize(job);
            if (job.provider != provider || job.token != token) {
                _pay(token, provider, payout, released);
                (token, provider, payout, released) = (job.token, job.provider, 0, 0);
            }
            if (job.token != feeToken) {
                _credit(feeToken, treasury, fees);
                (feeToken, fees) = (job.token, 0);
            }
            payout += job.price - fee;
            ++released;
            fees += fee;
        }
        _pay(token, provider, payout, released);
        _credit(feeToken, treasury, fees);
    }

    /// @inheritdoc IJobEscrow
    function refundExpired(Job calldata job) external {
        (JobState storage state, JobStatus status) = _checked(job);
        _requireStatus(job.id, status, JobStatus.Funded);
        if (block.timestamp < job.deadline) revert JobEscrowDeadlineNotPassed(job.id, job.deadline);
        _refund(state, job.renter, job.token, job.price);
        emit JobExpired(job.id, job.renter, job.price);
    }

    /// @inheritdoc IJobEscrow
    function failJob(Job calldata job, string calldata reason) external {
        (JobState storage state, JobStatus status) = _checked(job);
        _requireStatus(job.id, status, JobStatus.Funded);
        if (msg.sender != job.provider) revert JobEscrowNotProvider(msg.sender);
        uint256 length = bytes(reason).length;
        if (length > MAX_FAILURE_REASON_BYTES) revert JobEscrowReasonTooLong(length, MAX_FAILURE_REASON_BYTES);
        _refund(state, job.renter, job.token, job.price);
        emit JobFailed(job.id, msg.sender, reason, job.price);
    }

    /// @inheritdoc IJobEscrow
    /// @dev The time sits in the slot's endsAt, which the commit overwrites with its window end:
    /// a commit in the grace voids the request at no extra write. Fits in 32 bits: now < deadline
    /// <= MAX_DEADLINE = uint32 max - MAX_CHALLENGE_WINDOW, and MAX_CANCEL_GRACE is below that window.
    function requestCancel(Job calldata job) external {
        (JobState storage state, JobStatus status) = _checked(job);
        _requireStatus(job.id, status, JobStatus.Funded);
        if (msg.sender != job.renter) revert JobEscrowNotRenter(msg.sender);
        if (state.endsAt != 0) revert JobEscrowCancelAlreadyRequested(job.id, state.endsAt);
        if (block.timestamp >= job.deadline) revert JobEscrowDeadlinePassed(job.id, job.deadline);
        uint32 cancellableAt = uint32(block.timestamp + cancelGrace);
        state.endsAt = cancellableAt;
        emit JobCancelRequested(job.id, msg.sender, cancellableAt);
    }

    /// @inheritdoc IJobEscrow
    function cancel(Job calldata job) external {
        (JobState storage state, JobStatus status) = _checked(job);
        _requireStatus(job.id, status, JobStatus.Funded);
        if (msg.sender != job.renter) revert JobEscrowNotRenter(msg.sender);
        uint32 cancellableAt = state.endsAt;
        if (cancellableAt == 0) revert JobEscrowCancelNotRequested(job.id);
        if (block.timestamp < cancellableAt) revert JobEscrowCancelTooEarly(job.id, cancellableAt);
        state.cancelled = true;
        _refund(state, job.renter, job.token, job.price);
        emit JobCancelled(job.id, msg.sender, job.price);
    }

    /// @inheritdoc IJobEscrow
    function freeze(Job calldata job) external onlyRole(DISPUTE_ROLE) {
        (JobState storage state, JobStatus status) = _checked(job);
        _requireStatus(job.id, status, JobStatus.Committed);
        if (state.frozen) revert JobEscrowFrozen(job.id);
        if (block.timestamp >= state.endsAt) revert JobEscrowWindowClosed(job.id, state.endsAt);
        state.frozen = true;
        _frozen[job.id] = FrozenJob(job.renter, uint80(job.price), job.provider, job.token);
        emit JobFrozen(job.id, msg.sender);
    }

    /// @inheritdoc IJobEscrow
    function resolveFreeze(uint256 jobId, bool providerAtFault) external onlyRole(DISPUTE_ROLE) {
        JobState storage state = _jobs[jobId];
        if (!state.frozen) revert JobEscrowNotFrozen(jobId);
        FrozenJob memory job = _frozen[jobId];
        delete _frozen[jobId];
        state.frozen = false;
        // A job whose provider was slashed with its signed result was refunded then (Refunded).
        bool refund = providerAtFault && state.status == JobStatus.Committed;
        emit JobUnfrozen(jobId, providerAtFault, refund ? job.price : 0);
        if (refund) {
            _refund(state, job.renter, job.token, job.price);
            _balances[address(0)][job.provider].openJobs -= 1;
        }
    }

    /// @inheritdoc IJobEscrow
    /// @dev A job counts as committed once its hash covers a result (itemCount is never zero in a
    /// commit, and the hash stays through every later status), so a commit that a challenge
    /// later refunded is still compared.
    function slashSignedResult(Job calldata job, JobResult calldata result, bytes calldata signature)
        external
        returns (uint256 slashed)
    {
        (JobState storage state, JobStatus status) = _checked(job);
        uint256 jobId = job.id;
        if (result.jobId != jobId) revert JobEscrowJobMismatch(result.jobId);
        if (state.resultSlashed) revert JobEscrowResultAlreadySlashed(jobId);
        address signer = ECDSA.recover(jobResultDigest(result), signature);
        if (signer != job.provider) revert JobEscrowNotProviderSignature(jobId, signer);
        if (job.itemCount != 0) {
            if (
                job.outputRoot == result.outputRoot && job.itemCount == result.itemCount
                    && job.resultDigest == result.resultDigest
            ) revert JobEscrowResultMatchesCommit(jobId);
        } else {
            if (state.cancelled) revert JobEscrowJobCancelled(jobId);
            // No margin stated: the provider never promised a commit (a deadline too close to
            // commit in time), so its result binds it only against committing something else.
            if (result.commitBy >= job.deadline) revert JobEscrowResultNotBinding(jobId, result.commitBy, job.deadline);
            if (block.timestamp < job.deadline) revert JobEscrowDeadlineNotPassed(jobId, job.deadline);
        }
        state.resultSlashed = true;
        // The provider is paid nothing for a job it was slashed for: money still held for it goes
        // back to the renter (a frozen job too: resolveFreeze then finds it Refunded).
        uint256 refund;
        if (status == JobStatus.Funded || status == JobStatus.Committed) {
            refund = job.price;
            _refund(state, job.renter, job.token, refund);
            if (status == JobStatus.Committed) _balances[address(0)][job.provider].openJobs -= 1;
        }
        slashed = staking.slash(job.provider, minProviderStake, msg.sender);
        emit SignedResultSlashed(jobId, job.provider, msg.sender, slashed, refund);
    }

    /// @inheritdoc IJobEscrow
    function jobResultDigest(JobResult calldata result) public view returns (bytes32) {
        return _hashTypedDataV4(
            keccak256(
                abi.encode(
                    JOB_RESULT_TYPEHASH,
                    result.jobId,
                    result.outputRoot,
                    result.itemCount,
                    result.resultDigest,
                    result.commitBy
                )
            )
        );
    }

    /// @inheritdoc IJobEscrow
    function withdraw(address token) external {
        if (_withdraw(token) == 0) revert JobEscrowNothingOwed(token, msg.sender);
    }

    /// @inheritdoc IJobEscrow
    function isProviderActive(address provider) external view returns (bool) {
        return _balances[address(0)][provider].active;
    }

    /// @dev Pays the caller its whole balance in `token`, if it has one; returns the amount. Leaves
    /// the slot's flags (and a provider's open-job count): see Balance.
    function _withdraw(address token) private returns (uint256 amount) {
        Balance storage balance = _balances[token][msg.sender];
        amount = balance.owed;
        if (amount == 0) return 0;
        balance.owed = 0;
        emit Withdrawn(token, msg.sender, amount);
        if (token == address(0)) {
            (bool ok,) = msg.sender.call{value: amount}("");
            if (!ok) revert JobEscrowTransferFailed(msg.sender, amount);
        } else {
            IERC20(token).safeTransfer(msg.sender, amount);
        }
    }

    /// @inheritdoc IJobEscrow
    function jobState(uint256 jobId) external view returns (JobState memory) {
        return _jobs[jobId];
    }

    /// @inheritdoc IJobEscrow
    /// @dev Job is ten static words, so abi.encode(job) is the 320 bytes at `job` in calldata
    /// when they are canonical (clean addresses and uint64); hashed as they are, non-canonical
    /// words give another hash, which no stored jobHash matches.
    function hashJob(Job calldata job) public pure returns (bytes24 jobHash) {
        assembly ("memory-safe") {
            let ptr := mload(0x40)
            calldatacopy(ptr, job, 0x140)
            jobHash := and(keccak256(ptr, 0x140), not(0xffffffffffffffff))
        }
    }

    /// @inheritdoc IJobEscrow
    function owedTo(address token, address account) external view returns (uint256) {
        return _balances[token][account].owed;
    }

    /// @inheritdoc IStakeLocker
    /// @dev The provider's committed jobs not yet paid or refunded (frozen ones included).
    function lockedWorkOf(address account) external view returns (uint256) {
        return _balances[address(0)][account].openJobs;
    }

    function _create(address provider, address token, bytes32 specHash, uint256 price, uint64 deadline)
        private
        returns (uint256 jobId)
    {
        if (price == 0) revert JobEscrowZeroPrice();
        if (price > MAX_PRICE) revert JobEscrowPriceTooLarge(price);
        if (deadline <= block.timestamp) revert JobEscrowDeadlineInPast(deadline);
        uint256 latest = block.timestamp + maxJobDuration;
        if (latest > MAX_DEADLINE) latest = MAX_DEADLINE;
        if (deadline > latest) revert JobEscrowDeadlineTooFar(deadline, latest);
        Balance storage standing = _balances[address(0)][provider];
        if (!standing.active) revert JobEscrowProviderInactive(provider);
        // The stake that will back this job's signed result: bonded now and not leaving (see the
        // constructor's delay check). Kept in the same slot as `active` (Staking tells it).
        if (!standing.bonded) revert JobEscrowProviderNotBonded(provider);
        jobId = ++jobCount;
        // keccak256(abi.encode(Job(jobId, msg.sender, provider, token, price, specHash, deadline,
        // 0, 0, 0))): ten words in scratch memory past the free pointer (it is not moved).
        bytes24 jobHash;
        assembly ("memory-safe") {
            let ptr := mload(0x40)
            mstore(ptr, jobId)
            mstore(add(ptr, 0x20), caller())
            mstore(add(ptr, 0x40), provider)
            mstore(add(ptr, 0x60), token)
            mstore(add(ptr, 0x80), price)
            mstore(add(ptr, 0xa0), specHash)
            mstore(add(ptr, 0xc0), deadline)
            mstore(add(ptr, 0xe0), 0)
            mstore(add(ptr, 0x100), 0)
            mstore(add(ptr, 0x120), 0)
            jobHash := and(keccak256(ptr, 0x140), not(0xffffffffffffffff))
        }
        // The slot is new (all zero): the two fields that are not, in one write.
        JobState storage state = _jobs[jobId];
        (state.jobHash, state.status) = (jobHash, JobStatus.Funded);
        emit JobCreated(jobId, msg.sender, provider, token, price, specHash, deadline);
    }

    /// @dev commitResult's checks and effects: the job is accepted on the way (the stake lock
    /// reverts below the minimum stake) and its hash now covers the result.
    function _commit(Job calldata job, bytes32 outputRoot, uint256 itemCount, bytes32 resultDigest) private {
        (JobState storage state, JobStatus status) = _checked(job);
        uint256 jobId = job.id;
        _requireStatus(jobId, status, JobStatus.Funded);
        if (msg.sender != job.provider) revert JobEscrowNotProvider(msg.sender);
        if (block.timestamp >= job.deadline) revert JobEscrowDeadlinePassed(jobId, job.deadline);
        if (outputRoot == bytes32(0) || itemCount == 0) revert JobEscrowEmptyResult();
        if (itemCount > MAX_ITEM_COUNT) revert JobEscrowItemCountTooLarge(itemCount);
        // The job as checked (canonical: it hashed to the slot) with its result in words 7..9.
        bytes24 committedHash;
        assembly ("memory-safe") {
            let ptr := mload(0x40)
            calldatacopy(ptr, job, 0x140)
            mstore(add(ptr, 0xe0), outputRoot)
            mstore(add(ptr, 0x100), itemCount)
            mstore(add(ptr, 0x120), resultDigest)
            committedHash := and(keccak256(ptr, 0x140), not(0xffffffffffffffff))
        }
        // Fits: block.timestamp < deadline <= MAX_DEADLINE = uint32 max - MAX_CHALLENGE_WINDOW.
        uint32 windowEnd = uint32(block.timestamp + challengeWindow);
        state.jobHash = committedHash;
        state.status = JobStatus.Committed;
        state.endsAt = windowEnd;
        emit ResultCommitted(jobId, outputRoot, itemCount, resultDigest, windowEnd);
    }

    /// @dev Accepts `count` jobs just committed by `provider`: its bonded stake must be at least
    /// the minimum (Staking's own error, as its lock gave before), and they count as open work,
    /// which Staking reads before any unbond, until each is paid or refunded.
    function _lock(address provider, uint256 count) private {
        uint256 bonded = staking.stakeOf(provider);
        if (bonded < minProviderStake) revert IStaking.StakingBelowMinimum(provider, bonded, minProviderStake);
        // count <= MAX_BATCH_SIZE and the total stays below the number of jobs: fits in uint56.
        _balances[address(0)][provider].openJobs += uint56(count);
    }

    /// @dev finalize's checks and effects but the credits; returns the fee.
    function _finalize(Job calldata job) private returns (uint256 fee) {
        (JobState storage state, JobStatus status) = _checked(job);
        _requireStatus(job.id, status, JobStatus.Committed);
        // One statement, so that the two fields cost one slot read.
        (bool frozen, uint64 windowEnd) = (state.frozen, state.endsAt);
        if (frozen) revert JobEscrowFrozen(job.id);
        if (block.timestamp < windowEnd) revert JobEscrowWindowOpen(job.id, windowEnd);
        state.status = JobStatus.Finalized;
        uint256 price = job.price;
        fee = (price * protocolFeeBps) / BPS;
        emit JobFinalized(job.id, job.provider, price - fee, fee);
    }

    /// @dev Credits `provider` its payout and releases `released` of its open jobs: for ETH one
    /// slot holds both, so a payout writes it once.
    function _pay(address token, address provider, uint256 payout, uint256 released) private {
        Balance storage eth = _balances[address(0)][provider];
        if (token == address(0)) {
            // payout is at most MAX_BATCH_SIZE prices of at most MAX_PRICE: fits in uint176.
            (eth.owed, eth.openJobs, eth.used) = (eth.owed + uint176(payout), eth.openJobs - uint56(released), true);
        } else {
            eth.openJobs -= uint56(released);
            _credit(token, provider, payout);
        }
    }

    function _credit(address token, address account, uint256 amount) private {
        if (amount == 0) return;
        Balance storage balance = _balances[token][account];
        // amount is at most MAX_BATCH_SIZE prices of at most MAX_PRICE: fits in uint176.
        (balance.owed, balance.used) = (balance.owed + uint176(amount), true);
    }

    function _checkBatch(uint256 length) private pure {
        if (length == 0 || length > MAX_BATCH_SIZE) revert JobEscrowBadBatchSize(length, MAX_BATCH_SIZE);
    }

    /// @dev Ends the job as Refunded and credits the renter its full price.
    function _refund(JobState storage state, address renter, address token, uint256 price) private {
        state.status = JobStatus.Refunded;
        _credit(token, renter, price);
    }

    /// @dev The job's slot, once `job` is known to be what it holds, and its status (read with
    /// the hash in one statement: one slot read).
    function _checked(Job calldata job) private view returns (JobState storage state, JobStatus status) {
        state = _jobs[job.id];
        bytes24 jobHash;
        (status, jobHash) = (state.status, state.jobHash);
        if (status == JobStatus.None) revert JobEscrowUnknownJob(job.id);
        if (jobHash != hashJob(job)) revert JobEscrowJobMismatch(job.id);
    }

    function _requireStatus(uint256 jobId, JobStatus status, JobStatus expected) private pure {
        if (status != expected) revert JobEscrowWrongStatus(jobId, status);
    }
}
