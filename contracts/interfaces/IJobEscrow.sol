// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IProviderActivity} from "./IProviderActivity.sol";
import {IStakeLocker} from "./IStakeLocker.sol";
import {IStakeWatcher} from "./IStakeWatcher.sol";

/// @title Escrow of renters' payments for jobs, one storage slot per job
/// @notice A renter funds a job in ETH or an ERC-20 (plain tokens only: no fee on transfer, no
/// rebasing); the provider commits a Merkle root of its outputs before the deadline (which
/// accepts the job: there is no separate accept); after the challenge window the provider is
/// paid (minus the protocol fee). A job with no commit by the deadline, a cancelled one, or one
/// lost in a dispute refunds the renter in full. A renter cancels in two steps (requestCancel,
/// then cancel after cancelGrace) so that a provider can still commit a result it already gave. All payouts are pull balances per token
/// (address(0) = ETH); finalizeJobsAndWithdraw also pays its caller's ETH balance out at once. Committing needs the registry's minimum provider stake bonded, and locks
/// it (no unbonding) until the job is finalized or refunded: this contract counts the provider's
/// open jobs (lockedWorkOf, IStakeLocker) and Staking adds them before any unbond. Deadlines are at most
/// maxJobDuration ahead. Parameters are immutable and bounded; DISPUTE_ROLE (the
/// ChallengeManager) is granted once at deployment (IOneTimeWiring).
///
/// How to read a job: the contract keeps one slot per job, its JobState (jobState(jobId)):
/// status, frozen, endsAt (the challenge window end, or when a requested cancel may refund), and
/// the first 24 bytes of keccak256(abi.encode(Job)).
/// The Job itself (its terms, and its result once committed) travels in calldata and events:
/// JobCreated carries every term (the result fields are zero until the commit) and
/// ResultCommitted the result. Every call that acts on a job takes the Job and reverts with
/// JobEscrowJobMismatch unless it hashes to the stored jobHash (hashJob(job) to check one).
interface IJobEscrow is IStakeLocker, IProviderActivity, IStakeWatcher {
    enum JobStatus {
        None,
        Funded, // renter paid, no result yet
        Accepted, // not entered since the commit accepts (kept so that later numbers stay put)
        Committed, // result committed, challenge window running
        Finalized, // provider paid (minus fee)
        Refunded // renter refunded in full (expired, failed, cancelled or lost in a dispute)
    }

    /// @notice A job as JobCreated and ResultCommitted describe it: terms set at creation, and
    /// the result (zero until committed).
    struct Job {
        uint256 id;
        address renter;
        address provider;
        address token; // address(0) for ETH
        uint256 price;
        bytes32 specHash;
        uint64 deadline; // result due by then
        bytes32 outputRoot; // zero until committed
        uint256 itemCount; // zero until committed
        bytes32 resultDigest; // zero until committed
    }

    /// @notice The one slot a job keeps.
    struct JobState {
        bytes24 jobHash; // bytes24(keccak256(abi.encode(job))): the terms, and the result once committed
        JobStatus status;
        bool frozen; // an open challenge or dispute holds the escrow
        // Funded: when a requested cancel may refund (zero: none requested); Committed and later:
        // the challenge window end (committedAt is this minus challengeWindow); one field, so a
        // cancel request costs no slot of its own and a commit overwrites (voids) it.
        uint32 endsAt;
        bool cancelled; // refunded by its renter's cancel (a signed result of it is not slashable)
        bool resultSlashed; // slashSignedResult used its one slash
    }

    /// @notice What a provider signs (EIP-712 type JobResult, domain "Unchained JobEscrow" "1"
    /// with this contract's chain id and address; protocol/job_result.py) when the job is computed.
    /// `commitBy` is the chain time by which the provider promises its commit: the signed result
    /// binds it to commit at all only when it stated a margin (commitBy < the job's deadline);
    /// whatever commitBy says, it binds it to commit nothing else.
    struct JobResult {
        uint256 jobId;
        bytes32 outputRoot;
        uint256 itemCount;
        bytes32 resultDigest;
        uint64 commitBy;
    }

