// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Randomness from the hash of the block after a recorded block
/// @notice A request or challenge records its block b; its randomness is blockhash(b + 1), which
/// nobody (short of b+1's proposer) knows when the transaction is sent. The EVM only serves the
/// hashes of the last 256 blocks, so the value must be read (and stored) within that horizon.
library BlockRandomness {
    /// @notice Number of past blocks whose hash the EVM serves.
    uint256 internal constant HORIZON = 256;

    /// @notice blockhash(targetBlock) cannot be read yet: the current block is not past it.
    error BlockRandomnessNotYetAvailable(uint256 targetBlock, uint256 currentBlock);
    /// @notice blockhash(targetBlock) is older than 256 blocks and no longer readable.
    error BlockRandomnessExpired(uint256 targetBlock, uint256 currentBlock);

    /// @notice blockhash(recordedBlock + 1); reverts while that block is the current one or in
    /// the future, and once it is more than 256 blocks old.
    function hashAfter(uint256 recordedBlock) internal view returns (bytes32) {
        uint256 target = recordedBlock + 1;
        if (block.number <= target) revert BlockRandomnessNotYetAvailable(target, block.number);
        if (block.number - target > HORIZON) revert BlockRandomnessExpired(target, block.number);
        return blockhash(target);
    }

    /// @notice True once blockhash(recordedBlock + 1) can no longer be read.
    function isExpired(uint256 recordedBlock) internal view returns (bool) {
        return block.number > recordedBlock + 1 + HORIZON;
    }
}
