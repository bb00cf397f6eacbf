// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IJobEscrow} from "./IJobEscrow.sol";
import {IDisputeResolver} from "./IDisputeCommittee.sol";

/// @title Challenges of committed Merkle roots: PoG roots and job output roots
/// @notice A staked verifier (for a job also its renter) posts a bond and challenges k random
/// leaves of a committed root. The indices come from randomness R stored when the challenge
/// opens (the previous block's hash mixed with the challenge id; docs/PROTOCOL.md, "Challenge
/// indices"): it never changes, so nobody can draw again. The provider must reveal the k leaves
/// with inclusion proofs before the response deadline or be slashed, however late anyone claims
/// the timeout. A PoG chunk under the challenged root holding a wrong element (revealed on-chain
/// or off-chain) can be proven fraudulent by anyone while the challenge is open and during the
/// fraud window after the answer (the element is recomputed on-chain); a job challenger who finds a revealed digest wrong escalates to the committee vote.
/// Otherwise the provider earns the bond (minus the protocol fee). Every challenge resolves once;
/// payments are pulled with withdraw().
interface IChallengeManager is IDisputeResolver {
    enum Kind {
        None,
        Pog, // subject = PoG round id, gpuIndex = the GPU's index in the round
        Job // subject = job id
    }

    enum Status {
        None,
        Open, // waiting for the provider's answer
        Answered, // answered; fraud (PoG) or escalation (job) window running
        Escalated, // job dispute open in the committee
        ProviderFaulted, // provider slashed (timeout, fraud or committee); bond returned
        ChallengerFaulted, // committee found the claim false; bond to the provider, challenger slashed
        Settled, // answered and unchallenged: bond (minus fee) to the provider
        Dismissed // nobody at fault (no committee quorum, or the PoG root was already slashed for)
    }

    /// @dev Packed: slot 0 (challenger, anchorBlock, kind, status, k), slot 1 (provider,
    /// responseDeadline, answeredAt, gpuIndex).
    struct Challenge {
        address challenger;
        uint64 anchorBlock; // the block the challenge was opened in
        Kind kind;
        Status status;
        uint8 k; // number of challenged leaves
        address provider;
        uint40 responseDeadline; // unix seconds
        uint40 answeredAt; // unix seconds, zero before the answer
        uint8 gpuIndex; // PoG only
        uint256 subject; // round id (PoG) or job id
        bytes32 root; // the challenged root
        uint256 leafCount; // leaves under the root
        bytes32 randomness; // R = keccak256(abi.encode(blockhash(anchorBlock - 1), challengeId)), stored at the opening
        uint256 bond; // wei
        uint256 disputeId; // committee dispute, zero when none
    }

    /// @notice Constructor parameters (see ChallengeManager's constructor). The constructor
    /// refuses windows that would let a party unbond before its slash can land: the longest path
    /// from the moment a party can still unbond to its slash must be shorter than Staking's
    /// unbonding delay (PoG: commitWindow + rootChallengePeriod + responseWindow + fraudWindow;
    /// job: challengeWindow + responseWindow + escalationWindow + committee voteWindow).
    struct Config {
        address staking; // IStaking: stake checks and slashing (grant SLASHER_ROLE)
        address pog; // IProofOfGpu: rounds, roots and GPU seeds
        address escrow; // IJobEscrow: jobs, freeze and resolveFreeze (grant DISPUTE_ROLE)
        address committee; // IDisputeCommittee (grant this contract OPENER_ROLE there)
        address treasury; // receives protocol fees on bonds
        uint256 minBond; // wei a challenge must carry
        uint256 minVerifierStake; // bonded wei a verifier needs to challenge
        uint256 slashAmount; // wei slashed from a provider at fault
        uint256 falseClaimSlash; // wei slashed from a challenger the committee finds wrong
        uint16 feeBps; // treasury's share of a bond paid to a provider, at most MAX_FEE_BPS
        uint64 responseWindow; // seconds from challenge to response deadline
        uint64 fraudWindow; // seconds after a PoG answer for fraud proofs
        uint64 escalationWindow; // seconds after a job answer for escalation
    }