    event JobCreated(
        uint256 indexed jobId,
        address indexed renter,
        address indexed provider,
        address token,
        uint256 price,
        bytes32 specHash,
        uint64 deadline
    );
    event ResultCommitted(
        uint256 indexed jobId, bytes32 outputRoot, uint256 itemCount, bytes32 resultDigest, uint64 challengeWindowEnd
    );
    event JobFinalized(uint256 indexed jobId, address indexed provider, uint256 providerAmount, uint256 fee);
    event JobCancelRequested(uint256 indexed jobId, address indexed renter, uint64 cancellableAt);
    event JobCancelled(uint256 indexed jobId, address indexed renter, uint256 refund);
    event JobExpired(uint256 indexed jobId, address indexed renter, uint256 refund);
    event JobFailed(uint256 indexed jobId, address indexed provider, string reason, uint256 refund);
    event JobFrozen(uint256 indexed jobId, address indexed by);
    event JobUnfrozen(uint256 indexed jobId, bool providerAtFault, uint256 renterRefund);
    event Withdrawn(address indexed token, address indexed account, uint256 amount);
    /// @notice The provider was slashed `slashed` with a result it signed; `renterRefund` is what
    /// the renter was credited for the job at the same time (its price when the escrow still held
    /// it: the provider is paid nothing for a job it was slashed for).
    event SignedResultSlashed(
        uint256 indexed jobId, address indexed provider, address indexed by, uint256 slashed, uint256 renterRefund
    );

    error JobEscrowProviderInactive(address provider);
    error JobEscrowZeroPrice();
    error JobEscrowPriceTooLarge(uint256 price);
    error JobEscrowDeadlineInPast(uint64 deadline);
    error JobEscrowWrongValue(uint256 sent, uint256 price);
    error JobEscrowZeroToken();
    error JobEscrowUnknownJob(uint256 jobId);
    error JobEscrowWrongStatus(uint256 jobId, JobStatus status);
    error JobEscrowNotProvider(address caller);
    error JobEscrowNotRenter(address caller);
    error JobEscrowDeadlinePassed(uint256 jobId, uint64 deadline);
    error JobEscrowDeadlineNotPassed(uint256 jobId, uint64 deadline);
    error JobEscrowEmptyResult();
    error JobEscrowItemCountTooLarge(uint256 itemCount);
    error JobEscrowWindowOpen(uint256 jobId, uint64 challengeWindowEnd);
    error JobEscrowWindowClosed(uint256 jobId, uint64 challengeWindowEnd);
    error JobEscrowFrozen(uint256 jobId);
    error JobEscrowNotFrozen(uint256 jobId);
    error JobEscrowNothingOwed(address token, address account);
    error JobEscrowTransferFailed(address to, uint256 amount);
    error JobEscrowInvalidFee(uint256 bps);
    error JobEscrowInvalidWindow(uint256 window);
    error JobEscrowZeroAddress();
    error JobEscrowReasonTooLong(uint256 length, uint256 maxLength);
    error JobEscrowInvalidMaxDuration(uint256 maxJobDuration);
    error JobEscrowDeadlineTooFar(uint64 deadline, uint256 latest);
    error JobEscrowBadBatchSize(uint256 length, uint256 maxLength);
    error JobEscrowBatchLengthMismatch();
    error JobEscrowJobMismatch(uint256 jobId);
    error JobEscrowResultAlreadySlashed(uint256 jobId);
    error JobEscrowNotProviderSignature(uint256 jobId, address signer);
    error JobEscrowResultMatchesCommit(uint256 jobId);
    error JobEscrowJobCancelled(uint256 jobId);
    error JobEscrowInvalidCancelGrace(uint256 cancelGrace);
    error JobEscrowCancelNotRequested(uint256 jobId);
    error JobEscrowCancelTooEarly(uint256 jobId, uint64 cancellableAt);
    error JobEscrowCancelAlreadyRequested(uint256 jobId, uint64 cancellableAt);
    error JobEscrowNotRegistry(address caller);
    error JobEscrowProviderNotBonded(address provider);
    error JobEscrowNotStaking(address caller);
    error JobEscrowResultNotBinding(uint256 jobId, uint64 commitBy, uint64 deadline);
    error JobEscrowUnbondingTooShort(uint256 unbondingDelay, uint256 needed);

    /// Hooks used by other Unchained contracts (stable):

    /// @notice The job's slot: status, frozen, endsAt, its hash. All zero for an
    /// unknown job.
    function jobState(uint256 jobId) external view returns (JobState memory);

    /// @notice The 24 bytes of keccak256(abi.encode(job)) a job's slot keeps.
    function hashJob(Job calldata job) external pure returns (bytes24);

