// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {IChallengeManager} from "../interfaces/IChallengeManager.sol";
import {IProofOfGpu} from "../interfaces/IProofOfGpu.sol";
import {MerkleProofLib} from "../libraries/MerkleProofLib.sol";
import {PogMath} from "../libraries/PogMath.sol";
import {ChallengeCore} from "./ChallengeCore.sol";

/// @title PogChallenges
/// @notice Challenges of a GPU's Proof-of-GPU root: opened by a staked verifier during the round's
/// root challenge period, ended early by a fraud proof (one element of C recomputed on-chain).
/// @dev Decisions where the design is silent:
/// - A PoG root is slashed at most once: after a fault, further challenges of that root are
///   refused and ones already open end Dismissed (bond returned, nobody slashed).
/// - Any chunk under the challenged root may be proven fraudulent, not only the challenged ones:
///   a committed root with one wrong element is false wherever the element lies.
/// - The fraud prover receives the slash reward (it did the work); the challenger gets its bond.
/// - A fraud proof is accepted while the challenge is open as well as answered, so that a wrong
///   chunk the verifier already holds (revealed off-chain behind a valid inclusion proof) settles
///   the challenge at once, whatever indices it drew.
abstract contract PogChallenges is ChallengeCore {
    uint256 private constant MIN_POG_K = 32;

    /// @dev keccak256(roundId, gpuIndex) of PoG roots already slashed for.
    mapping(bytes32 rootKey => bool) private _rootFaulted;

    /// @inheritdoc IChallengeManager
    function challengePog(uint256 roundId, uint256 gpuIndex, uint256 k)
        external
        payable
        returns (uint256 challengeId)
    {
        if (k < MIN_POG_K || k > MAX_K) revert ChallengeBadK(k);
        _requireStakedVerifier(msg.sender);
        IProofOfGpu.Round memory r = pog.round(roundId);
        if (r.committedAt == 0 || block.timestamp > uint256(r.committedAt) + pog.rootChallengePeriod()) {
            revert ChallengeRoundNotChallengeable(roundId);
        }
        if (r.provider == msg.sender) revert ChallengeSelfChallenge(msg.sender);
        if (_rootFaulted[_rootKey(roundId, gpuIndex)]) revert ChallengeRootFaulted(roundId, gpuIndex);
        bytes32 root = pog.rootOf(roundId, gpuIndex); // reverts for a GPU index outside the round
        challengeId = _open(Kind.Pog, r.provider, roundId, gpuIndex, root, PogMath.leafCount(r.n), k);
        emit PogChallenged(
            challengeId, roundId, gpuIndex, msg.sender, r.provider, k, msg.value, block.timestamp + responseWindow
        );
        emit ChallengeRandomnessFixed(challengeId, _challenges[challengeId].randomness);
    }

    /// @inheritdoc IChallengeManager
    function proveFraud(
        uint256 challengeId,
        uint256 chunkIndex,
        bytes calldata chunkData,
        bytes32[] calldata proof,
        uint256 elementOffset
    ) external {
        Challenge storage c = _existing(challengeId);
        if (c.kind != Kind.Pog) revert ChallengeWrongKind(challengeId, c.kind);
        if (c.status == Status.Answered) {
            uint256 windowEnd = uint256(c.answeredAt) + fraudWindow;
            if (block.timestamp > windowEnd) revert ChallengeWindowClosed(challengeId, windowEnd);
        } else if (c.status != Status.Open) {
            revert ChallengeWrongStatus(challengeId, c.status);
        }
        if (chunkIndex >= c.leafCount) revert ChallengeChunkOutOfRange(chunkIndex, c.leafCount);
        int256 claimed = PogMath.chunkElement(chunkData, elementOffset); // checks length and offset
        if (!MerkleProofLib.verify(proof, c.root, MerkleProofLib.leafHash(chunkData), chunkIndex, c.leafCount)) {
            revert ChallengeInvalidProof(0, chunkIndex);
        }
        int256 expected = _expectedElement(c.subject, c.gpuIndex, chunkIndex, elementOffset);
        if (expected == claimed) revert ChallengeNoFraud(chunkIndex, elementOffset, claimed);
        emit FraudProven(challengeId, msg.sender, chunkIndex, elementOffset, expected, claimed);
        _faultProvider(challengeId, c, msg.sender);
    }

    /// @dev ChallengeCore's hook, called when a PoG challenge's provider is at fault: a PoG root is
    /// slashed for once.
    function _markRootFaulted(Challenge storage c) internal override returns (bool first) {
        bytes32 key = _rootKey(c.subject, c.gpuIndex);
        if (_rootFaulted[key]) return false;
        _rootFaulted[key] = true;
        return true;
    }

    /// @dev Element `offset` of chunk `chunkIndex` of C for GPU `gpuIndex` in round `roundId`.
    function _expectedElement(uint256 roundId, uint256 gpuIndex, uint256 chunkIndex, uint256 offset)
        private
        view
        returns (int256)
    {
        uint256 n = pog.round(roundId).n;
        (uint256 row, uint256 col) = PogMath.chunkPosition(chunkIndex, offset, n);
        return PogMath.element(pog.gpuSeedOf(roundId, gpuIndex), n, row, col);
    }

    function _rootKey(uint256 roundId, uint256 gpuIndex) private pure returns (bytes32) {
        return keccak256(abi.encode(roundId, gpuIndex));
    }
}
