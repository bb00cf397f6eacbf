// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {MerkleProofLib} from "../libraries/MerkleProofLib.sol";
import {PogMath} from "../libraries/PogMath.sol";
import {BlockRandomness} from "../libraries/BlockRandomness.sol";

/// @title Test harness exposing MerkleProofLib, PogMath and BlockRandomness
/// @notice Only for tests: lets brownie call the libraries; elementGas is state-changing so that
/// a transaction reports the gas of one element recomputation.
contract ProofLibrariesHarness {
    event ElementMeasured(int256 value);

    function leafHash(bytes calldata data) external pure returns (bytes32) {
        return MerkleProofLib.leafHash(data);
    }

    function verify(bytes32[] calldata proof, bytes32 root, bytes32 leaf, uint256 index, uint256 size)
        external
        pure
        returns (bool)
    {
        return MerkleProofLib.verify(proof, root, leaf, index, size);
    }

    /// @notice RFC 9162 MTH over leaf data (a naive recursive reference, for small trees only).
    function rootOf(bytes[] memory leaves) external pure returns (bytes32) {
        return _mth(leaves, 0, leaves.length);
    }

    function _mth(bytes[] memory leaves, uint256 from, uint256 count) private pure returns (bytes32) {
        if (count == 1) return MerkleProofLib.leafHashMemory(leaves[from]);
        uint256 k = 1;
        while (k * 2 < count) k *= 2;
        return MerkleProofLib.nodeHash(_mth(leaves, from, k), _mth(leaves, from + k, count - k));
    }

    function gpuSeed(bytes32 roundSeed, uint256 g, bytes32 uuidHash) external pure returns (bytes32) {
        return PogMath.gpuSeed(roundSeed, g, uuidHash);
    }

    function keys(bytes32 seed, uint8 m) external pure returns (uint32, uint32) {
        return PogMath.keys(seed, m);
    }

    function word(bytes32 seed, uint8 m, uint256 w) external pure returns (uint32) {
        (uint32 k1, uint32 k2) = PogMath.keys(seed, m);
        return PogMath.word(k1, k2, w);
    }

    function element(bytes32 seed, uint256 n, uint256 i, uint256 j) external pure returns (int256) {
        return PogMath.element(seed, n, i, j);
    }

    function elementGas(bytes32 seed, uint256 n, uint256 i, uint256 j) external {
        emit ElementMeasured(PogMath.element(seed, n, i, j));
    }

    function challengeIndex(bytes32 randomness, bytes32 root, uint256 t, uint256 count)
        external
        pure
        returns (uint256)
    {
        return PogMath.challengeIndex(randomness, root, t, count);
    }

    function chunkElement(bytes calldata chunk, uint256 offset) external pure returns (int256) {
        return PogMath.chunkElement(chunk, offset);
    }

    function chunkPosition(uint256 chunkIndex, uint256 offset, uint256 n) external pure returns (uint256, uint256) {
        return PogMath.chunkPosition(chunkIndex, offset, n);
    }

    function hashAfter(uint256 recordedBlock) external view returns (bytes32) {
        return BlockRandomness.hashAfter(recordedBlock);
    }
}