    event PogChallenged(
        uint256 indexed challengeId, uint256 indexed roundId, uint256 gpuIndex, address indexed challenger,
        address provider, uint256 k, uint256 bond, uint256 responseDeadline
    );
    event JobChallenged(
        uint256 indexed challengeId, uint256 indexed jobId, address indexed challenger, address provider, uint256 k,
        uint256 bond, uint256 responseDeadline
    );
    /// @notice The challenge's randomness R, stored by the transaction that opened it (emitted
    /// right after PogChallenged / JobChallenged).
    event ChallengeRandomnessFixed(uint256 indexed challengeId, bytes32 randomness);
    event ChallengeAnswered(uint256 indexed challengeId, address indexed provider);
    event ChallengeTimedOut(uint256 indexed challengeId, address indexed provider);
    event FraudProven(
        uint256 indexed challengeId, address indexed prover, uint256 chunkIndex, uint256 elementOffset,
        int256 expected, int256 claimed
    );
    event ChallengeEscalated(uint256 indexed challengeId, uint256 indexed disputeId);
    event ChallengeDisputeResolved(uint256 indexed challengeId, uint8 verdict);
    /// @notice The challenge reached a final status.
    event ChallengeClosed(uint256 indexed challengeId, Status status);
    /// @notice `slashed` wei of stake was taken from `offender` for challenge `challengeId`.
    event OffenderSlashed(uint256 indexed challengeId, address indexed offender, uint256 slashed);
    /// @notice `amount` wei was credited to `account`'s pull balance.
    event Credited(uint256 indexed challengeId, address indexed account, uint256 amount);
    event Withdrawn(address indexed account, uint256 amount);

    error ChallengeZeroAddress();
    error ChallengeBadFeeBps(uint256 feeBps);
    error ChallengeZeroWindow();
    error ChallengeWindowsExceedUnbonding(uint256 exposure, uint256 unbondingDelay);
    error ChallengeBondTooSmall(uint256 bond, uint256 minBond);
    error ChallengeNotStakedVerifier(address challenger, uint256 stake, uint256 required);
    error ChallengeBadK(uint256 k);
    error ChallengeSelfChallenge(address provider);
    error ChallengeRoundNotChallengeable(uint256 roundId);
    error ChallengeRootFaulted(uint256 roundId, uint256 gpuIndex);
    error ChallengeJobNotChallengeable(uint256 jobId);
    error ChallengeJobAlreadyChallenged(uint256 jobId, uint256 challengeId);
    error ChallengeUnknown(uint256 challengeId);
    error ChallengeWrongStatus(uint256 challengeId, Status status);
    error ChallengeWrongKind(uint256 challengeId, Kind kind);
    error ChallengeNotProvider(uint256 challengeId, address caller);
    error ChallengeNotChallenger(uint256 challengeId, address caller);
    error ChallengeNotCommittee(address caller);
    error ChallengeDeadlinePassed(uint256 challengeId, uint256 deadline);
    error ChallengeDeadlineNotPassed(uint256 challengeId, uint256 deadline);
    error ChallengeWrongAnswerCount(uint256 challengeId, uint256 leaves, uint256 proofs, uint256 k);
    error ChallengeBadLeafLength(uint256 t, uint256 length, uint256 expected);
    error ChallengeInvalidProof(uint256 t, uint256 index);
    error ChallengeWindowClosed(uint256 challengeId, uint256 windowEnd);
    error ChallengeWindowOpen(uint256 challengeId, uint256 windowEnd);
    error ChallengeChunkOutOfRange(uint256 chunkIndex, uint256 leafCount);
    error ChallengeNoFraud(uint256 chunkIndex, uint256 elementOffset, int256 value);
    error ChallengeNothingOwed(address account);
    error ChallengeTransferFailed(address to, uint256 amount);

    /// @notice Challenges k (32..64) random chunks of GPU `gpuIndex`'s root in PoG round
    /// `roundId`, within the round's root challenge period. Caller: a staked verifier; msg.value
    /// is the bond (>= minBond).
    function challengePog(uint256 roundId, uint256 gpuIndex, uint256 k) external payable returns (uint256 challengeId);

