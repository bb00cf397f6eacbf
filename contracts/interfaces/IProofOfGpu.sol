// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Proof-of-GPU rounds
/// @notice A staked verifier requests a round for a provider with a matrix size n and the hash of
/// a secret it keeps; it later reveals the secret with fixSeed, and the round seed mixes that
/// secret with the request block's hash (docs/PROTOCOL.md), so nobody (the provider included)
/// knows the seed before the verifier's reveal, and the verifier could not choose it either. The
/// verifier starts its clock before it broadcasts the reveal; the provider commits one Merkle root
/// per GPU within `commitWindow` seconds of the reveal; the verifier, who timed seed-to-root
/// off-chain, attests the result into the ProviderRegistry. A round whose secret was never
/// revealed ends Voided, with nothing recorded against the provider. Committed roots stay
/// challengeable (ChallengeManager) for `rootChallengePeriod` seconds.
interface IProofOfGpu {
    enum RoundStatus {
        None,
        Requested, // waiting for the provider's roots
        Committed, // roots committed, waiting for the verifier's attestation
        Attested, // the verifier recorded the outcome in the registry
        Failed, // the seed was fixed, but no roots came by the commit deadline
        Voided // the verifier never revealed its secret, or never attested committed roots within
        // rootChallengePeriod: nothing recorded against the provider
    }

    /// @dev Packed in four slots; the commit rewrites only the second (status, committedAt).
    struct Round {
        address provider;
        uint64 requestBlock; // the seed mixes blockhash(requestBlock) with the verifier's secret
        uint32 n; // matrix size, set by the verifier
        address verifier;
        uint40 commitDeadline; // unix seconds: until the seed is fixed, the last moment to fix it;
        // from then on, the last moment to commit (seed fix + commitWindow)
        uint40 committedAt; // unix seconds, zero before the commit
        uint8 gpuCount; // snapshot of the registry's count at the request
        RoundStatus status;
        bytes32 seed; // roundSeed, zero until fixed
        bytes32 secretHash; // keccak256(secret) committed by the verifier at the request
    }

    event RoundRequested(
        uint256 indexed roundId, address indexed provider, address indexed verifier, uint256 n, uint256 gpuCount,
        uint256 commitDeadline
    );
    /// @notice The verifier revealed its secret: the seed is fixed and the commit deadline runs
    /// from now.
    event RoundSeedFixed(uint256 indexed roundId, bytes32 seed, uint256 commitDeadline);
    event RootsCommitted(uint256 indexed roundId, address indexed provider, bytes32[] roots);
    event RoundAttested(
        uint256 indexed roundId, address indexed provider, uint256 measuredMillis, bytes32 gpuClass,
        uint256 tflopsMilli, bool passed
    );
    event RoundFailed(uint256 indexed roundId, address indexed provider);
    /// @notice The round ended without a verdict: the verifier never revealed its secret in time,
    /// or never attested the committed roots within rootChallengePeriod.
    event RoundVoided(uint256 indexed roundId, address indexed provider);

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
    error ProofOfGpuZeroSecretHash();
    error ProofOfGpuWrongSecret(uint256 roundId);
    error ProofOfGpuSeedDeadlinePassed(uint256 roundId, uint256 deadline);
    error ProofOfGpuAttestWindowOpen(uint256 roundId, uint256 attestEnd);

    /// @notice Opens a round for `provider` at matrix size `n` (a multiple of 64 in
    /// [64, 65536]). The caller must hold at least minVerifierStake in Staking and not be the
    /// provider; the provider must be active. Snapshots the provider's GPU count and device-UUID
    /// hashes. The caller must reveal the secret behind `secretHash` with fixSeed within
    /// commitWindow seconds, or the round ends Voided.
    /// @param secretHash keccak256 of a 32-byte secret only the caller knows (not zero)
    /// @return roundId the new round's id (from 1)
    function requestRound(address provider, uint256 n, bytes32 secretHash) external returns (uint256 roundId);

    /// @notice The round's verifier reveals its secret (keccak256(secret) == secretHash) and
    /// fixes roundSeed = keccak256(abi.encode(blockhash(requestBlock), secret, roundId,
    /// provider)); the commit deadline becomes now + commitWindow. From the block after the
    /// request, within 256 blocks of it, and before the seed deadline; once.
    function fixSeed(uint256 roundId, bytes32 secret) external;

    /// @notice The provider commits one Merkle root per GPU (length == gpuCount, none zero)
    /// after the seed is fixed and before the commit deadline.
    function commitRoots(uint256 roundId, bytes32[] calldata roots) external;

    /// @notice The requesting verifier records the outcome of a committed round in the registry.
    /// @param measuredMillis seed-to-root wall time the verifier measured, in milliseconds
    /// @param gpuClass identified class (e.g. bytes32("H100-SXM")), zero when not passed
    /// @param tflopsMilli measured TFLOPS times 1000
    function attest(uint256 roundId, uint256 measuredMillis, bytes32 gpuClass, uint256 tflopsMilli, bool passed)
        external;

    /// @notice Anyone closes a round still waiting after its deadline: Failed (the registry records
    /// a failed PoG for the provider) when the seed was fixed and no roots came, Voided (nothing
    /// recorded) when the verifier never revealed its secret, or when roots were committed but
    /// the verifier did not attest them within rootChallengePeriod of the commit (so every round
    /// ends; the verifier attests roots it judges wrong well before that).
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

    /// @notice Seconds from a request to its seed deadline, and from the seed fix to the commit deadline.
    function commitWindow() external view returns (uint64);

    /// @notice Stake a verifier must hold to request rounds.
    function minVerifierStake() external view returns (uint256);

    /// @notice Number of rounds requested so far (the last round id).
    function roundCount() external view returns (uint256);
}