    /// @notice Freezes a committed job's escrow while a challenge or dispute is open, keeping
    /// what a refund needs (the caller does not hand the job back to resolveFreeze). Only
    /// DISPUTE_ROLE, and only inside the challenge window.
    function freeze(Job calldata job) external;

    /// @notice Ends a freeze. `providerAtFault` refunds the renter in full (unless
    /// slashSignedResult refunded it meanwhile); otherwise the job becomes finalizable again (at
    /// once if its window has passed). Only DISPUTE_ROLE.
    function resolveFreeze(uint256 jobId, bool providerAtFault) external;

    /// @notice Grants DISPUTE_ROLE to `disputers`, once, by the deployer; afterwards nobody can
    /// grant or revoke any role.
    function wire(address[] calldata disputers) external;

    /// Public API:

    /// @notice Funds a job for an active `provider` (registered and not deactivated, as the
    /// registry told this contract: isProviderActive) with msg.value == `price` wei
    /// (1..MAX_PRICE). The provider must have the minimum provider stake bonded and nothing
    /// unbonding (as Staking last told this contract, IStakeWatcher; Staking.isBondedFor; else
    /// JobEscrowProviderNotBonded): that stake then stays in
    /// Staking until at least funding + unbondingDelay >= deadline + challengeWindow, so a signed
    /// result never committed can still be slashed for a challenge window after the deadline
    /// (the constructor checks unbondingDelay >= maxJobDuration + challengeWindow). Its stake is
    /// locked against unbonding where the work is accepted: at commit.
    /// JobCreated carries the whole Job (result fields zero).
    /// @param specHash keccak256 of the canonical job spec
    /// @param deadline unix time by which the result must be committed (in the future, at most
    /// maxJobDuration from now and at most JobEscrow.MAX_DEADLINE, early 2106, so it packs into
    /// 32 bits)
    /// @return jobId the new job's id (ids start at 1)
    function createJob(address provider, bytes32 specHash, uint256 price, uint64 deadline)
        external
        payable
        returns (uint256 jobId);

    /// @notice As createJob, paid with `price` units of ERC-20 `token` (pulled with transferFrom).
    function createJobWithToken(address provider, address token, bytes32 specHash, uint256 price, uint64 deadline)
        external
        returns (uint256 jobId);

    /// @notice The provider commits the Merkle root of its per-item output digests and the item
    /// count (1..MAX_ITEM_COUNT) for a Funded job (`job` as created, result fields zero) before
    /// the deadline, opening the challenge window. Accepts the job on the way: the minimum
    /// provider stake must be bonded and is locked until the job settles. The job's hash then
    /// covers the result: later calls pass the Job with it.
    function commitResult(Job calldata job, bytes32 outputRoot, uint256 itemCount, bytes32 resultDigest) external;

    /// @notice commitResult for up to MAX_BATCH_SIZE jobs in one transaction, entry i being
    /// (jobs[i], outputRoots[i], itemCounts[i], resultDigests[i]). All or nothing: an entry
    /// that commitResult would refuse reverts the whole batch with commitResult's error (naming
    /// the job), so no entry is silently skipped; the sender drops it and sends the rest again.
    function commitResults(
        Job[] calldata jobs,
        bytes32[] calldata outputRoots,
        uint256[] calldata itemCounts,
        bytes32[] calldata resultDigests
    ) external;

    /// @notice Pays a committed job (`job` with its result) once its challenge window has passed
    /// and it is not frozen: the provider is credited price - fee, the treasury the fee. Anyone
    /// may call.
    function finalize(Job calldata job) external;

    /// @notice finalize for up to MAX_BATCH_SIZE jobs of any providers, renters and tokens in one
    /// transaction. All or nothing, like commitResults: an entry finalize would refuse (unknown,
    /// mismatched, not Committed, frozen, window open, or repeated in the batch) reverts the whole
    /// batch with finalize's error. Consecutive jobs of one provider and token are credited to it
    /// in one write, and consecutive fees of one token to the treasury in one (order a batch by
    /// provider and token to pay the least gas). Anyone may call.
    function finalizeJobs(Job[] calldata jobs) external;

    /// @notice finalizeJobs, then pays the caller everything it is owed in ETH (as withdraw(0)
    /// would, with no error when that is nothing): the way a provider settles its jobs and takes
    /// its pay in one transaction.
    function finalizeJobsAndWithdraw(Job[] calldata jobs) external;

    /// @notice Refunds the renter in full when the deadline passed with no commit. Anyone may call.
    function refundExpired(Job calldata job) external;

