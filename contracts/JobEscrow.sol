// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {OneTimeWiring} from "./access/OneTimeWiring.sol";
import {EscrowBalances} from "./escrow/EscrowBalances.sol";
import {SignedResults} from "./escrow/SignedResults.sol";
import {IJobEscrow} from "./interfaces/IJobEscrow.sol";
import {IProviderRegistry} from "./interfaces/IProviderRegistry.sol";

/// @title JobEscrow
/// @notice Escrow of job payments; see IJobEscrow. For every token, the balance held equals the
/// price of every job still Funded or Committed plus all pull balances. DISPUTE_ROLE is granted
/// once by the deployer (OneTimeWiring); parameters are immutable. The provider's stake is locked
/// from its commit until the job is paid or refunded (EscrowBalances counts its open jobs, and
/// Staking asks before any unbond). Jobs are funded only for providers with the minimum stake
/// bonded and nothing unbonding, and the unbonding delay covers the longest job plus a challenge
/// window: the stake behind a signed result cannot leave before the renter had a challenge window
/// after the deadline to slash (SignedResults).
/// @dev Built from parts, one deployed contract: this file is the job lifecycle (create, commit,
/// finalize, refunds, cancel, freezes); EscrowJobs keeps the jobs' slots, EscrowBalances the
/// funds vault and each provider's standing (open-job count, activity, bonded), SignedResults
/// the slashing of signed results. Gas is the point of the layout: see EscrowJobs and
/// EscrowBalances.
contract JobEscrow is OneTimeWiring, SignedResults {
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

    /// @dev What a refund of a frozen job needs, kept by freeze so that resolveFreeze (called by
    /// the ChallengeManager, which keeps only the job id) can refund; deleted when it resolves.
    struct FrozenJob {
        address renter;
        uint80 price;
        address provider;
        address token;
    }

    /// @inheritdoc IJobEscrow
    uint64 public immutable challengeWindow;
    /// @inheritdoc IJobEscrow
    uint64 public immutable maxJobDuration;
    /// @inheritdoc IJobEscrow
    uint64 public immutable cancelGrace;
    /// @inheritdoc IJobEscrow
    uint16 public immutable protocolFeeBps;

    mapping(uint256 jobId => FrozenJob) private _frozen;

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
    ) EscrowBalances(registry_, treasury_) {
        if (challengeWindow_ == 0 || challengeWindow_ > MAX_CHALLENGE_WINDOW) {
            revert JobEscrowInvalidWindow(challengeWindow_);
        }
        if (protocolFeeBps_ > MAX_FEE_BPS) revert JobEscrowInvalidFee(protocolFeeBps_);
        if (maxJobDuration_ == 0 || maxJobDuration_ > MAX_JOB_DURATION_LIMIT) {
            revert JobEscrowInvalidMaxDuration(maxJobDuration_);
        }
        if (cancelGrace_ == 0 || cancelGrace_ > MAX_CANCEL_GRACE) revert JobEscrowInvalidCancelGrace(cancelGrace_);
        // Stake bonded when a job is funded stays in Staking (bonded or unbonding, where slashes
        // reach it) until funding + unbondingDelay: that must cover the latest deadline plus a
        // challenge window, the renter's time to slash a signed result that was never committed.
        uint256 needed = uint256(maxJobDuration_) + challengeWindow_;
        uint256 delay = staking.unbondingDelay();
        if (delay < needed) revert JobEscrowUnbondingTooShort(delay, needed);
        challengeWindow = challengeWindow_;
        protocolFeeBps = protocolFeeBps_;
        maxJobDuration = maxJobDuration_;
        cancelGrace = cancelGrace_;
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
        _withdrawEth();
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
            _release(job.provider);
        }
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

    function _checkBatch(uint256 length) private pure {
        if (length == 0 || length > MAX_BATCH_SIZE) revert JobEscrowBadBatchSize(length, MAX_BATCH_SIZE);
    }
}
