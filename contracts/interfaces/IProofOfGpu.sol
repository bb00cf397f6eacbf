// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Proof-of-GPU rounds
/// @notice A staked verifier requests a round for a provider with a matrix size n; the round seed
/// comes from the hash of the block after the request (docs/PROTOCOL.md), so nobody can compute
/// ahead of time; the provider commits one Merkle root per GPU before the commit deadline; the
/// verifier, who timed seed-to-root off-chain, attests the result into the ProviderRegistry.
/// Committed roots stay challengeable (ChallengeManager) for `rootChallengePeriod` seconds.
interface IProofOfGpu {
    enum RoundStatus {
        None,
        Requested, // waiting for the provider's roots
        Committed, // roots committed, waiting for the verifier's attestation
        Attested, // the verifier recorded the outcome in the registry
        Failed // no roots by the commit deadline
    }

    /// @dev Packed in three slots; the commit rewrites only the second (status, committedAt).
    struct Round {
        address provider;
        uint64 requestBlock; // randomness = blockhash(requestBlock + 1)
        uint32 n; // matrix size, set by the verifier
        address verifier;
        uint40 commitDeadline; // unix seconds
        uint40 committedAt; // unix seconds, zero before the commit
        uint8 gpuCount; // snapshot of the registry's count at the request
        RoundStatus status;
        bytes32 seed; // roundSeed, zero until fixed
    }

    event RoundRequested(
        uint256 indexed roundId, address indexed provider, address indexed verifier, uint256 n, uint256 gpuCount,
        uint256 commitDeadline
    );
    event RoundSeedFixed(uint256 indexed roundId, bytes32 seed);
    event RootsCommitted(uint256 indexed roundId, address indexed provider, bytes32[] roots);
    event RoundAttested(
        uint256 indexed roundId, address indexed provider, uint256 measuredMillis, bytes32 gpuClass,
        uint256 tflopsMilli, bool passed
    );
    event RoundFailed(uint256 indexed roundId, address indexed provider);

    error ProofOfGpuZeroAddress();
    error ProofOfGpuVerifierNotStaked(address verifier, uint256 stake, uint256 required);
    error ProofOfGpuBadN(uint256 n);
    error ProofOfGpuSelfRequest(address provider);
    error ProofOfGpuProviderNotActive(address provider);
    error ProofOfGpuBadGpuCount(address provider, uint256 gpuCount);
    error ProofOfGpuUnknownRound(uint256 roundId);
    error ProofOfGpuWrongStatus(uint256 roundId, RoundStatus status);
    error ProofOfGpuSeedAlreadyFixed(uint256 roundId);
    error ProofOfGpuSeedNotFixed(uint256 roundId);
    error ProofOfGpuNotProvider(uint256 roundId, address caller);
    error ProofOfGpuNotVerifier(uint256 roundId, address caller);
    error ProofOfGpuCommitDeadlinePassed(uint256 roundId, uint256 deadline);
    error ProofOfGpuCommitDeadlineNotPassed(uint256 roundId, uint256 deadline);
    error ProofOfGpuWrongRootCount(uint256 roundId, uint256 given, uint256 expected);
    error ProofOfGpuZeroRoot(uint256 roundId, uint256 gpuIndex);
    error ProofOfGpuGpuIndexOutOfRange(uint256 roundId, uint256 gpuIndex, uint256 gpuCount);

    /// @notice Opens a round for `provider` at matrix size `n` (a multiple of 64 in
    /// [64, 65536]). The caller must hold at least minVerifierStake in Staking and not be the
    /// provider; the provider must be active. Snapshots the provider's GPU count and device-UUID hashes.
    /// @return roundId the new round's id (from 1)
    function requestRound(address provider, uint256 n) external returns (uint256 roundId);

    /// @notice Stores roundSeed = keccak256(abi.encode(blockhash(requestBlock + 1), roundId,
    /// provider)). Anyone, once block requestBlock + 1 exists and within 256 blocks of it.
    function fixSeed(uint256 roundId) external;

    /// @notice The provider commits one Merkle root per GPU (length == gpuCount, none zero)
    /// before the commit deadline; fixes the seed first if nobody has.
    function commitRoots(uint256 roundId, bytes32[] calldata roots) external;

    /// @notice The requesting verifier records the outcome of a committed round in the registry.
    /// @param measuredMillis seed-to-root wall time the verifier measured, in milliseconds
    /// @param gpuClass identified class (e.g. bytes32("H100-SXM")), zero when not passed
    /// @param tflopsMilli measured TFLOPS times 1000
    function attest(uint256 roundId, uint256 measuredMillis, bytes32 gpuClass, uint256 tflopsMilli, bool passed)
        external;

    /// @notice Anyone marks a round whose roots did not come by the commit deadline as failed;
    /// the registry records a failed PoG for the provider.
    function markFailed(uint256 roundId) external;

    /// @notice Everything stored about round `roundId`.
    function round(uint256 roundId) external view returns (Round memory);

    /// @notice Seed of GPU `gpuIndex` in the round: keccak256(abi.encode(roundSeed, gpuIndex,
    /// uuidHash)) with the UUID hash snapshotted at the request. Reverts until the seed is fixed.
    function gpuSeedOf(uint256 roundId, uint256 gpuIndex) external view returns (bytes32);

    /// @notice Root committed for GPU `gpuIndex`; reverts before the commit.
    function rootOf(uint256 roundId, uint256 gpuIndex) external view returns (bytes32);

    /// @notice Device-UUID hash of GPU `gpuIndex` as snapshotted at the request.
    function uuidHashOf(uint256 roundId, uint256 gpuIndex) external view returns (bytes32);

    /// @notice Seconds after the commit during which roots can be challenged.
    function rootChallengePeriod() external view returns (uint64);

    /// @notice Seconds between a request and its commit deadline.
    function commitWindow() external view returns (uint64);

    /// @notice Stake a verifier must hold to request rounds.
    function minVerifierStake() external view returns (uint256);

    /// @notice Number of rounds requested so far (the last round id).
    function roundCount() external view returns (uint256);
}
