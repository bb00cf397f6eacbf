// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {OneTimeWiring} from "./access/OneTimeWiring.sol";
import {IJobEscrow} from "./interfaces/IJobEscrow.sol";
import {IProviderRegistry} from "./interfaces/IProviderRegistry.sol";
import {IStaking} from "./interfaces/IStaking.sol";

/// @title JobEscrow
/// @notice Escrow of job payments; see IJobEscrow. For every token, the balance held equals the
/// price of every job still Funded, Accepted or Committed plus all pull balances. DISPUTE_ROLE is
/// granted once by the deployer (OneTimeWiring); parameters are immutable. The provider's stake
/// is locked in Staking from accept (explicit, or implied by the first commit) until the job is
/// paid or refunded. A provider's EIP-712 signed result (protocol/job_result.py) binds it to its
/// commit: slashSignedResult slashes it through Staking (SLASHER_ROLE) when the commit differs
/// or never came.
contract JobEscrow is IJobEscrow, OneTimeWiring, EIP712 {
    using SafeERC20 for IERC20;

    bytes32 public constant DISPUTE_ROLE = keccak256("DISPUTE_ROLE");
    uint16 public constant MAX_FEE_BPS = 1_000;
    /// @inheritdoc IJobEscrow
    uint64 public constant MAX_CHALLENGE_WINDOW = 7 days;
    /// @inheritdoc IJobEscrow
    uint64 public constant MAX_JOB_DURATION_LIMIT = 30 days;
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
        keccak256("JobResult(uint256 jobId,bytes32 outputRoot,uint256 itemCount,bytes32 resultDigest)");

    /// @dev The Job of the interface packed so that creating an ETH job writes 3 new slots (a
    /// token job 4) and committing writes 2 new ones plus the two header slots it already reads.
    /// Every new slot costs 22.1k gas, so this layout is what the lifecycle's gas is made of.
    /// committedAt is not stored: it is challengeWindowEnd - challengeWindow (immutable).
    /// Bounds are checked where values enter: price <= MAX_PRICE, itemCount <= MAX_ITEM_COUNT,
    /// deadline <= MAX_DEADLINE (so challengeWindowEnd fits too).
    struct StoredJob {
        address renter; // slot 0
        uint80 price;
        JobStatus status;
        bool frozen;
        address provider; // slot 1
        uint32 deadline;
        uint32 challengeWindowEnd;
        uint32 itemCount;
        bytes32 specHash; // slot 2
        address token; // slot 3, left zero (unwritten) for ETH
        bool cancelled; // written only by cancel: a cancelled job's signed result is not slashable
        bool resultSlashed; // written only by slashSignedResult: once per job
        bytes32 outputRoot; // slot 4, at commit
        bytes32 resultDigest; // slot 5, at commit
    }

    IProviderRegistry public immutable registry;
    /// @notice The registry's Staking: provider stake is checked and locked there.
    IStaking public immutable staking;
    /// @notice The registry's minimum provider stake, required at accept and commit.
    uint256 public immutable minProviderStake;
    /// @inheritdoc IJobEscrow
    uint256 public jobCount;
    /// @inheritdoc IJobEscrow
    uint64 public immutable challengeWindow;
    /// @inheritdoc IJobEscrow
    uint64 public immutable maxJobDuration;
    /// @inheritdoc IJobEscrow
    uint16 public immutable protocolFeeBps;
    /// @inheritdoc IJobEscrow
    address public immutable treasury;

    mapping(uint256 jobId => StoredJob) private _jobs;
    mapping(address token => mapping(address account => uint256)) private _owed;

    /// @param challengeWindow_ seconds a commit can be challenged, at most MAX_CHALLENGE_WINDOW
    /// @param protocolFeeBps_ fee on finalized jobs, at most MAX_FEE_BPS
    /// @param maxJobDuration_ longest time from funding to a job's deadline, at most
    /// MAX_JOB_DURATION_LIMIT
    constructor(
        IProviderRegistry registry_,
        address treasury_,
        uint64 challengeWindow_,
        uint16 protocolFeeBps_,
        uint64 maxJobDuration_
    ) EIP712("Unchained JobEscrow", "1") {
        if (address(registry_) == address(0) || treasury_ == address(0)) revert JobEscrowZeroAddress();
        if (challengeWindow_ == 0 || challengeWindow_ > MAX_CHALLENGE_WINDOW) {
            revert JobEscrowInvalidWindow(challengeWindow_);
        }
        if (protocolFeeBps_ > MAX_FEE_BPS) revert JobEscrowInvalidFee(protocolFeeBps_);
        if (maxJobDuration_ == 0 || maxJobDuration_ > MAX_JOB_DURATION_LIMIT) {
            revert JobEscrowInvalidMaxDuration(maxJobDuration_);
        }
        registry = registry_;
        staking = registry_.staking();
        minProviderStake = registry_.minProviderStake();
        treasury = treasury_;
        challengeWindow = challengeWindow_;
        protocolFeeBps = protocolFeeBps_;
        maxJobDuration = maxJobDuration_;
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
    function acceptJob(uint256 jobId) external {
        StoredJob storage job = _job(jobId);
        _requireStatus(jobId, job, JobStatus.Funded);
        if (msg.sender != job.provider) revert JobEscrowNotProvider(msg.sender);
        if (block.timestamp >= job.deadline) revert JobEscrowDeadlinePassed(jobId, job.deadline);
        job.status = JobStatus.Accepted;
        emit JobAccepted(jobId, msg.sender);
        // Reverts below the minimum stake; the stake cannot start unbonding until the job settles.
        staking.lockStake(msg.sender, minProviderStake);
    }

    /// @inheritdoc IJobEscrow
    function commitResult(uint256 jobId, bytes32 outputRoot, uint256 itemCount, bytes32 resultDigest) external {
        _commit(jobId, outputRoot, itemCount, resultDigest);
    }

    /// @inheritdoc IJobEscrow
    /// @dev Each entry goes through the same checks and effects as commitResult, one lock per
    /// implicitly accepted job (so every later unlock, whatever ends the job, has its own piece).
    /// The batch is cheaper than separate calls because it pays the transaction base cost once and
    /// touches Staking's and this contract's shared slots warm after the first entry.
    function commitResults(
        uint256[] calldata jobIds,
        bytes32[] calldata outputRoots,
        uint256[] calldata itemCounts,
        bytes32[] calldata resultDigests
    ) external {
        uint256 n = jobIds.length;
        _checkBatch(n);
        if (outputRoots.length != n || itemCounts.length != n || resultDigests.length != n) {
            revert JobEscrowBatchLengthMismatch();
        }
        for (uint256 i; i < n; ++i) {
            _commit(jobIds[i], outputRoots[i], itemCounts[i], resultDigests[i]);
        }
    }

    /// @inheritdoc IJobEscrow
    function finalize(uint256 jobId) external {
        _finalize(jobId);
    }

    /// @inheritdoc IJobEscrow
    /// @dev Each entry is finalize's checks and effects. Credits are not summed in memory first:
    /// after the first entry a balance slot is warm and dirty, so a repeated `+=` to the same
    /// provider's or treasury's balance costs about 200 gas (EIP-2929/2200), as cheap as one
    /// aggregated write, and each job still unlocks exactly the stake piece it locked.
    function finalizeJobs(uint256[] calldata jobIds) external {
        uint256 n = jobIds.length;
        _checkBatch(n);
        for (uint256 i; i < n; ++i) {
            _finalize(jobIds[i]);
        }
    }

    /// @inheritdoc IJobEscrow
    function refundExpired(uint256 jobId) external {
        StoredJob storage job = _job(jobId);
        JobStatus status = job.status;
        if (status != JobStatus.Funded && status != JobStatus.Accepted) revert JobEscrowWrongStatus(jobId, status);
        if (block.timestamp < job.deadline) revert JobEscrowDeadlineNotPassed(jobId, job.deadline);
        uint256 refund = _refund(job);
        emit JobExpired(jobId, job.renter, refund);
    }

    /// @inheritdoc IJobEscrow
    function failJob(uint256 jobId, string calldata reason) external {
        StoredJob storage job = _job(jobId);
        JobStatus status = job.status;
        if (status != JobStatus.Funded && status != JobStatus.Accepted) revert JobEscrowWrongStatus(jobId, status);
        if (msg.sender != job.provider) revert JobEscrowNotProvider(msg.sender);
        if (job.frozen) revert JobEscrowFrozen(jobId);
        uint256 length = bytes(reason).length;
        if (length > MAX_FAILURE_REASON_BYTES) revert JobEscrowReasonTooLong(length, MAX_FAILURE_REASON_BYTES);
        uint256 refund = _refund(job);
        emit JobFailed(jobId, msg.sender, reason, refund);
    }

    /// @inheritdoc IJobEscrow
    function cancel(uint256 jobId) external {
        StoredJob storage job = _job(jobId);
        _requireStatus(jobId, job, JobStatus.Funded);
        if (msg.sender != job.renter) revert JobEscrowNotRenter(msg.sender);
        job.cancelled = true;
        uint256 refund = _refund(job);
        emit JobCancelled(jobId, msg.sender, refund);
    }

    /// @inheritdoc IJobEscrow
    /// @dev A job counts as committed once it has a challenge window end (kept by every later
    /// status), so a commit that a challenge later refunded is still compared.
    function slashSignedResult(JobResult calldata result, bytes calldata signature)
        external
        returns (uint256 slashed)
    {
        uint256 jobId = result.jobId;
        StoredJob storage job = _job(jobId);
        if (job.resultSlashed) revert JobEscrowResultAlreadySlashed(jobId);
        address provider = job.provider;
        address signer = ECDSA.recover(jobResultDigest(result), signature);
        if (signer != provider) revert JobEscrowNotProviderSignature(jobId, signer);
        if (job.challengeWindowEnd != 0) {
            if (
                job.outputRoot == result.outputRoot && job.itemCount == result.itemCount
                    && job.resultDigest == result.resultDigest
            ) revert JobEscrowResultMatchesCommit(jobId);
        } else {
            if (job.cancelled) revert JobEscrowJobCancelled(jobId);
            if (block.timestamp < job.deadline) revert JobEscrowDeadlineNotPassed(jobId, job.deadline);
        }
        job.resultSlashed = true;
        slashed = staking.slash(provider, minProviderStake, msg.sender);
        emit SignedResultSlashed(jobId, provider, msg.sender, slashed);
    }

    /// @inheritdoc IJobEscrow
    function jobResultDigest(JobResult calldata result) public view returns (bytes32) {
        return _hashTypedDataV4(
            keccak256(
                abi.encode(JOB_RESULT_TYPEHASH, result.jobId, result.outputRoot, result.itemCount, result.resultDigest)
            )
        );
    }

    /// @inheritdoc IJobEscrow
    function freeze(uint256 jobId) external onlyRole(DISPUTE_ROLE) {
        StoredJob storage job = _job(jobId);
        _requireStatus(jobId, job, JobStatus.Committed);
        if (job.frozen) revert JobEscrowFrozen(jobId);
        if (block.timestamp >= job.challengeWindowEnd) {
            revert JobEscrowWindowClosed(jobId, job.challengeWindowEnd);
        }
        job.frozen = true;
        emit JobFrozen(jobId, msg.sender);
    }

    /// @inheritdoc IJobEscrow
    function resolveFreeze(uint256 jobId, bool providerAtFault) external onlyRole(DISPUTE_ROLE) {
        StoredJob storage job = _job(jobId);
        if (!job.frozen) revert JobEscrowNotFrozen(jobId);
        job.frozen = false;
        uint256 refund = providerAtFault ? _refund(job) : 0;
        emit JobUnfrozen(jobId, providerAtFault, refund);
    }

    /// @inheritdoc IJobEscrow
    function withdraw(address token) external {
        uint256 amount = _owed[token][msg.sender];
        if (amount == 0) revert JobEscrowNothingOwed(token, msg.sender);
        _owed[token][msg.sender] = 0;
        emit Withdrawn(token, msg.sender, amount);
        if (token == address(0)) {
            (bool ok,) = msg.sender.call{value: amount}("");
            if (!ok) revert JobEscrowTransferFailed(msg.sender, amount);
        } else {
            IERC20(token).safeTransfer(msg.sender, amount);
        }
    }

    /// @inheritdoc IJobEscrow
    function getJob(uint256 jobId) external view returns (Job memory) {
        StoredJob storage s = _jobs[jobId];
        uint64 windowEnd = s.challengeWindowEnd;
        return Job({
            renter: s.renter,
            provider: s.provider,
            token: s.token,
            price: s.price,
            specHash: s.specHash,
            deadline: s.deadline,
            committedAt: windowEnd == 0 ? 0 : windowEnd - challengeWindow,
            challengeWindowEnd: windowEnd,
            status: s.status,
            frozen: s.frozen,
            outputRoot: s.outputRoot,
            itemCount: s.itemCount,
            resultDigest: s.resultDigest
        });
    }

    /// @inheritdoc IJobEscrow
    function owedTo(address token, address account) external view returns (uint256) {
        return _owed[token][account];
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
        if (!registry.isActive(provider)) revert JobEscrowProviderInactive(provider);
        jobId = ++jobCount;
        StoredJob storage job = _jobs[jobId];
        job.renter = msg.sender;
        job.price = uint80(price);
        job.status = JobStatus.Funded;
        job.provider = provider;
        job.deadline = uint32(deadline);
        if (token != address(0)) job.token = token;
        job.specHash = specHash;
        emit JobCreated(jobId, msg.sender, provider, token, price, specHash, deadline);
    }

    /// @dev commitResult's checks and effects. A Funded job is accepted on the way (JobAccepted,
    /// then the stake lock, which reverts below the minimum stake, as acceptJob does); an
    /// Accepted job holds its lock already and only needs the stake still bonded.
    function _commit(uint256 jobId, bytes32 outputRoot, uint256 itemCount, bytes32 resultDigest) private {
        StoredJob storage job = _job(jobId);
        JobStatus status = job.status;
        if (status != JobStatus.Funded && status != JobStatus.Accepted) revert JobEscrowWrongStatus(jobId, status);
        if (msg.sender != job.provider) revert JobEscrowNotProvider(msg.sender);
        uint64 deadline = job.deadline;
        if (block.timestamp >= deadline) revert JobEscrowDeadlinePassed(jobId, deadline);
        if (outputRoot == bytes32(0) || itemCount == 0) revert JobEscrowEmptyResult();
        if (itemCount > MAX_ITEM_COUNT) revert JobEscrowItemCountTooLarge(itemCount);
        bool implicitAccept = status == JobStatus.Funded;
        if (!implicitAccept) {
            uint256 stake = staking.stakeOf(msg.sender);
            if (stake < minProviderStake) revert JobEscrowProviderUnderstaked(msg.sender, stake, minProviderStake);
        } else {
            emit JobAccepted(jobId, msg.sender);
        }
        // Fits: block.timestamp < deadline <= MAX_DEADLINE = uint32 max - MAX_CHALLENGE_WINDOW.
        uint32 windowEnd = uint32(block.timestamp + challengeWindow);
        job.status = JobStatus.Committed;
        job.challengeWindowEnd = windowEnd;
        job.itemCount = uint32(itemCount);
        job.outputRoot = outputRoot;
        job.resultDigest = resultDigest;
        emit ResultCommitted(jobId, outputRoot, itemCount, resultDigest, windowEnd);
        if (implicitAccept) staking.lockStake(msg.sender, minProviderStake);
    }

    function _finalize(uint256 jobId) private {
        StoredJob storage job = _job(jobId);
        _requireStatus(jobId, job, JobStatus.Committed);
        if (job.frozen) revert JobEscrowFrozen(jobId);
        uint64 windowEnd = job.challengeWindowEnd;
        if (block.timestamp < windowEnd) revert JobEscrowWindowOpen(jobId, windowEnd);
        job.status = JobStatus.Finalized;
        uint256 price = job.price;
        uint256 fee = (price * protocolFeeBps) / BPS;
        address token = job.token;
        address provider = job.provider;
        _owed[token][provider] += price - fee;
        if (fee != 0) _owed[token][treasury] += fee;
        emit JobFinalized(jobId, provider, price - fee, fee);
        staking.unlockStake(provider);
    }

    function _checkBatch(uint256 length) private pure {
        if (length == 0 || length > MAX_BATCH_SIZE) revert JobEscrowBadBatchSize(length, MAX_BATCH_SIZE);
    }

    /// @dev Ends the job as Refunded and credits the renter its full price; a job the provider
    /// had accepted releases its lock on the provider's stake.
    function _refund(StoredJob storage job) private returns (uint256 refund) {
        bool accepted = job.status != JobStatus.Funded;
        job.status = JobStatus.Refunded;
        refund = job.price;
        _owed[job.token][job.renter] += refund;
        if (accepted) staking.unlockStake(job.provider);
    }

    function _job(uint256 jobId) private view returns (StoredJob storage job) {
        job = _jobs[jobId];
        if (job.status == JobStatus.None) revert JobEscrowUnknownJob(jobId);
    }

    function _requireStatus(uint256 jobId, StoredJob storage job, JobStatus expected) private view {
        if (job.status != expected) revert JobEscrowWrongStatus(jobId, job.status);
    }
}