    /// @notice Challenges k (1..64) random items of a committed job's output root inside its
    /// challenge window and freezes its escrow. Caller: a staked verifier or the job's renter;
    /// msg.value is the bond (>= minBond). One open challenge per job. `job` is the Job with its
    /// committed result (IJobEscrow: JobCreated and ResultCommitted); the escrow refuses a
    /// mismatch (JobEscrowJobMismatch).
    function challengeJob(IJobEscrow.Job calldata job, uint256 k) external payable returns (uint256 challengeId);

    /// @notice The provider reveals the k challenged leaves (in order of t) with their proofs
    /// before the response deadline: 256-byte chunks for PoG, 32-byte digests for jobs. Once.
    function respond(uint256 challengeId, bytes[] calldata leaves, bytes32[][] calldata proofs) external;

    /// @notice After the response deadline without an answer: slashes the provider (reward to
    /// the challenger), returns the bond and, for a job, refunds the renter. Anyone, however
    /// late; R is not needed. (A PoG root already slashed for ends Dismissed, bond returned.)
    function claimTimeout(uint256 challengeId) external;

    /// @notice Proves that a PoG chunk committed under the challenged root holds a wrong element:
    /// verifies the chunk's inclusion at `chunkIndex`, recomputes element `elementOffset` from the
    /// GPU's seed and n, and slashes the provider when they differ (reward to the caller, bond to
    /// the challenger). Anyone, while the challenge is open (e.g. with a chunk the provider
    /// revealed off-chain) or after the answer inside the fraud window.
    function proveFraud(
        uint256 challengeId,
        uint256 chunkIndex,
        bytes calldata chunkData,
        bytes32[] calldata proof,
        uint256 elementOffset
    ) external;

    /// @notice After the fraud (PoG) or escalation (job) window of an answered challenge: the
    /// bond minus the fee goes to the provider, the fee to the treasury, a job's escrow is
    /// unfrozen. Anyone.
    function settle(uint256 challengeId) external;

    /// @notice The challenger of an answered job challenge opens a committee vote inside the
    /// escalation window; the escrow stays frozen until the verdict.
    function escalate(uint256 challengeId) external returns (uint256 disputeId);

    /// @notice Pays the caller's pull balance (returned bonds, bonds won, fees).
    function withdraw() external;

    /// @notice Everything stored about challenge `challengeId`.
    function challenge(uint256 challengeId) external view returns (Challenge memory);

    /// @notice The k challenged leaf indices (from R, stored at the opening).
    function challengeIndices(uint256 challengeId) external view returns (uint256[] memory);

    /// @notice Pull balance owed to `account`.
    function owedTo(address account) external view returns (uint256);

    /// @notice Number of challenges opened so far (the last challenge id).
    function challengeCount() external view returns (uint256);

    /// @notice The open challenge holding job `jobId`'s escrow frozen, zero when none.
    function activeJobChallenge(uint256 jobId) external view returns (uint256);

    /// @notice Smallest bond (wei) a challenge must carry.
    function minBond() external view returns (uint256);

    /// @notice Bonded stake (wei) a verifier needs to challenge.
    function minVerifierStake() external view returns (uint256);

    /// @notice Stake (wei) slashed from a provider found at fault.
    function slashAmount() external view returns (uint256);

    /// @notice Stake (wei) slashed from a challenger the committee finds wrong.
    function falseClaimSlash() external view returns (uint256);

    /// @notice Treasury's share, in basis points, of a bond paid to a provider.
    function feeBps() external view returns (uint16);

    /// @notice Receiver of protocol fees on bonds.
    function treasury() external view returns (address);

    /// @notice Seconds from a challenge to its response deadline.
    function responseWindow() external view returns (uint64);

    /// @notice Seconds after a PoG answer during which fraud can be proven.
    function fraudWindow() external view returns (uint64);

    /// @notice Seconds after a job answer during which the challenger can escalate.
    function escalationWindow() external view returns (uint64);
}