    /// @notice The job's provider declares that it cannot run the job (unknown model, a model
    /// that does not load, malformed inputs) and the renter is refunded in full at once (credited
    /// to its pull balance; the job ends Refunded), instead of waiting for the deadline. Only the
    /// job's provider, only while Funded.
    /// @param reason why, for the renter: at most 256 bytes (JobEscrow.MAX_FAILURE_REASON_BYTES), kept in JobFailed
    function failJob(Job calldata job, string calldata reason) external;

    /// @notice The renter asks to take back a Funded job before its deadline: cancel refunds it
    /// once cancelGrace has passed, unless the provider commits meanwhile (a commit during the
    /// grace is valid and voids the request). Two steps because a provider hands its signed
    /// result to the renter before its batched commit: a one-step cancel would let the renter
    /// keep the work and the money. Emits JobCancelRequested. Only the renter, once per job.
    function requestCancel(Job calldata job) external;

    /// @notice The renter takes back a Funded job whose cancel it requested at least cancelGrace
    /// ago (the provider did not commit in the grace): refunded in full.
    function cancel(Job calldata job) external;

    /// @notice Slashes the job's provider with a result it signed (`signature` over
    /// jobResultDigest(result), result.jobId == job.id) when (a) the job was committed with a
    /// different outputRoot, itemCount or resultDigest (whatever result.commitBy says), or (b)
    /// the job was never committed, the provider stated a commit margin (result.commitBy <
    /// job.deadline, else JobEscrowResultNotBinding) and the deadline has passed (whether
    /// refunded since or still refundable; not a job its renter cancelled). Slashes the
    /// registry's minimum provider stake (what a job locks) through Staking, whose
    /// slashRewardBps share goes to the caller (usually the renter, who received the signed
    /// result) and the rest to Staking's treasury. The provider is paid nothing for the job: one
    /// still Funded or Committed (frozen or not) is refunded to its renter here; a Finalized one
    /// was paid already (a renter slashes within the challenge window to prevent that). Once per
    /// job. Anyone may call.
    function slashSignedResult(Job calldata job, JobResult calldata result, bytes calldata signature)
        external
        returns (uint256 slashed);

    /// @notice The EIP-712 digest a provider signs for `result` (this contract's domain).
    function jobResultDigest(JobResult calldata result) external view returns (bytes32);

    /// @notice Pays the caller's pull balance in `token` (address(0) = ETH).
    function withdraw(address token) external;

    /// @notice Pull balance of `account` in `token`.
    function owedTo(address token, address account) external view returns (uint256);

    /// @notice Whether `provider` is registered and not deactivated, as the registry last told
    /// this contract (IProviderActivity); createJob also requires Staking.isBondedFor.
    function isProviderActive(address provider) external view returns (bool);

    /// @notice Most entries in one commitResults or finalizeJobs call.
    function MAX_BATCH_SIZE() external view returns (uint256);

    /// @notice Highest job price (2^80 - 1, about 1.2 million ether), so it packs into storage.
    function MAX_PRICE() external view returns (uint256);

    /// @notice Highest item count of a committed result (2^32 - 1).
    function MAX_ITEM_COUNT() external view returns (uint256);

    /// @notice Number of jobs created so far (the last job id).
    function jobCount() external view returns (uint256);

    /// @notice Seconds a committed result can be challenged (at most MAX_CHALLENGE_WINDOW).
    function challengeWindow() external view returns (uint64);

    /// @notice Seconds between requestCancel and the cancel it allows (1..MAX_CANCEL_GRACE): the
    /// provider's time to commit a result it has already handed out.
    function cancelGrace() external view returns (uint64);

    /// @notice Bound on cancelGrace checked at deployment.
    function MAX_CANCEL_GRACE() external view returns (uint64);

    /// @notice Longest time from funding a job to its deadline (at most MAX_JOB_DURATION_LIMIT).
    function maxJobDuration() external view returns (uint64);

    /// @notice Bound on challengeWindow checked at deployment.
    function MAX_CHALLENGE_WINDOW() external view returns (uint64);

    /// @notice Bound on maxJobDuration checked at deployment.
    function MAX_JOB_DURATION_LIMIT() external view returns (uint64);

    /// @notice Protocol fee on finalized jobs, in basis points (at most MAX_FEE_BPS).
    function protocolFeeBps() external view returns (uint16);

    /// @notice Receiver of protocol fees.
    function treasury() external view returns (address);
}
