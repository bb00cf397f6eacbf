// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {IProofOfGpu} from "./interfaces/IProofOfGpu.sol";
import {IStaking} from "./interfaces/IStaking.sol";
import {IProviderRegistry} from "./interfaces/IProviderRegistry.sol";
import {BlockRandomness} from "./libraries/BlockRandomness.sol";
import {PogMath} from "./libraries/PogMath.sol";

/// @title Proof-of-GPU rounds: request, seed, per-GPU root commitments, attestation
/// @notice Seeds are a commit-reveal of the requesting verifier's secret mixed with the request
/// block's hash (see IProofOfGpu). Needs POG_ROLE on the ProviderRegistry (attest and markFailed
/// record results there).
/// Parameters are fixed at deployment; a change means a new deployment.
/// @dev Decisions where the design is silent: a provider's GPU count and device-UUID hashes are
/// snapshotted at the request (the verifier pays for it), so a later change in the registry cannot
/// change a committed round's seeds and wrongly convict or clear it; at most 255 GPUs per round.
contract ProofOfGpu is IProofOfGpu {
    /// @notice Staking contract whose bonded stake qualifies verifiers.
    IStaking public immutable staking;
    /// @notice Registry of providers; this contract records PoG results there (POG_ROLE).
    IProviderRegistry public immutable registry;
    /// @inheritdoc IProofOfGpu
    uint256 public immutable minVerifierStake;
    /// @inheritdoc IProofOfGpu
    uint64 public immutable commitWindow;
    /// @inheritdoc IProofOfGpu
    uint64 public immutable rootChallengePeriod;

    /// @inheritdoc IProofOfGpu
    uint256 public roundCount;

    mapping(uint256 roundId => Round) private _rounds;
    mapping(uint256 roundId => mapping(uint256 gpuIndex => bytes32)) private _roots;
    mapping(uint256 roundId => mapping(uint256 gpuIndex => bytes32)) private _uuidHashes;

    /// @param staking_ Staking contract (verifier stake check)
    /// @param registry_ ProviderRegistry (activity, GPU count, UUID hashes; grant this POG_ROLE)
    /// @param minVerifierStake_ wei a verifier must have bonded to request a round
    /// @param commitWindow_ seconds from the request to the commit deadline
    /// @param rootChallengePeriod_ seconds after the commit during which roots can be challenged
    constructor(
        IStaking staking_,
        IProviderRegistry registry_,
        uint256 minVerifierStake_,
        uint64 commitWindow_,
        uint64 rootChallengePeriod_
    ) {
        if (address(staking_) == address(0) || address(registry_) == address(0)) revert ProofOfGpuZeroAddress();
        staking = staking_;
        registry = registry_;
        minVerifierStake = minVerifierStake_;
        commitWindow = commitWindow_;
        rootChallengePeriod = rootChallengePeriod_;
    }

    /// @inheritdoc IProofOfGpu
    function requestRound(address provider, uint256 n, bytes32 secretHash) external returns (uint256 roundId) {
        uint256 stake = staking.stakeOf(msg.sender);
        if (stake < minVerifierStake) revert ProofOfGpuVerifierNotStaked(msg.sender, stake, minVerifierStake);
        if (msg.sender == provider) revert ProofOfGpuSelfRequest(provider);
        if (!PogMath.isValidN(n)) revert ProofOfGpuBadN(n);
        if (secretHash == bytes32(0)) revert ProofOfGpuZeroSecretHash();
        if (!registry.isActive(provider)) revert ProofOfGpuProviderNotActive(provider);
        uint256 gpuCount = registry.gpuCountOf(provider);
        if (gpuCount == 0 || gpuCount > type(uint8).max) revert ProofOfGpuBadGpuCount(provider, gpuCount);

        roundId = ++roundCount;
        uint256 deadline = block.timestamp + commitWindow; // the seed deadline until the seed is fixed
        _rounds[roundId] = Round({
            provider: provider,
            requestBlock: uint64(block.number),
            n: uint32(n),
            verifier: msg.sender,
            commitDeadline: uint40(deadline),
            committedAt: 0,
            gpuCount: uint8(gpuCount),
            status: RoundStatus.Requested,
            seed: bytes32(0),
            secretHash: secretHash
        });
        for (uint256 g; g < gpuCount; ++g) {
            _uuidHashes[roundId][g] = registry.uuidHashOf(provider, g);
        }
        emit RoundRequested(roundId, provider, msg.sender, n, gpuCount, deadline);
    }

    /// @inheritdoc IProofOfGpu
    /// @dev Only the verifier can reveal, so the provider cannot fix the seed (and start its own
    /// clock) ahead of the verifier; the commit deadline restarts here, so a late reveal costs
    /// the provider no time.
    function fixSeed(uint256 roundId, bytes32 secret) external {
        Round storage r = _existing(roundId);
        if (msg.sender != r.verifier) revert ProofOfGpuNotVerifier(roundId, msg.sender);
        if (r.status != RoundStatus.Requested) revert ProofOfGpuWrongStatus(roundId, r.status);
        if (r.seed != bytes32(0)) revert ProofOfGpuSeedAlreadyFixed(roundId);
        if (block.timestamp > r.commitDeadline) revert ProofOfGpuSeedDeadlinePassed(roundId, r.commitDeadline);
        if (keccak256(abi.encode(secret)) != r.secretHash) revert ProofOfGpuWrongSecret(roundId);
        bytes32 seed = keccak256(abi.encode(BlockRandomness.hashAt(r.requestBlock), secret, roundId, r.provider));
        uint256 deadline = block.timestamp + commitWindow;
        r.seed = seed;
        r.commitDeadline = uint40(deadline);
        emit RoundSeedFixed(roundId, seed, deadline);
    }

    /// @inheritdoc IProofOfGpu
    function commitRoots(uint256 roundId, bytes32[] calldata roots) external {
        Round storage r = _existing(roundId);
        if (msg.sender != r.provider) revert ProofOfGpuNotProvider(roundId, msg.sender);
        if (r.status != RoundStatus.Requested) revert ProofOfGpuWrongStatus(roundId, r.status);
        if (r.seed == bytes32(0)) revert ProofOfGpuSeedNotFixed(roundId);
        if (block.timestamp > r.commitDeadline) revert ProofOfGpuCommitDeadlinePassed(roundId, r.commitDeadline);
        uint256 count = r.gpuCount;
        if (roots.length != count) revert ProofOfGpuWrongRootCount(roundId, roots.length, count);

        r.status = RoundStatus.Committed;
        r.committedAt = uint40(block.timestamp);
        for (uint256 g; g < count; ++g) {
            if (roots[g] == bytes32(0)) revert ProofOfGpuZeroRoot(roundId, g);
            _roots[roundId][g] = roots[g];
        }
        emit RootsCommitted(roundId, msg.sender, roots);
    }

    /// @inheritdoc IProofOfGpu
    function attest(uint256 roundId, uint256 measuredMillis, bytes32 gpuClass, uint256 tflopsMilli, bool passed)
        external
    {
        Round storage r = _existing(roundId);
        if (msg.sender != r.verifier) revert ProofOfGpuNotVerifier(roundId, msg.sender);
        if (r.status != RoundStatus.Committed) revert ProofOfGpuWrongStatus(roundId, r.status);
        r.status = RoundStatus.Attested;
        emit RoundAttested(roundId, r.provider, measuredMillis, gpuClass, tflopsMilli, passed);
        registry.setPogStatus(r.provider, roundId, passed ? gpuClass : bytes32(0), tflopsMilli, passed);
    }

    /// @inheritdoc IProofOfGpu
    /// @dev A committed round its verifier never attested is voided, not failed: the contract
    /// cannot tell a verifier that stopped from roots that are wrong (the verifier's own sweep
    /// attests those as failed and challenges them inside the period).
    function markFailed(uint256 roundId) external {
        Round storage r = _existing(roundId);
        if (r.status == RoundStatus.Committed) {
            uint256 attestEnd = uint256(r.committedAt) + rootChallengePeriod;
            if (block.timestamp <= attestEnd) revert ProofOfGpuAttestWindowOpen(roundId, attestEnd);
            r.status = RoundStatus.Voided;
            emit RoundVoided(roundId, r.provider);
            return;
        }
        if (r.status != RoundStatus.Requested) revert ProofOfGpuWrongStatus(roundId, r.status);
        if (block.timestamp <= r.commitDeadline) revert ProofOfGpuCommitDeadlineNotPassed(roundId, r.commitDeadline);
        if (r.seed == bytes32(0)) {
            r.status = RoundStatus.Voided;
            emit RoundVoided(roundId, r.provider);
            return;
        }
        r.status = RoundStatus.Failed;
        emit RoundFailed(roundId, r.provider);
        registry.setPogStatus(r.provider, roundId, bytes32(0), 0, false);
    }

    /// @inheritdoc IProofOfGpu
    function round(uint256 roundId) external view returns (Round memory) {
        return _existing(roundId);
    }

    /// @inheritdoc IProofOfGpu
    function gpuSeedOf(uint256 roundId, uint256 gpuIndex) external view returns (bytes32) {
        Round storage r = _existing(roundId);
        if (r.seed == bytes32(0)) revert ProofOfGpuSeedNotFixed(roundId);
        if (gpuIndex >= r.gpuCount) revert ProofOfGpuGpuIndexOutOfRange(roundId, gpuIndex, r.gpuCount);
        return PogMath.gpuSeed(r.seed, gpuIndex, _uuidHashes[roundId][gpuIndex]);
    }

    /// @inheritdoc IProofOfGpu
    function rootOf(uint256 roundId, uint256 gpuIndex) external view returns (bytes32) {
        Round storage r = _existing(roundId);
        if (r.committedAt == 0) revert ProofOfGpuWrongStatus(roundId, r.status);
        if (gpuIndex >= r.gpuCount) revert ProofOfGpuGpuIndexOutOfRange(roundId, gpuIndex, r.gpuCount);
        return _roots[roundId][gpuIndex];
    }

    /// @inheritdoc IProofOfGpu
    function uuidHashOf(uint256 roundId, uint256 gpuIndex) external view returns (bytes32) {
        Round storage r = _existing(roundId);
        if (gpuIndex >= r.gpuCount) revert ProofOfGpuGpuIndexOutOfRange(roundId, gpuIndex, r.gpuCount);
        return _uuidHashes[roundId][gpuIndex];
    }

    function _existing(uint256 roundId) private view returns (Round storage r) {
        r = _rounds[roundId];
        if (r.status == RoundStatus.None) revert ProofOfGpuUnknownRound(roundId);
    }
}
